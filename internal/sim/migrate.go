package sim

import (
	"fmt"
	"maps"
	"math"
	"slices"
	"time"

	"github.com/strata-storage/strata/internal/des"
	"github.com/strata-storage/strata/internal/sched"
	"github.com/strata-storage/strata/internal/tape"
)

// Migration in virtual time. Files are created (all at once or as a
// Poisson stream), become candidates migrate_after later, and a policy
// pass every migrate_every (and, as core's migrate loops, again at once
// while files are due) takes the candidates in creation order, groups
// them into tape files with sched.Aggregate — the function strata serve's
// migrator calls — and hands the tape files to migrate_drives streams.
// Each stream does what core's migration writer does: hold a drive for the
// pass; append at the end of data of its cartridge (a locate when the head
// is elsewhere), streaming at the native rate while the disk is read;
// flush (a synchronising file mark) every flush_bytes and at the end of the
// pass — a file counts as migrated at the flush after it; change cartridge
// (flush, dismount, mount the fullest one with room) when the tape file does
// not fit. A file of at least stripe_min whose disk copy has several
// stripes (workload.stripe) keeps its striping on tape, as strata serve's
// does: its stripes are dealt round to min(stripes, streams) parts, each a
// tape file of its own written by another stream on another cartridge,
// and the file counts as migrated once every part is flushed. The
// writer's control flow is mirrored here, not shared: it is interleaved
// with catalog and library I/O in core. The timings (package tape) and the
// grouping (package sched) are shared.

// MigrateResult is what a migration run reports.
type MigrateResult struct {
	Files      int   `json:"files"`
	Bytes      int64 `json:"bytes"`
	TapeFiles  int   `json:"tape_files"`
	Passes     int   `json:"passes"`
	Cartridges int   `json:"cartridges_used"`
	// Seconds is the first file's creation to the last file on tape.
	Seconds float64 `json:"seconds"`
	// MBps is the bytes over the time passes were running: what the
	// drives deliver while migrating.
	MBps float64 `json:"mb_per_s"`
	// TimeToTape is creation to the flush that made the copy durable, s.
	Mean float64 `json:"time_to_tape_mean_s"`
	P95  float64 `json:"time_to_tape_p95_s"`
	Max  float64 `json:"time_to_tape_max_s"`
	// Drive time, as fractions of migrate_drives × the time in passes.
	Mounts      int     `json:"mounts"`
	Flushes     int     `json:"flushes"`
	Mounting    float64 `json:"mounting"`
	Positioning float64 `json:"positioning"` // locates, rewinds and flushes
	Transfer    float64 `json:"transfer"`
	Idle        float64 `json:"idle"`
}

type migFile struct {
	created des.Time
	onDisk  des.Time // a candidate migrate_after later
	size    int64
	done    des.Time
	vol     string // where migration wrote it
	off     int64
	// parts is where each part of a file striped on tape went (nil for a
	// file written whole); left counts the parts not yet flushed.
	parts []tapePart
	left  int
}

// tapePart is one stream's share of a file striped on tape.
type tapePart struct {
	vol       string
	off, size int64
}

// tapeFile is what a stream writes as one tape file: whole files grouped
// by sched.Aggregate (part < 0), or part `part` of the striped file
// files[0], holding `entries` of its stripes.
type tapeFile struct {
	files   []int
	part    int
	entries int
	bytes   int64
}

type cart struct {
	name   string
	end    int64 // end of data
	before int64 // written before the study (tape.written)
	drive  *tdrive
}

type migModel struct {
	sim   *des.Sim
	c     *Config
	g     tape.Generation
	cap   int64
	files []migFile
	next  int // first file no pass has taken
	// retry holds files a pass took and could not write (the
	// cartridges with room were in the recalls' drives): the next pass
	// takes them first.
	retry     []int
	carts     []*cart
	drives    []*tdrive
	buf       *des.Resource
	passes    int
	inPass    des.Time // total time passes ran
	passAt    des.Time
	running   bool
	robot     *robot
	site      *siteModel // set when the migration is part of a site study
	tick      bool       // a policy tick came while a pass ran
	chained   int        // passes run after the tick's first, without a tick
	every     des.Time
	after     des.Time
	migrated  int
	tapeFiles int
	flushes   int
	// stuck: a pass ended with every stream unable to find a cartridge
	// with room while tape files waited; nothing more can be written.
	stuck bool
}

