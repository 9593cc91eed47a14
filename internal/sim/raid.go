package sim

import (
	"slices"

	"github.com/strata-storage/strata/internal/des"
)

// ArrayParams describe a parity array: RAID-5 (one parity unit per
// stripe) or RAID-6 (two), set by storage.kind.
type ArrayParams struct {
	Disks      int     `toml:"disks"` // members, parity included (9+1 → 10)
	StripeUnit Size    `toml:"stripe_unit"`
	Cache      Size    `toml:"controller_cache"` // write-back cache
	Overhead   float64 `toml:"overhead_ms"`      // controller time per stripe
	// Queue is how many stripes the controller writes at once (each
	// completes only when all its members have); default 8, as a
	// controller keeps several destage commands queued at each member.
	Queue int `toml:"queue"`

	// Failed members (the first ones) stop at FailAt (a duration from
	// the start of the run, "0s" by default): the array serves reads of
	// their units by reconstructing them from the others and writes
	// what it can. RAID-5 survives one, RAID-6 two.
	Failed int    `toml:"failed"`
	FailAt string `toml:"fail_at"`
	// Rebuild puts a hot spare in each failed member's place at the
	// failure and rebuilds it from the survivors, chunk by chunk from
	// the start of the members, beside the users' I/O: the survivors'
	// queues serve both. RebuildRate caps the spare's write rate (a
	// controller's rebuild priority, md's speed_limit_max; 0: as fast as
	// the members allow); RebuildChunk is the member bytes of one step
	// (default 8 MiB, an assumption); RebuildExtent the member bytes to
	// rebuild (default the whole member, as a hardware controller does).
	Rebuild       bool `toml:"rebuild"`
	RebuildRate   Rate `toml:"rebuild_rate"`
	RebuildChunk  Size `toml:"rebuild_chunk"`
	RebuildExtent Size `toml:"rebuild_extent"`

	// Declustered arrays (storage.kind = "declustered", erasure coded):
	// Width is the units of one stripe (data + parity), fewer than
	// Disks, so consecutive stripes rotate over all members; Parity is
	// the parity units per stripe (default 2).
	Width  int `toml:"width"`
	Parity int `toml:"parity"`

	parity int      // parity units per stripe: 1 (RAID-5), 2 (RAID-6), Parity
	width  int      // units per stripe: Disks, or Width when declustered
	failAt des.Time // FailAt, parsed
}

// Array is a request-level RAID-5 or RAID-6 controller over member
// Disks, with rotating parity (left-symmetric: a stripe's parity units,
// then its data units, each stripe one member further), a write-back
// cache that gathers sequential writes into full stripes, and the barrier
// that makes parity RAID what it is: a stripe is written when every member
// has taken its unit, and only then does the next stripe go out.
type Array struct {
	sim     *des.Sim
	id      int32
	p       ArrayParams
	dp      DiskParams
	members []*Disk
	unit    int64
	width   int64 // data bytes per stripe
	parity  int   // parity units per stripe
	units   int   // units per stripe, parity included: all members, or fewer when declustered

	// write-back cache: dirty sequential data waiting to be destaged
	cacheUsed int64
	waiting   []cacheWait
	dirty     []extent // cached data not yet sent to the members, in arrival order
	inflight  int      // stripes being written
	flushing  bool
	drainWait []func() // Flush calls waiting for the cache to drain

	// failures: down members hold nothing at or past rebuilt (a member
	// LBA; the spare in their place holds everything below it)
	down    []bool
	rebuilt int64
	// stripeCache holds the last reconstructed stripes (stripe+1; 0 is
	// empty)
	stripeCache [8]int64
	cacheNext   int
	rbWriting   bool     // a rebuild step's writes are queued at the spares
	rbNext      func()   // the next step, waiting for them
	FailedAt    des.Time // when the members failed (valid when Failed > 0)
	RebuiltAt   des.Time // when the spares were whole; 0 while rebuilding
	// OnRebuilt runs when the spares are whole.
	OnRebuilt func()
}

type extent struct{ lba, end int64 }

type cacheWait struct {
	lba, size int64
	done      func()
}

// mcmd is one member command: size bytes at the member's lba.
type mcmd struct {
	m         int
	lba, size int64
}

const (
	evArray   uint16 = 20
	evRebuild uint16 = 21
)

