package sim

import (
	"math"

	"github.com/strata-storage/strata/internal/des"
)

// DiskParams describe one hard disk drive (defaults from data sheets: WD
// Ultrastar DC HC310, Seagate Exos X18, Hitachi Ultrastar 15K450; DiskSim's
// Cheetah 9LP for the extracted seek curve).
type DiskParams struct {
	RPM       float64 `toml:"rpm"`
	SeekAvg   float64 `toml:"seek_avg_ms"`   // average seek, ms
	SeekTrack float64 `toml:"seek_track_ms"` // track-to-track seek, ms
	Settle    float64 `toml:"write_settle_ms"`
	RateOD    Rate    `toml:"rate_outer"` // media rate at the outer diameter
	RateID    Rate    `toml:"rate_inner"` // and at the inner
	Zones     int     `toml:"zones"`
	Capacity  Size    `toml:"capacity"`
	Cache     Size    `toml:"cache"`     // on-disk buffer (write-back and read-ahead)
	Interface Rate    `toml:"interface"` // host interface (ATA, SAS, FC) rate
	Overhead  float64 `toml:"overhead_ms"`
	ReadAhead bool    `toml:"read_ahead"`
	// ReadAheadGap is the largest skip ahead of a sequential stream that
	// read-ahead still serves (the media streams through the gap and its
	// bytes are dropped): a RAID-5 member skips the parity unit it holds
	// once a turn of the stripes. Current drives keep streaming across
	// such a gap; 2003-era drives' look-ahead served exactly sequential
	// reads only (0), and a member paid a revolution for each parity unit.
	ReadAheadGap Size `toml:"read_ahead_gap"`
	// Segments is how many sequential read streams the drive keeps read
	// ahead at once (its cache segments; 0 or 1: one). Prefetch is what
	// it reads on for a sequential stream before it turns to another
	// stream's command. Drives do not publish either; the values below are
	// assumptions, and with one segment a drive reading for several
	// streams seeks at every switch.
	Segments int  `toml:"read_ahead_segments"`
	Prefetch Size `toml:"prefetch"`
}

// Disk presets by name.
var DiskPresets = map[string]DiskParams{
	// 2003-era 7,200 rpm ATA drive with a 2 MB buffer (Maxtor class; the
	// ALICE Infortrend arrays).
	"ata-2003-2mb": {RPM: 7200, SeekAvg: 9, SeekTrack: 1, Settle: 0.5, RateOD: 58e6, RateID: 32e6, Zones: 16, Capacity: 250e9, Cache: 2 << 20, Interface: 100e6, Overhead: 0.3, ReadAhead: true},
	// the same drive sold with 8 MB.
	"ata-2003-8mb": {RPM: 7200, SeekAvg: 9, SeekTrack: 1, Settle: 0.5, RateOD: 58e6, RateID: 32e6, Zones: 16, Capacity: 250e9, Cache: 8 << 20, Interface: 100e6, Overhead: 0.3, ReadAhead: true},
	// 15k rpm FC drive of the same era (Cheetah X15 class; the ALICE
	// DotHill arrays).
	"fc-15k-2003": {RPM: 15000, SeekAvg: 3.6, SeekTrack: 0.3, Settle: 0.4, RateOD: 75e6, RateID: 50e6, Zones: 16, Capacity: 36e9, Cache: 8 << 20, Interface: 200e6, Overhead: 0.2, ReadAhead: true},
	// current 7,200 rpm enterprise drive (Exos X18 / Ultrastar class).
	"sata-7k2": {RPM: 7200, SeekAvg: 7.4, SeekTrack: 0.3, Settle: 0.8, RateOD: 270e6, RateID: 135e6, Zones: 24, Capacity: 18e12, Cache: 256 << 20, Interface: 600e6, Overhead: 0.1, ReadAhead: true,
		ReadAheadGap: 16 << 20, Segments: 16, Prefetch: 2 << 20},
}

// frozenSeg is a read-ahead segment of a stream the media left for other
// work: the bytes it had read ahead, held for that stream's next reads.
type frozenSeg struct {
	lba  int64 // the stream's next byte
	held int64 // bytes from lba in the buffer
}

// diskRun is a continuous media transfer of buffered write data.
type diskRun struct {
	start, end des.Time
	rate       float64 // bytes/ns
	endLBA     int64
}