// streams is how many migration streams a pass runs: migrate_drives, as
// far as there are drives and cartridges (a stream writes one cartridge at
// a time; Strata's extra writers wait for one).
func (m *migModel) streams() int {
	return min(m.c.Tape.migrateDrives, len(m.drives), len(m.carts))
}

// writerState is one migration stream for one pass.
type writerState struct {
	d       *tdrive
	cart    *cart
	pending []tapeFile // written since the last flush
	bytes   int64
}

func runMigrate(c *Config, seed uint64) (*Result, error) {
	t := c.Tape
	w := c.Workload
	s := des.NewSim(seed)
	m := newMigModel(s, c)
	need := int64(w.File) + 512 + 1<<20 // core's room check for a one-file tape file
	if need > m.cap {
		return nil, fmt.Errorf("sim: %s: workload.file_size %d does not fit on a %d-byte cartridge", c.Name, w.File, m.cap)
	}
	gap := s.Rand(0, 2)
	now := 0.0
	for i := 0; i < w.Files; i++ {
		if w.ArrivalRate > 0 && i > 0 {
			now += gap.ExpFloat64() / w.ArrivalRate
		}
		m.files = append(m.files, migFile{created: des.FromSeconds(now), onDisk: des.FromSeconds(now), size: int64(w.File)})
	}
	if total := int64(w.Files) * need; total > int64(t.Cartridges)*m.cap {
		return nil, fmt.Errorf("sim: %s: %d files of %d bytes need more than the %d cartridges", c.Name, w.Files, w.File, t.Cartridges)
	}
	m.drives = newDrives(s, t)
	if t.BufferRate > 0 {
		m.buf = s.Fluid.NewResource("disk reads", float64(t.BufferRate))
	}
	// the policy's ticker: a tick that comes during a pass waits for it
	// (Go's ticker keeps one), later ones are dropped
	m.startTicks()
	s.LimitEvents(2e9)
	if _, err := s.Run(des.Forever); err != nil {
		return nil, fmt.Errorf("sim: %s: %w", c.Name, err)
	}
	if m.stuck {
		return nil, fmt.Errorf("sim: %s: %d of %d files never reached tape: no cartridge had room for the next tape file (tape.cartridges, tape.capacity)", c.Name, len(m.files)-m.migrated, len(m.files))
	}
	if m.migrated != len(m.files) {
		return nil, fmt.Errorf("sim: %s: %d of %d files never reached tape", c.Name, len(m.files)-m.migrated, len(m.files))
	}
	return m.result(seed), nil
}

// newMigModel is a migration model of the study's library: its
// cartridges, no drives yet.
func newMigModel(s *des.Sim, c *Config) *migModel {
	t := c.Tape
	m := &migModel{sim: s, c: c, g: t.gen, cap: int64(t.Capacity), every: des.Duration(t.migrateEvery), after: des.Duration(t.migrateAfter), robot: &robot{}}
	for _, v := range slices.Sorted(maps.Keys(t.Written)) {
		m.carts = append(m.carts, &cart{name: v, end: int64(t.Written[v]), before: int64(t.Written[v])})
	}
	for i := 0; len(m.carts) < t.Cartridges; i++ {
		if name := fmt.Sprintf("V%05d", i); t.Written[name] == 0 && !slices.ContainsFunc(m.carts, func(c *cart) bool { return c.name == name }) {
			m.carts = append(m.carts, &cart{name: name})
		}
	}
	return m
}

// newDrives makes the library's drives.
func newDrives(s *des.Sim, t TapeConfig) []*tdrive {
	var ds []*tdrive
	for i := 0; i < t.Drives; i++ {
		d := &tdrive{id: fmt.Sprintf("drive%d", i), idx: int32(i)}
		d.head = s.Fluid.NewResource(d.id, t.gen.Rate)
		ds = append(ds, d)
	}
	return ds
}