// NewArray makes an array of members built from dp.
func NewArray(s *des.Sim, id int32, p ArrayParams, dp DiskParams) *Array {
	a := &Array{sim: s, id: id, p: p, dp: dp, unit: int64(p.StripeUnit), parity: max(1, p.parity)}
	if a.unit <= 0 {
		a.unit = 64 << 10
	}
	if p.Disks < a.parity+1 {
		p.Disks = a.parity + 1
		a.p.Disks = p.Disks
	}
	a.units = p.Disks
	if p.width > a.parity && p.width < p.Disks {
		a.units = p.width
	}
	a.width = a.unit * int64(a.units-a.parity)
	for i := 0; i < p.Disks; i++ {
		a.members = append(a.members, NewDisk(s, id*1000+int32(i), dp))
	}
	if p.Failed > 0 {
		s.Schedule(p.failAt, 0, evRebuild, id, a.fail)
	}
	return a
}

// Width is the data bytes in one stripe.
func (a *Array) Width() int64 { return a.width }

// declustered says whether stripes are narrower than the array.
func (a *Array) declustered() bool { return a.units < a.p.Disks }

// place is where unit p of stripe s lives (p < parity: parity unit p;
// then the data units in order): its member and the member LBA the unit
// starts at. A stripe across every member rotates one member per stripe
// (left-symmetric) at the same LBA on each; a declustered stripe's units
// are the next `units` of a round-robin over all members, so each member
// holds units of many stripes and a failed member's stripes are spread
// over all the others.
func (a *Array) place(s int64, p int) (int, int64) {
	n := int64(a.p.Disks)
	if !a.declustered() {
		return int((s%n + int64(p)) % n), s * a.unit
	}
	g := s*int64(a.units) + int64(p)
	return int(g % n), g / n * a.unit
}

// member maps the data byte at lba to (member, member LBA).
func (a *Array) member(lba int64) (int, int64) {
	stripe := lba / a.width
	in := lba % a.width
	m, base := a.place(stripe, a.parity+int(in/a.unit))
	return m, base + in%a.unit
}

// missing says whether member m has no data at member LBA lba: it has
// failed and its spare has not been rebuilt that far.
func (a *Array) missing(m int, lba int64) bool {
	return a.down != nil && a.down[m] && lba >= a.rebuilt
}

// commands splits [lba, lba+size), within one stripe, into member commands.
func (a *Array) commands(lba, size int64) []mcmd {
	var cmds []mcmd
	for off := int64(0); off < size; {
		m, mlba := a.member(lba + off)
		k := min(a.unit-(lba+off)%a.unit, size-off)
		cmds = append(cmds, mcmd{m, mlba, k})
		off += k
	}
	return cmds
}

// degradedRead is the member reads for one stripe's commands. When one
// of the stripe's data units is missing the controller reads the whole
// stripe from the survivors, reconstructs it and keeps it in its stripe
// cache (as md's stripe cache and a hardware controller's do), so the
// stripe's other units, which the next request usually wants, cost no
// member I/O. The cache holds the last few reconstructed stripes.
func (a *Array) degradedRead(stripe int64, cmds []mcmd) []mcmd {
	if a.down == nil {
		return cmds
	}
	if slices.Contains(a.stripeCache[:], stripe+1) {
		return nil
	}
	// the whole stripe's data, the missing units from the parity
	var whole []mcmd
	lost := false
	for p := a.parity; p < a.units; p++ {
		m, base := a.place(stripe, p)
		whole = append(whole, mcmd{m, base, a.unit})
		lost = lost || a.missing(m, base)
	}
	if !lost {
		return cmds
	}
	// Any read of a stripe that lost a data unit reads and rebuilds all
	// of it, so the request that wants the rest of the stripe finds it
	// here: reading only the part asked for, then the whole stripe for
	// the next request's part, would read units twice and step every
	// member backwards.
	a.stripeCache[a.cacheNext] = stripe + 1 // 0: empty
	a.cacheNext = (a.cacheNext + 1) % len(a.stripeCache)
	return a.reconstruct(stripe, whole)
}

