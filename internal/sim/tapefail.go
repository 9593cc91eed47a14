package sim

import (
	"fmt"
	"math/rand/v2"
	"strconv"
	"strings"
	"time"

	"github.com/strata-storage/strata/internal/des"
	"github.com/strata-storage/strata/internal/sched"
)

// Failures in recall studies, handled as strata serve's recaller handles
// them (internal/hsm/recall.go): a cartridge found unreadable at mount
// sends its recalls to the next copy (fallback), or loses them when no
// copy is left; a failed drive is taken out of service, emptied, and the
// rest of its batch is queued again for the other drives. The recopy of a
// bad cartridge is what a site runs after one: its files recalled from
// another copy through the same scheduler and written to a new cartridge
// by one drive, which starts with the first file on disk and trails the
// reads.

// fillFailures checks the failure keys of [tape].
func (t *TapeConfig) fillFailures() error {
	if t.Copies <= 0 {
		t.Copies = 1
	}
	if t.BadCartridges < 0 || t.BadCartridges > t.Cartridges {
		return fmt.Errorf("tape.bad_cartridges = %d: want 0 … %d (tape.cartridges)", t.BadCartridges, t.Cartridges)
	}
	if t.FailedDrives < 0 || t.FailedDrives >= t.Drives && t.FailedDrives > 0 {
		return fmt.Errorf("tape.failed_drives = %d: want fewer than the %d drives", t.FailedDrives, t.Drives)
	}
	if t.DriveFailAt != "" {
		d, err := time.ParseDuration(t.DriveFailAt)
		if err != nil || d < 0 {
			return fmt.Errorf("tape.drive_fail_at %q: want a duration from the start (\"0s\", \"2h\")", t.DriveFailAt)
		}
		t.driveFailAt = des.Time(d)
	}
	if t.Recopy && (t.Copies < 2 || t.BadCartridges == 0) {
		return fmt.Errorf("tape.recopy = true needs tape.copies ≥ 2 and tape.bad_cartridges ≥ 1")
	}
	if !(t.MountFailures >= 0 && t.MountFailures <= 1) {
		return fmt.Errorf("tape.mount_failures = %g: want the chance a mount fails, 0 … 1", t.MountFailures)
	}
	if t.MountFailures > 0 && t.Recopy {
		return fmt.Errorf("tape.mount_failures and tape.recopy are not modelled together")
	}
	t.mountRetry = 10 * time.Second // strata serve's default
	if t.MountRetry != "" {
		d, err := time.ParseDuration(t.MountRetry)
		if err != nil || d <= 0 {
			return fmt.Errorf("tape.mount_retry %q: want a pause (\"10s\")", t.MountRetry)
		}
		t.mountRetry = d
	}
	return nil
}

// copyVolume is the cartridge that holds copy k of what volume holds in
// the first copy.
func copyVolume(volume string, k int) string {
	if k == 0 {
		return volume
	}
	return "C" + strconv.Itoa(k) + "-" + volume
}

// tapeFailures is a recall run's failure state.
type tapeFailures struct {
	copies int
	bad    map[string]bool // unreadable cartridges (membership only)
	known  map[string]bool // found unreadable at a mount
	copyOf []int           // the copy each user request is on

	lost, badMounts, fromCopy, drivesFailed int

	// the robot's failed mounts: the chance, the draws, each cartridge's
	// failed rounds in a row
	mountChance         float64
	mountRand           *rand.Rand
	mountRetry          time.Duration
	mountFails          map[string]int
	mountFailed, gaveUp int

	// recopy: bytes to read back from other copies, and to write
	recopy       bool
	recopyFile   int64
	recopyLeft   int // recopy reads not yet on disk
	recopyBytes  int64
	recopyNext   int64 // next request ID
	firstBad     des.Time
	recopyDone   des.Time
	writeStarted bool
	writer       *tdrive
	writeFrom    des.Time   // the writer's streaming began
	streaming    *des.Event // when it will have streamed what is left
	streamed     bool       // it has streamed the copy's bytes
	readsDone    des.Time   // the last read is on disk
	lastFile     int64
	readBytes    int64 // recopy bytes on disk
	written      int64 // by writers before this one
}

func (m *recallModel) initFailures(c *Config) {
	t := c.Tape
	f := &tapeFailures{copies: t.Copies, bad: map[string]bool{}, known: map[string]bool{},
		copyOf: make([]int, len(m.reqs)), recopy: t.Recopy, recopyFile: int64(c.Workload.File), recopyNext: int64(len(m.reqs))}
	for i := 0; i < t.BadCartridges; i++ {
		f.bad[fmt.Sprintf("V%05d", i)] = true
	}
	if t.MountFailures > 0 {
		f.mountChance, f.mountRand, f.mountRetry, f.mountFails = t.MountFailures, m.sim.Rand(0, 11), t.mountRetry, map[string]int{}
	}
	m.fail = f
	if t.FailedDrives > 0 {
		m.sim.Schedule(t.driveFailAt, 0, evTapeFail, 0, func() {
			for _, d := range m.drives[:t.FailedDrives] {
				d.failing = true
				if !d.busy {
					m.driveOut(d, nil)
				}
			}
		})
	}
}