// startTicks starts the policy's ticker: a tick that comes during a pass
// waits for it (Go's ticker keeps one), later ones are dropped. It stops
// when every file is on tape and no more will come.
func (m *migModel) startTicks() {
	var tick func()
	tick = func() {
		if m.running {
			m.tick = true
		} else {
			m.pass()
		}
		more := m.migrated < len(m.files) || m.site != nil && !m.site.ingestOver()
		if more && !m.stuck {
			m.sim.After(m.every, evMigTick, 0, tick)
		}
	}
	m.sim.After(m.every, evMigTick, 0, tick)
}

const (
	evMigTick uint16 = 70 + iota
	evMigLocate
	evMigXfer
	evMigFlush
	evMigMount
)

// pass takes every candidate (created at least migrate_after ago), groups
// them into tape files and runs the streams until all are written.
func (m *migModel) pass() {
	now := m.sim.Now()
	take := m.retry
	m.retry = nil
	for i := m.next; i < len(m.files) && len(take) < 100000; i++ {
		if m.files[i].onDisk+m.after > now {
			break // files are in the order they reached disk
		}
		take = append(take, i)
		m.next = i + 1
	}
	if len(take) == 0 {
		return
	}
	batches := m.tapeFilesOf(take)
	m.tapeFiles += len(batches)
	m.passes++
	m.running, m.passAt = true, now
	nw := m.streams()
	left, stuck := nw, 0
	queue := batches
	done := func() {
		if left--; left > 0 {
			return
		}
		failed := stuck == nw && len(queue) > 0
		if failed {
			if m.site != nil && m.roomLeft(queue[0]) {
				// the cartridges with room were in the recalls' drives:
				// the next pass takes these files again (a striped one
				// whole: what of it was written is space for repack)
				for _, tf := range queue {
					for _, i := range tf.files {
						m.files[i].parts, m.files[i].left = nil, 0
						m.retry = append(m.retry, i)
					}
				}
				slices.Sort(m.retry)
				m.retry = slices.Compact(m.retry) // a striped file's parts name it each
				m.tapeFiles -= len(queue)
			} else {
				m.stuck = true
			}
		}
		m.running = false
		m.inPass += m.sim.Now() - m.passAt
		// The next pass starts once the recaller, woken by the drives
		// this one freed, has decided (priority 2 runs after its
		// priority 1): core's pass first asks the catalog for its
		// candidates, which the recaller's decision does not wait for.
		switch {
		case !failed && m.chained < maxChained && m.candidates():
			// core's migrate loops while a pass finds files, nine
			// passes at most, before it waits for the next tick; a
			// pass that found no cartridge ends the loop with its error
			m.chained++
			m.sim.Schedule(m.sim.Now(), 2, evMigTick, 0, m.pass)
		case m.tick:
			m.tick, m.chained = false, 0
			m.sim.Schedule(m.sim.Now(), 2, evMigTick, 0, m.pass)
		default:
			m.chained = 0
		}
	}
	for k := 0; k < nw; k++ {
		var need int64
		if len(queue) > 0 {
			need = m.need(queue[0])
		}
		m.takeDrive(k, need, func(d *tdrive) { m.runWriter(d, &queue, &stuck, done) })
	}
}

// maxChained is how many passes core's migrate runs after the first
// while each finds files (hsm.Engine.migrate: nine in all).
const maxChained = 8

// candidates says whether a file waits for migration now.
func (m *migModel) candidates() bool {
	return len(m.retry) > 0 || m.next < len(m.files) && m.files[m.next].onDisk+m.after <= m.sim.Now()
}

// takeDrive gives writer k a drive: the k-th, or in a site study the
// first the recalls leave free, when one is (core's takeDrive).
func (m *migModel) takeDrive(k int, need int64, use func(d *tdrive)) {
	if m.site == nil {
		use(m.drives[k])
		return
	}
	m.site.takeDrive(need, use)
}