// reconstruct replaces the reads of missing members in one stripe's
// commands by reads of the same range from as many others as the parity
// needs (n − parity units in all: the stripe's data members first, then
// its parity), extending a read already going to a member to cover the
// range.
func (a *Array) reconstruct(stripe int64, cmds []mcmd) []mcmd {
	var out []mcmd
	// the range within the unit that is missing
	lo, hi := int64(-1), int64(0)
	for _, c := range cmds {
		if a.missing(c.m, c.lba) {
			if o := c.lba % a.unit; lo < 0 || o < lo {
				lo = o
			}
			hi = max(hi, c.lba%a.unit+c.size)
			continue
		}
		out = append(out, c)
	}
	if lo < 0 {
		return cmds
	}
	k := a.units - a.parity // units the parity needs
	have := len(out)
	for q := 0; q < a.units; q++ {
		p := (q + a.parity) % a.units // data units first, then parity
		m, base := a.place(stripe, p)
		if a.missing(m, base+lo) {
			continue
		}
		if i := slices.IndexFunc(out, func(c mcmd) bool { return c.m == m && c.lba-c.lba%a.unit == base }); i >= 0 {
			e := max(out[i].lba+out[i].size, base+hi)
			out[i].lba = min(out[i].lba, base+lo)
			out[i].size = e - out[i].lba
		} else if have < k {
			out = append(out, mcmd{m, base + lo, hi - lo})
			have++
		}
	}
	return out
}

// Read reads size bytes at lba stripe by stripe: one command per stripe
// unit to the members of a stripe, in parallel; the next stripe goes out
// when the last unit of this one has arrived. done runs at the end.
func (a *Array) Read(lba, size int64, done func()) {
	var stripe func(off int64)
	stripe = func(off int64) {
		if off >= size {
			if done != nil {
				done()
			}
			return
		}
		end := min(((lba+off)/a.width+1)*a.width-lba, size)
		left := 0
		fin := func() {
			if left--; left == 0 {
				stripe(end)
			}
		}
		cmds := a.degradedRead((lba+off)/a.width, a.commands(lba+off, end-off))
		left = len(cmds)
		if left == 0 {
			left = 1
			a.sim.After(des.Time(a.p.Overhead*1e6), evArray, a.id, fin)
			return
		}
		a.sim.After(des.Time(a.p.Overhead*1e6), evArray, a.id, func() {
			for _, c := range cmds {
				a.submit(c.m, false, c.lba, c.size, fin)
			}
		})
	}
	stripe(0)
}

// Write takes size bytes at lba into the controller cache (waiting for
// room) and acknowledges; destaging runs behind.
func (a *Array) Write(lba, size int64, done func()) {
	a.waiting = append(a.waiting, cacheWait{lba, size, done})
	a.admit()
}

// Flush destages what is left (a partial last stripe) and calls done when
// the cache is clean and every member has its data on the media.
func (a *Array) Flush(done func()) {
	a.flushing = true
	a.drainWait = append(a.drainWait, func() {
		// then the members' write buffers: on the media, not just
		// acknowledged
		left := len(a.members)
		for _, m := range a.members {
			m.Flush(func() {
				if left--; left == 0 {
					done()
				}
			})
		}
	})
	a.destage()
	a.drained()
}

// drained runs the waiting Flush calls once the controller cache is empty
// and no stripe is in flight.
func (a *Array) drained() {
	if a.cacheUsed != 0 || a.inflight != 0 || len(a.drainWait) == 0 {
		return
	}
	a.flushing = false
	w := a.drainWait
	a.drainWait = nil
	for _, f := range w {
		f()
	}
}

func (a *Array) cacheSize() int64 {
	c := int64(a.p.Cache)
	if c < a.width {
		c = a.width // the controller holds at least one stripe
	}
	return c
}

// admit takes waiting writes into the cache, as much of each as there is
// room for: a write larger than the room left is taken in part and
// acknowledged once all of it is in. Taking writes whole let a partial
// stripe (the tail of a record that does not divide the stripe) hold the
// cache while the next record, which would complete that stripe, waited
// for room that only the stripe's destage could make: a deadlock. A
// controller fills its cache up to the byte, so the tail's stripe
// completes and goes out as a full stripe.
func (a *Array) admit() {
	for len(a.waiting) > 0 {
		w := &a.waiting[0]
		n := min(w.size, a.cacheSize()-a.cacheUsed)
		if n <= 0 {
			break
		}
		a.cacheUsed += n
		if k := len(a.dirty); k > 0 && a.dirty[k-1].end == w.lba {
			a.dirty[k-1].end += n
		} else {
			a.dirty = append(a.dirty, extent{w.lba, w.lba + n})
		}
		w.lba, w.size = w.lba+n, w.size-n
		if w.size > 0 {
			break
		}
		done := w.done
		a.waiting = a.waiting[1:]
		if done != nil {
			done()
		}
	}
	a.destage()
}