// Disk is a request-level drive model. Commands are served one at a time
// (FIFO) through the interface; the actuator is a separate timeline that
// destages the write buffer and serves reads. What the model tracks is
// what changes the answer for large sequential I/O: head position (seek
// distance), rotational phase (a transfer that restarts after the head
// has passed its sector waits for it to come round), the zone's media
// rate, and how full the write buffer is.
//
// Writes that fit the buffer are stacked: accepted as soon as there is
// room for the whole command, taken at interface speed, and destaged while
// they arrive, so the media never stops while data keeps coming. A write
// larger than the buffer is split into buffer-sized segments, and each
// segment is filled before it is written (the buffer cannot hold the
// command, so it cannot overlap taking the next part with writing this
// one) — the media stops between segments and pays a rotation to restart.
// Nothing in the model knows about the stripe-size cliff; it follows.
type Disk struct {
	sim *des.Sim
	id  int32
	p   DiskParams

	rev       float64 // ns per revolution
	seekFull  float64 // ns
	zoneBytes int64

	queue []diskCmd
	busy  bool

	head    int64    // LBA under the head after the last scheduled media work
	actFree des.Time // actuator free of scheduled work
	runs    []diskRun

	// read-ahead: the media is taken to have streamed on from raLBA since
	// raAt while the actuator had nothing else to do
	raLBA int64
	raAt  des.Time
	raOK  bool
	raSeq bool // the live stream was read sequentially: it gets its prefetch
	// frozen are the other streams' segments (most recent first): what
	// the media read ahead for them before it left them.
	frozen []frozenSeg

	// Busy time and bytes, for utilisation.
	MediaBytes int64
}

type diskCmd struct {
	write bool
	lba   int64
	size  int64
	done  func()
}

const (
	evDiskDone uint16 = 10 + iota
	evDiskNext
)

// NewDisk makes a drive.
func NewDisk(s *des.Sim, id int32, p DiskParams) *Disk {
	if p.Zones < 1 {
		p.Zones = 1
	}
	if p.RateID <= 0 {
		p.RateID = p.RateOD
	}
	d := &Disk{sim: s, id: id, p: p}
	d.rev = 60e9 / p.RPM
	// seek(d) = track + (full − track)·√d has mean track + 8/15·(full −
	// track) over uniform random distances, which must be the average.
	d.seekFull = (p.SeekTrack + (p.SeekAvg-p.SeekTrack)*15/8) * 1e6
	d.zoneBytes = int64(p.Capacity) / int64(p.Zones)
	if d.zoneBytes <= 0 {
		d.zoneBytes = 1
	}
	return d
}

// rate is the media rate at lba, bytes/ns (constant within a zone).
func (d *Disk) rate(lba int64) float64 {
	z := lba / d.zoneBytes
	if z >= int64(d.p.Zones) {
		z = int64(d.p.Zones) - 1
	}
	f := 0.0
	if d.p.Zones > 1 {
		f = float64(z) / float64(d.p.Zones-1)
	}
	return (float64(d.p.RateOD) - (float64(d.p.RateOD)-float64(d.p.RateID))*f) / 1e9
}

// angle is where lba sits on its track, as a fraction of a revolution.
func (d *Disk) angle(lba int64) float64 {
	track := d.rate(lba) * d.rev // bytes per track in this zone
	z0 := lba / d.zoneBytes * d.zoneBytes
	a := float64(lba-z0) / track
	return a - math.Floor(a)
}

// position is when the media can start transferring at lba, if the
// actuator is free at t and the head at d.head.
func (d *Disk) position(t des.Time, lba int64, write bool) des.Time {
	dist := lba - d.head
	if dist < 0 {
		dist = -dist
	}
	if dist > 0 {
		f := float64(dist) / float64(d.p.Capacity)
		if f > 1 {
			f = 1
		}
		seek := d.p.SeekTrack*1e6 + (d.seekFull-d.p.SeekTrack*1e6)*math.Sqrt(f)
		if write {
			seek += d.p.Settle * 1e6
		}
		t += des.Time(seek)
	}
	head := float64(t) / d.rev
	head -= math.Floor(head)
	wait := d.angle(lba) - head
	if wait < 0 {
		wait++
	}
	return t + des.Time(wait*d.rev)
}

// Submit queues a command; done runs when the drive reports it complete
// (a write when its data is in the buffer, a read when its data is sent).
func (d *Disk) Submit(write bool, lba, size int64, done func()) {
	d.queue = append(d.queue, diskCmd{write, lba, size, done})
	if !d.busy {
		d.busy = true
		d.next()
	}
}