// tapeFilesOf groups the files take (in the order they reached disk)
// into tape files: each striped one into its parts, the runs of others
// with sched.Aggregate.
func (m *migModel) tapeFilesOf(take []int) []tapeFile {
	var out []tapeFile
	run := func(files []int) {
		if len(files) == 0 {
			return
		}
		sizes := make([]int64, len(files))
		for k, i := range files {
			sizes[k] = m.files[i].size
		}
		starts := sched.Aggregate(sizes, int64(m.c.Tape.Aggregate))
		for k, from := range starts {
			to := len(files)
			if k+1 < len(starts) {
				to = starts[k+1]
			}
			tf := tapeFile{files: files[from:to], part: -1, entries: to - from}
			for _, i := range tf.files {
				tf.bytes += m.files[i].size
			}
			out = append(out, tf)
		}
	}
	from := 0
	for k, i := range take {
		parts := m.stripedParts(m.files[i].size)
		if parts < 2 {
			continue
		}
		run(take[from:k])
		from = k + 1
		f := &m.files[i]
		f.parts, f.left = make([]tapePart, parts), parts
		stripes := int64(m.c.Workload.Stripe)
		var at int64 // stripes dealt so far
		for j := range parts {
			n := stripes / int64(parts)
			if int64(j) < stripes%int64(parts) {
				n++
			}
			bytes := f.size*(at+n)/stripes - f.size*at/stripes
			at += n
			out = append(out, tapeFile{files: take[k : k+1], part: j, entries: int(n), bytes: bytes})
		}
	}
	run(take[from:])
	return out
}

// stripedParts is how many parts a file of size is written in: its
// stripes dealt round to the pass's streams when it is at least
// stripe_min and its disk copy striped, else 1.
func (m *migModel) stripedParts(size int64) int {
	if s := m.c.Workload.Stripe; s > 1 && size >= m.c.Tape.stripeMin {
		return min(s, m.streams())
	}
	return 1
}

// need is the room tape file tf takes (core's: its bytes, 512 an entry,
// 1 MiB to spare).
func (m *migModel) need(tf tapeFile) int64 {
	return tf.bytes + int64(tf.entries)*512 + 1<<20
}

// fits says whether a writer may append a tape file of need bytes to the
// cartridge in d (core's takeDrive prefers such a drive).
func (m *migModel) fits(d *tdrive, need int64) bool {
	c := m.cartNamed(d.vol)
	return c != nil && c.end+need <= m.cap && !m.recalling(c.name)
}

// runWriter is one stream of a pass on drive d: tape files from the queue
// until it is empty, then a flush; done when it ends.
func (m *migModel) runWriter(d *tdrive, queue *[]tapeFile, stuck *int, done func()) {
	w := &writerState{d: d}
	if w.d.vol != "" {
		w.cart = m.cartNamed(w.d.vol)
	}
	end := func() {
		if m.site != nil {
			// the cartridge stays in the drive, which the recalls
			// may use and empty: mounted() keeps track from here
			if w.cart != nil {
				w.cart.drive = nil
			}
			m.site.releaseDrive(d)
		}
		done()
	}
	var loop func()
	loop = func() {
		if len(*queue) == 0 {
			m.flush(w, end)
			return
		}
		k := m.nextFor(w, *queue)
		b := (*queue)[k]
		*queue = slices.Delete(*queue, k, k+1)
		m.write(w, b, loop, func() { // no cartridge with room: give the tape file back, end the stream
			*queue = append([]tapeFile{b}, *queue...)
			*stuck++
			end()
		})
	}
	loop()
}

// nextFor is the queue's first tape file w may write: not a part of a file
// another part of which is on w's cartridge (the parts of a striped file
// go to other cartridges), unless only such parts are left.
func (m *migModel) nextFor(w *writerState, queue []tapeFile) int {
	if w.cart == nil {
		return 0
	}
	for k, tf := range queue {
		if tf.part < 0 || !slices.ContainsFunc(m.files[tf.files[0]].parts, func(p tapePart) bool { return p.vol == w.cart.name }) {
			return k
		}
	}
	return 0
}