// destage sends stripes while fewer than Queue are in flight: full
// stripes as soon as they are cached; a partial stripe when its extent is
// closed (another extent follows) or the cache is being flushed.
func (a *Array) destage() {
	q := a.p.Queue
	if q <= 0 {
		q = 8
	}
	for a.inflight < q && len(a.dirty) > 0 {
		e := &a.dirty[0]
		stripeEnd := (e.lba/a.width + 1) * a.width
		closed := len(a.dirty) > 1 || a.flushing
		switch {
		case e.end >= stripeEnd:
			a.writeStripe(e.lba, stripeEnd-e.lba)
			e.lba = stripeEnd
		case closed:
			a.writeStripe(e.lba, e.end-e.lba)
			e.lba = e.end
		default:
			return
		}
		if e.lba >= e.end {
			a.dirty = a.dirty[1:]
		}
	}
}

// writeStripe writes [lba, lba+size) within one stripe: the data units
// and parity. A full stripe writes every member; a partial one reads the
// old data and parity first (read-modify-write). With a member missing, a
// full stripe writes the others; a partial one whose data or parity
// falls on the missing member reads the stripe's other data instead
// (reconstruct-write), since the old contents it would read are gone.
func (a *Array) writeStripe(lba, size int64) {
	a.inflight++
	stripe := lba / a.width
	full := size == a.width && lba%a.width == 0
	cmds := a.commands(lba, size)
	po, psize := int64(0), a.unit // the parity's range within its unit
	if !full && size < a.unit {
		po, psize = cmds[0].lba%a.unit, size
	}
	for j := 0; j < a.parity; j++ {
		m, base := a.place(stripe, j)
		cmds = append(cmds, mcmd{m, base + po, psize})
	}
	var reads, writes []mcmd
	for _, c := range cmds {
		if !a.missing(c.m, c.lba) {
			writes = append(writes, c)
		}
	}
	switch {
	case full:
	case len(writes) == len(cmds):
		reads = cmds
	default:
		lo, hi := cmds[0].lba%a.unit, int64(0)
		for _, c := range cmds {
			lo, hi = min(lo, c.lba%a.unit), max(hi, c.lba%a.unit+c.size)
		}
		for p := a.parity; p < a.units; p++ {
			m, base := a.place(stripe, p)
			if !a.missing(m, base+lo) && !slices.ContainsFunc(cmds, func(c mcmd) bool { return c.m == m }) {
				reads = append(reads, mcmd{m, base + lo, hi - lo})
			}
		}
	}
	left := len(writes)
	finish := func() {
		if left--; left > 0 {
			return
		}
		a.inflight--
		a.cacheUsed -= size
		a.admit()
		a.drained()
	}
	write := func() {
		if len(writes) == 0 {
			left = 1
			finish()
			return
		}
		for _, c := range writes {
			a.submit(c.m, true, c.lba, c.size, finish)
		}
	}
	a.sim.After(des.Time(a.p.Overhead*1e6), evArray, a.id, func() {
		if len(reads) == 0 {
			write()
			return
		}
		n := len(reads)
		for _, c := range reads {
			a.submit(c.m, false, c.lba, c.size, func() {
				if n--; n == 0 {
					write()
				}
			})
		}
	})
}

// fail takes the failed members out and, with rebuild, starts rebuilding
// their spares.
func (a *Array) fail() {
	a.down = make([]bool, len(a.members))
	a.FailedAt = a.sim.Now()
	for i := 0; i < a.p.Failed; i++ {
		a.down[i] = true
	}
	if !a.p.Rebuild {
		return
	}
	if a.declustered() {
		a.rebuildFrom(0)
		return
	}
	for i := 0; i < a.p.Failed; i++ {
		a.members[i] = NewDisk(a.sim, a.id*1000+int32(len(a.members)+i), a.dp)
	}
	a.rebuildFrom(0)
}

// submit sends a member command. On a declustered array a failed
// member's units that have been rebuilt live in the survivors' spare
// space (distributed sparing: no hot spare), unit by unit round-robin
// over them, interleaved with the data as dRAID's and GPFS's declustered
// layouts keep it: next to the stripes the unit belongs to, which the
// model takes as the same member LBA.
func (a *Array) submit(m int, write bool, lba, size int64, done func()) {
	if a.declustered() && a.down != nil && a.down[m] {
		m, lba = a.spare(m, lba)
	}
	a.members[m].Submit(write, lba, size, done)
}