// request is user request i as the scheduler queues it: on the first copy
// not known to be unreadable.
func (m *recallModel) request(i int) (sched.Request, bool) {
	q, f := m.reqs[i], m.fail
	for f.copyOf[i] < f.copies && f.known[copyVolume(q.Volume, f.copyOf[i])] {
		f.copyOf[i]++
	}
	if f.copyOf[i] >= f.copies {
		return sched.Request{}, false
	}
	if f.copyOf[i] > 0 {
		f.fromCopy++
	}
	return sched.Request{ID: int64(i), Key: strconv.Itoa(i), Volume: copyVolume(q.Volume, f.copyOf[i]), Offset: q.Offset, Size: q.Size, Queued: m.now()}, true
}

// queue hands user request i to the scheduler, or loses it when no copy
// is left.
func (m *recallModel) queue(i int) {
	r, ok := m.request(i)
	if !ok {
		m.fail.lost++
		m.doneAt[i] = m.sim.Now()
		m.done++
		return
	}
	r.Queued = epoch.Add(time.Duration(m.queued[i]))
	m.sch.Add(r)
}

// badMount ends a mount that found vol unreadable: the cartridge goes
// back, and every recall queued for it (this batch's and any queued since)
// goes to its next copy. A first bad mount of a cartridge starts its
// recopy.
func (m *recallModel) badMount(d *tdrive, vol string, batch []sched.Request) {
	f := m.fail
	f.badMounts++
	first := !f.known[vol]
	f.known[vol] = true
	reqs := append(append([]sched.Request{}, batch...), m.sch.Remove(vol)...)
	m.after(d, des.Duration(m.g.Unload), &d.stats.Mounting, evTapeUnload, func() {
		m.robotMove(d, func() {
			d.vol, d.off = "", 0
			d.stats.Dismounts++
			for _, q := range reqs {
				if q.ID < int64(len(m.reqs)) {
					m.queue(int(q.ID))
				}
			}
			if first && f.recopy && !strings.HasPrefix(vol, "C") {
				m.startRecopy(vol)
			}
			m.sch.Done(vol, nil)
			m.release(d)
		})
	})
}

// mountFailed draws whether the robot fails the mount it is making.
func (m *recallModel) mountFailed() bool {
	f := m.fail
	return f.mountChance > 0 && f.mountRand.Float64() < f.mountChance
}

// failedMount handles a mount the robot failed as strata serve's recaller
// does: the drive stays empty and free; the batch waits for the
// cartridge's next round (sched.RetryMount's pause, sched.Hold), or after
// the last round goes to the next copy, or is lost with none left.
func (m *recallModel) failedMount(d *tdrive, vol string, batch []sched.Request) {
	f := m.fail
	f.mountFailed++
	f.mountFails[vol]++
	hold, giveUp := sched.RetryMount(f.mountRetry, f.mountFails[vol])
	if giveUp {
		delete(f.mountFails, vol)
		f.gaveUp++
		m.sch.Done(vol, nil)
		for _, q := range batch {
			if q.ID < int64(len(m.reqs)) {
				f.copyOf[q.ID]++ // past this copy, to the next or lost
				m.queue(int(q.ID))
			}
		}
	} else {
		at := m.sim.Now() + des.Duration(hold)
		m.sch.Hold(vol, epoch.Add(time.Duration(at)))
		m.sch.Done(vol, batch)
		m.sim.Schedule(at, 1, evTapeDecide, 0, m.poke)
	}
	m.release(d)
}

// release ends a drive's work: it is free, or, failing, taken out.
func (m *recallModel) release(d *tdrive) {
	if d.failing {
		m.driveOut(d, nil)
		return
	}
	m.free1(d)
}

// driveOut takes a failing drive out of service: the rest of its batch
// (retry) is queued again and its cartridge taken out (rewind, unload,
// the robot).
func (m *recallModel) driveOut(d *tdrive, retry func()) {
	d.failing, d.out, d.busy = false, true, true
	m.fail.drivesFailed++
	if retry != nil {
		retry()
	}
	m.recopyPause()
	if d.vol == "" {
		m.poke()
		return
	}
	m.after(d, des.Duration(m.g.RewindTime(m.pos(max(d.off, 0)))+m.g.Unload), &d.stats.Positioning, evTapeUnload, func() {
		m.robotMove(d, func() {
			d.vol = ""
			d.stats.Dismounts++
			m.poke()
		})
	})
}