func (d *Disk) next() {
	if len(d.queue) == 0 {
		d.busy = false
		return
	}
	c := d.queue[0]
	copy(d.queue, d.queue[1:])
	d.queue = d.queue[:len(d.queue)-1]
	t := d.sim.Now() + des.Time(d.p.Overhead*1e6)
	var end des.Time
	if c.lba < 0 { // a barrier (Flush): no media work
		end = d.sim.Now()
	} else if c.write {
		end = d.write(t, c.lba, c.size)
	} else {
		end = d.read(t, c.lba, c.size)
	}
	d.MediaBytes += c.size
	d.sim.Schedule(end, 0, evDiskDone, d.id, func() {
		if c.done != nil {
			c.done()
		}
		d.next()
	})
}

// level is the write data still buffered at time x.
func (d *Disk) level(x des.Time) float64 {
	var l float64
	for _, r := range d.runs {
		switch {
		case x <= r.start:
			l += float64(r.end-r.start) * r.rate
		case x < r.end:
			l += float64(r.end-x) * r.rate
		}
	}
	return l
}

// room is the first time ≥ t at which the buffer holds at most target.
func (d *Disk) room(t des.Time, target float64) des.Time {
	rem := d.level(t)
	if rem <= target+0.5 {
		return t
	}
	for _, r := range d.runs {
		if r.end <= t {
			continue
		}
		from := r.start
		if t > from {
			from = t
		}
		a := float64(r.end-from) * r.rate
		if rem-a <= target+0.5 {
			return from + des.Time(math.Ceil((rem-target)/r.rate))
		}
		rem -= a
	}
	return d.actFree
}

func (d *Disk) prune(t des.Time) {
	n := 0
	for _, r := range d.runs {
		if r.end > t {
			d.runs[n] = r
			n++
		}
	}
	d.runs = d.runs[:n]
}

// destage schedules media writing of size bytes at lba whose data is
// available from t. It extends the open run when the media is still
// writing the preceding bytes then; otherwise it positions anew.
func (d *Disk) destage(t des.Time, lba, size int64) {
	d.freeze(max(t, d.actFree), false)
	if n := len(d.runs); n > 0 {
		r := &d.runs[n-1]
		if r.end == d.actFree && r.endLBA == lba && t <= r.end {
			r.end += des.Time(float64(size) / r.rate)
			r.endLBA += size
			d.actFree = r.end
			d.head = r.endLBA
			return
		}
	}
	from := t
	if d.actFree > from {
		from = d.actFree
	}
	start := d.position(from, lba, true)
	rate := d.rate(lba)
	r := diskRun{start: start, end: start + des.Time(float64(size)/rate), rate: rate, endLBA: lba + size}
	d.runs = append(d.runs, r)
	d.actFree = r.end
	d.head = r.endLBA
}

func (d *Disk) write(t des.Time, lba, size int64) des.Time {
	d.prune(t)
	iface := float64(d.p.Interface) / 1e9
	buf := int64(d.p.Cache)
	if buf <= 0 { // write-through: the command ends with the media
		d.destage(t+des.Time(float64(size)/iface), lba, size)
		return d.actFree
	}
	if size <= buf {
		acc := d.room(t, float64(buf-size))
		d.destage(acc, lba, size)
		return acc + des.Time(float64(size)/iface)
	}
	// larger than the buffer: segment by segment, each filled first
	for off := int64(0); off < size; off += buf {
		seg := min(buf, size-off)
		if off > 0 {
			t += des.Time(d.p.Overhead * 1e6)
		}
		acc := d.room(t, float64(buf-seg))
		t = acc + des.Time(float64(seg)/iface)
		d.destage(t, lba+off, seg)
	}
	return t
}