// roomLeft says whether any cartridge, mounted or not, has room for tape
// file tf.
func (m *migModel) roomLeft(tf tapeFile) bool {
	need := m.need(tf)
	return slices.ContainsFunc(m.carts, func(c *cart) bool { return c.end+need <= m.cap })
}

func (m *migModel) cartNamed(v string) *cart {
	for _, c := range m.carts {
		if c.name == v {
			return c
		}
	}
	return nil
}

// write appends tape file b, changing cartridge first if it does not
// fit, and flushes after when enough is pending. When no cartridge that
// no other drive holds has room, it calls stuck instead.
func (m *migModel) write(w *writerState, b tapeFile, then, stuck func()) {
	bytes, need := b.bytes, m.need(b)
	appendIt := func() {
		c := w.cart
		d := w.d
		move := des.Time(0)
		if d.off != c.end {
			move = des.Duration(m.g.LocateTime(m.g.PositionIn(d.off, m.cap), m.g.PositionIn(c.end, m.cap)))
			d.stats.Locates++
		} else {
			move = max(0, d.backhitched-m.sim.Now()) // writing on from a flush
		}
		d.stats.Positioning += time.Duration(move)
		m.sim.After(move, evMigLocate, d.idx, func() {
			d.off = c.end
			f := &des.Flow{Path: []*des.Resource{d.head}, Size: bytes, Kind: evMigXfer, Obj: d.idx}
			if m.buf != nil {
				f.Path = append(f.Path, m.buf)
			}
			start := m.sim.Now()
			f.Done = func() {
				d.stats.Transfer += time.Duration(m.sim.Now() - start)
				off := c.end + 512
				if b.part >= 0 {
					m.files[b.files[0]].parts[b.part] = tapePart{vol: c.name, off: off, size: bytes}
				} else {
					for _, i := range b.files {
						m.files[i].vol, m.files[i].off = c.name, off
						off += m.files[i].size
					}
				}
				c.end += bytes + 1<<10 // header and trailer
				d.off = c.end
				w.pending = append(w.pending, b)
				w.bytes += bytes
				if w.bytes >= int64(m.c.Tape.FlushBytes) {
					m.flush(w, then)
					return
				}
				then()
			}
			m.sim.Fluid.Start(f)
		})
	}
	if w.cart != nil && w.cart.end+need <= m.cap {
		appendIt()
		return
	}
	// change cartridge: flush what is pending, dismount, mount the next
	// one with room
	m.flush(w, func() {
		next := m.pick(need, w.cart)
		if next == nil {
			stuck()
			return
		}
		m.change(w.d, w.cart, next, func() {
			w.cart = next
			appendIt()
		})
	})
}

// pick is the fullest cartridge with room that no drive holds and no
// recall batch has, the first of equals (core's pickVolume: tapes are
// filled one by one).
func (m *migModel) pick(need int64, not *cart) *cart {
	var best *cart
	for _, c := range m.carts {
		if c != not && c.drive == nil && c.end+need <= m.cap && !m.mounted(c.name) && !m.recalling(c.name) && (best == nil || c.end > best.end) {
			best = c
		}
	}
	return best
}

// recalling says whether a recall batch has volume (a site study's).
func (m *migModel) recalling(volume string) bool {
	return m.site != nil && m.site.rec.sch.Serving(volume) != ""
}

// cartOn is the cartridge a writer has chosen for d, mounted or not.
func (m *migModel) cartOn(d *tdrive) *cart {
	for _, c := range m.carts {
		if c.drive == d {
			return c
		}
	}
	return nil
}

// mounted says whether a drive holds volume (in a site study the recalls'
// drives hold cartridges too).
func (m *migModel) mounted(volume string) bool {
	for _, d := range m.drives {
		if d.vol == volume {
			return true
		}
	}
	return false
}