// spare is where the rebuilt copy of failed member f's byte at lba lives.
func (a *Array) spare(f int, lba int64) (int, int64) {
	n := int64(a.p.Disks)
	u := lba / a.unit
	m := int((int64(f) + 1 + u%(n-1)) % n)
	for a.down[m] {
		m = (m + 1) % int(n)
	}
	return m, lba
}

// rebuildFrom rebuilds the failed members from member LBA x on, step by
// step of rebuild_chunk: each step's reads go to the survivors and, once
// all have returned, its writes go out while the next step's reads do —
// no sooner than the rate cap allows, and not while the step before's
// writes are still queued (one chunk written behind the reads, as a
// controller's rebuild buffer allows: a spare that also serves users is
// slower than the survivors, and its queue must not fill with rebuild
// writes).
//
// A hot spare (RAID-5, RAID-6) is rebuilt from the start of the
// members: every survivor reads the chunk, the spares write it. A
// declustered array has no spare: a chunk of a failed member holds units
// of as many stripes, whose other units lie on all the survivors near
// the same LBAs, so each survivor reads its share of the units the
// parity needs — chunk × (units − parity) / survivors per failed member —
// and writes its share of the rebuilt chunk into its spare space. That
// spreading is what declustering buys: a rebuild moves at the survivors'
// aggregate rate, not one spare's. Its reads are counted as one command
// per survivor (the units sit in a narrow band of LBAs; their scatter
// within it is not modelled).
func (a *Array) rebuildFrom(x int64) {
	extent := a.rebuildExtent()
	if x >= extent {
		return
	}
	chunk := int64(a.p.RebuildChunk)
	if chunk <= 0 {
		chunk = 8 << 20
	}
	n := min(chunk, extent-x)
	var reads, writes []mcmd
	for m := range a.members {
		if !a.down[m] {
			reads = append(reads, mcmd{m, x, n})
		} else if !a.declustered() {
			writes = append(writes, mcmd{m, x, n}) // its spare
		}
	}
	if a.declustered() {
		surv, f := int64(len(reads)), int64(a.p.Failed)
		writes = slices.Clone(reads)
		for i := range reads {
			reads[i].size = n * f * int64(a.units-a.parity) / surv
			writes[i].size = n * f / surv
		}
	}
	start := a.sim.Now()
	a.all(false, reads, func() {
		next := a.sim.Now()
		if r := float64(a.p.RebuildRate); r > 0 {
			next = max(next, start+des.Time(float64(n)/r*1e9))
		}
		step := func() { a.rebuildFrom(x + n) }
		if a.rbWriting {
			a.rbNext = func() { a.sim.Schedule(max(next, a.sim.Now()), 0, evRebuild, a.id, step) }
		} else {
			a.sim.Schedule(next, 0, evRebuild, a.id, step)
		}
		a.rbWriting = true
		a.all(true, writes, func() {
			a.rebuilt = x + n
			a.rbWriting = false
			if f := a.rbNext; f != nil {
				a.rbNext = nil
				f()
			}
			if a.rebuilt >= extent {
				a.RebuiltAt = a.sim.Now()
				if a.OnRebuilt != nil {
					a.OnRebuilt()
				}
			}
		})
	})
}

// rebuildExtent is the member bytes a rebuild covers: rebuild_extent, or
// the whole member behind a hot spare (as a hardware controller
// rebuilds), or a declustered member's data region (what its spare space
// leaves).
func (a *Array) rebuildExtent() int64 {
	if e := int64(a.p.RebuildExtent); e > 0 {
		return e
	}
	c := int64(a.dp.Capacity)
	if a.declustered() {
		return c - c/int64(a.p.Disks-1)*int64(a.p.Failed)
	}
	return c
}

// all submits cmds straight to the members (the spares in failed
// members' places included) and calls done when every one has finished.
func (a *Array) all(write bool, cmds []mcmd, done func()) {
	left := len(cmds)
	for _, c := range cmds {
		a.members[c.m].Submit(write, c.lba, c.size, func() {
			if left--; left == 0 {
				done()
			}
		})
	}
}