func (d *Disk) read(t des.Time, lba, size int64) des.Time {
	d.prune(t)
	iface := float64(d.p.Interface) / 1e9
	buf := float64(d.p.Cache)
	if k := d.frozenAt(lba); k >= 0 {
		return d.readFrozen(t, k, lba, size)
	}
	if gap := lba - d.raLBA; d.p.ReadAhead && d.raOK && gap > 0 && gap <= int64(d.p.ReadAheadGap) && float64(gap) < buf && d.actFree <= t {
		// A read a little ahead of the stream (a RAID-5 member skipping
		// the parity unit it holds in this stripe) is still read ahead:
		// the media streamed through the gap; its bytes are dropped.
		d.raAt += des.Time(float64(gap) / d.rate(d.raLBA))
		d.raLBA = lba
	}
	if d.p.ReadAhead && d.raOK && lba == d.raLBA && d.actFree <= t {
		rate := d.rate(lba)
		have := float64(t-d.raAt) * rate // read ahead since
		if have <= buf {
			// the media is still streaming: the command ends when the
			// media has produced its last byte, or the interface has sent
			// it, whichever is later
			end := max(d.raAt+des.Time(float64(size)/rate), t+des.Time(float64(size)/iface))
			d.raAt += des.Time(float64(size) / rate)
			d.raLBA += int64(size)
			d.actFree = t
			d.head = lba + size
			d.raSeq = true
			return end
		}
		// the buffer filled and reading stopped: serve what is held, and
		// restart the media behind it (missing a revolution)
		held := min(float64(size), buf)
		end := t + des.Time(held/iface)
		d.head = lba + int64(buf)
		restart := d.position(t, lba+int64(buf), false)
		if float64(size) > buf {
			end = max(end, restart+des.Time((float64(size)-buf)/rate))
		}
		d.raAt = restart - des.Time((buf-held)/rate)
		d.raLBA = lba + size
		d.actFree = t
		return end
	}
	from := d.freeze(max(t, d.actFree), true)
	start := d.position(from, lba, false)
	rate := d.rate(lba)
	end := start + des.Time(float64(size)/rate)
	d.actFree = end
	d.head = lba + size
	d.raOK, d.raLBA, d.raAt, d.raSeq = true, lba+size, end, false
	return end
}

// freeze stops the live read-ahead stream when the media leaves it for
// other work at from. A drive of several segments keeps what it read
// ahead for that stream's next reads, after reading on its Prefetch for
// a sequential stream when the other work is a read (writes go first);
// the returned time is when the media is free for the other work.
func (d *Disk) freeze(from des.Time, forRead bool) des.Time {
	if !d.raOK {
		return from
	}
	d.raOK = false
	segs := max(d.p.Segments, 1)
	if segs == 1 {
		return from
	}
	rate := d.rate(d.raLBA)
	if forRead && d.raSeq && d.p.Prefetch > 0 {
		from = max(from, d.raAt+des.Time(float64(d.p.Prefetch)/rate))
	}
	held := int64(math.Min(math.Max(float64(from-d.raAt)*rate, 0), float64(d.p.Cache)/float64(segs)))
	d.head = d.raLBA + held
	d.frozen = append([]frozenSeg{{d.raLBA, held}}, d.frozen...)
	if len(d.frozen) > segs-1 {
		d.frozen = d.frozen[:segs-1]
	}
	return from
}

// frozenAt is the frozen segment a read at lba continues (at its next
// byte, or a gap of up to ReadAheadGap ahead), or -1.
func (d *Disk) frozenAt(lba int64) int {
	if !d.p.ReadAhead {
		return -1
	}
	for i, f := range d.frozen {
		if gap := lba - f.lba; gap == 0 || gap > 0 && gap <= int64(d.p.ReadAheadGap) {
			return i
		}
	}
	return -1
}

// readFrozen serves a read that continues frozen segment k: from the
// buffer while it holds the bytes, and what it does not hold from the
// media, which then streams for this stream again.
func (d *Disk) readFrozen(t des.Time, k int, lba, size int64) des.Time {
	iface := float64(d.p.Interface) / 1e9
	f := d.frozen[k]
	held := max(f.held-(lba-f.lba), 0)
	d.frozen = append(d.frozen[:k], d.frozen[k+1:]...)
	if size <= held {
		d.frozen = append([]frozenSeg{{lba + size, held - size}}, d.frozen...)
		return t + des.Time(float64(size)/iface)
	}
	from := d.freeze(max(t, d.actFree), true)
	rest := lba + held
	start := d.position(from, rest, false)
	rate := d.rate(rest)
	media := start + des.Time(float64(size-held)/rate)
	d.actFree = media
	d.head = lba + size
	d.raOK, d.raLBA, d.raAt, d.raSeq = true, lba+size, media, true
	return max(media, t+des.Time(float64(size)/iface))
}

// Read implements Device.
func (d *Disk) Read(lba, size int64, done func()) { d.Submit(false, lba, size, done) }

// Write implements Device.
func (d *Disk) Write(lba, size int64, done func()) { d.Submit(true, lba, size, done) }

// Flush calls done when every queued command has completed and the write
// buffer is on the media.
func (d *Disk) Flush(done func()) {
	d.Submit(false, -1, 0, func() {
		d.sim.Schedule(max(d.actFree, d.sim.Now()), 0, evDiskDone, d.id, done)
	})
}