// change dismounts from (if any) and mounts to on d.
func (m *migModel) change(d *tdrive, from, to *cart, then func()) {
	mount := func() {
		to.drive = d
		m.robotMove(d, func() {
			d.stats.Mounting += m.g.Load
			m.sim.After(des.Duration(m.g.Load), evMigMount, d.idx, func() {
				d.vol, d.off, d.backhitched = to.name, 0, 0
				d.stats.Mounts++
				then()
			})
		})
	}
	if from == nil {
		mount()
		return
	}
	rw := m.g.RewindTime(m.g.PositionIn(d.off, m.cap))
	d.stats.Positioning += rw
	d.stats.Mounting += m.g.Unload
	m.sim.After(des.Duration(rw+m.g.Unload), evMigMount, d.idx, func() {
		m.robotMove(d, func() {
			from.drive = nil
			d.vol, d.off = "", 0
			d.stats.Dismounts++
			mount()
		})
	})
}

// robotMove is one exchange of the library's one robot.
func (m *migModel) robotMove(d *tdrive, fn func()) { m.robot.move(m.sim, d, m.g, evMigMount, fn) }

// robot is the library's one robot: exchanges first come, first served
// (the emulator's robot token), shared by recalls and migration.
type robot struct{ free des.Time }

// move runs fn when d's exchange is done, after those before it.
func (r *robot) move(s *des.Sim, d *tdrive, g tape.Generation, kind uint16, fn func()) {
	r.free = max(s.Now(), r.free) + des.Duration(g.Exchange)
	d.stats.Mounting += time.Duration(r.free - s.Now())
	s.Schedule(r.free, 0, kind, d.idx, fn)
}

// flush makes the pending tape files durable; their files are migrated.
func (m *migModel) flush(w *writerState, then func()) {
	if len(w.pending) == 0 {
		then()
		return
	}
	d := w.d
	d.backhitched = m.sim.Now() + des.Duration(m.g.Backhitch)
	m.sim.After(0, evMigFlush, d.idx, func() {
		m.flushes++
		for _, tf := range w.pending {
			for _, i := range tf.files {
				if f := &m.files[i]; tf.part >= 0 {
					if f.left--; f.left > 0 {
						continue // its other parts are not durable yet
					}
				}
				m.files[i].done = m.sim.Now()
				m.migrated++
				if m.site != nil {
					m.site.migrated(i)
				}
			}
		}
		w.pending, w.bytes = w.pending[:0], 0
		then()
	})
}

func (m *migModel) result(seed uint64) *Result {
	mr := &MigrateResult{Files: len(m.files), TapeFiles: m.tapeFiles, Passes: m.passes, Flushes: m.flushes}
	var last des.Time
	lat := make([]float64, len(m.files))
	sum := 0.0
	for i, f := range m.files {
		mr.Bytes += f.size
		last = max(last, f.done)
		lat[i] = (f.done - f.created).Seconds()
		sum += lat[i]
	}
	slices.Sort(lat)
	mr.Mean = round3(sum / float64(len(lat)))
	mr.P95 = round3(lat[min(len(lat)-1, int(math.Ceil(0.95*float64(len(lat))))-1)])
	mr.Max = round3(lat[len(lat)-1])
	mr.Seconds = round3((last - m.files[0].created).Seconds())
	if m.inPass > 0 {
		mr.MBps = round3(float64(mr.Bytes) / m.inPass.Seconds() / 1e6)
	}
	for _, c := range m.carts {
		if c.end > c.before {
			mr.Cartridges++
		}
	}
	var st tape.Stats
	for _, d := range m.drives {
		st.Add(d.stats)
	}
	mr.Mounts = int(st.Mounts)
	if total := float64(m.inPass) * float64(m.streams()); total > 0 {
		mr.Mounting = round3(float64(st.Mounting) / total)
		mr.Positioning = round3(float64(st.Positioning) / total)
		mr.Transfer = round3(float64(st.Transfer) / total)
		mr.Idle = round3(math.Max(0, 1-mr.Mounting-mr.Positioning-mr.Transfer))
	}
	return &Result{Name: m.c.Name, Seed: seed, Op: "migrate", Bytes: mr.Bytes, Seconds: mr.Seconds, MBps: mr.MBps,
		Events: m.sim.Events(), Fingerprint: fmt.Sprintf("%016x", m.sim.Fingerprint()), Migrate: mr, Bound: Bound(m.c)}
}