// startRecopy queues, from the second copy, every file the bad cartridge
// vol held (front to back up to the fill), as recalls.
func (m *recallModel) startRecopy(vol string) {
	f := m.fail
	if f.firstBad == 0 {
		f.firstBad = m.sim.Now()
	}
	written := int64(m.fill * float64(m.cap))
	size := max(f.recopyFile, 1)
	for off := int64(0); off+size <= written; off += size {
		f.recopyLeft++
		f.recopyBytes += size
		m.sch.Add(sched.Request{ID: f.recopyNext, Key: "recopy-" + strconv.FormatInt(f.recopyNext, 10), Volume: copyVolume(vol, 1),
			Offset: off, Size: size, Queued: m.now()})
		f.recopyNext++
	}
}

// recopyRead counts a recopy read on disk. The first one starts the
// write: one drive writes the new copy from the disk buffer while the
// reads go on (as CTA's repack does), trailing them.
func (m *recallModel) recopyRead(size int64) {
	f := m.fail
	f.recopyLeft--
	f.readBytes += size
	if f.recopyLeft == 0 {
		f.readsDone = m.sim.Now()
		f.lastFile = size
		m.recopyFinish()
	}
	if !f.writeStarted {
		f.writeStarted = true
		m.recopyWrite()
	}
}

// recopyWrite takes the first free drive to write the new copy: empty it,
// mount a new cartridge, stream. It waits (recopyWait) when no drive is
// free, and goes before the recalls when one frees.
func (m *recallModel) recopyWrite() {
	f := m.fail
	var d *tdrive
	for _, x := range m.drives {
		if !x.busy && !x.out && !x.failing {
			d = x
			break
		}
	}
	if d == nil {
		m.recopyWait = true
		return
	}
	m.recopyWait = false
	d.busy, d.since = true, m.sim.Now()
	f.writer = d
	write := func() {
		m.robotMove(d, func() {
			m.after(d, des.Duration(m.g.Load), &d.stats.Mounting, evTapeLoad, func() {
				d.vol, d.off = "recopy", 0
				d.stats.Mounts++
				f.writeFrom = m.sim.Now()
				f.streaming = m.sim.After(des.FromSeconds(float64(f.recopyBytes-f.written)/m.g.Rate), evTapeXfer, d.idx, func() {
					f.streamed = true
					m.recopyFinish()
				})
			})
		})
	}
	if d.vol == "" {
		write()
		return
	}
	m.after(d, des.Duration(m.g.RewindTime(m.pos(max(d.off, 0)))+m.g.Unload), &d.stats.Positioning, evTapeUnload, func() {
		m.robotMove(d, func() {
			d.vol = ""
			d.stats.Dismounts++
			write()
		})
	})
}

// recopyPause stops a writer that has caught up with the reads when the
// reads have no drive left but the writer's (a drive failed under them):
// it flushes what it has written and gives its drive to the reads; the
// next read on disk starts a writer again for the rest.
func (m *recallModel) recopyPause() {
	f := m.fail
	d := f.writer
	if d == nil || f.streamed || f.writeFrom == 0 || f.recopyLeft == 0 {
		return
	}
	for _, x := range m.drives {
		if !x.busy && !x.out && !x.failing {
			return // the reads have a drive
		}
	}
	m.sim.Cancel(f.streaming)
	done := int64(float64(m.sim.Now()-f.writeFrom) * m.g.Rate / 1e9)
	f.written = min(f.readBytes, f.written+done)
	d.stats.Transfer += time.Duration(m.sim.Now() - f.writeFrom)
	f.writer, f.writeFrom, f.writeStarted = nil, 0, false
	// The sync costs the streaming already charged; the reads locate.
	m.after(d, 0, &d.stats.Transfer, evTapeXfer, func() { m.release(d) })
}

// recopyFinish ends the write once it has streamed the copy's bytes and
// the last read is on disk: the last file written after it arrived, a
// flush, and the new copy is whole.
func (m *recallModel) recopyFinish() {
	f := m.fail
	if !f.streamed || f.readsDone == 0 || f.recopyDone != 0 {
		return
	}
	d := f.writer
	tail := max(0, f.readsDone+des.FromSeconds(float64(f.lastFile)/m.g.Rate)-m.sim.Now())
	d.stats.Transfer += time.Duration(m.sim.Now() - f.writeFrom)
	m.after(d, tail, &d.stats.Transfer, evTapeXfer, func() {
		d.off = f.recopyBytes
		f.recopyDone = m.sim.Now()
		m.release(d)
	})
}

// failureResult fills a recall result's failure counts.
func (m *recallModel) failureResult(rr *RecallResult) {
	f := m.fail
	rr.Files -= f.lost
	rr.Lost, rr.BadMounts, rr.FromCopy, rr.DrivesFailed = f.lost, f.badMounts, f.fromCopy, f.drivesFailed
	rr.MountFailures, rr.GaveUp = f.mountFailed, f.gaveUp
	rr.RecopyBytes = f.recopyBytes
	if f.recopyDone > 0 {
		rr.RecopySeconds = round3((f.recopyDone - f.firstBad).Seconds())
	}
}
