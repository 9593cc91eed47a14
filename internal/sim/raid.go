package sim

import (
	"github.com/strata-storage/strata/internal/des"
)

// ArrayParams describe a RAID-5 array.
type ArrayParams struct {
	Disks      int     `toml:"disks"` // members, parity included (9+1 → 10)
	StripeUnit Size    `toml:"stripe_unit"`
	Cache      Size    `toml:"controller_cache"` // write-back cache
	Overhead   float64 `toml:"overhead_ms"`      // controller time per stripe
	// Queue is how many stripes the controller writes at once (each
	// completes only when all its members have); default 8, as a
	// controller keeps several destage commands queued at each member.
	Queue int `toml:"queue"`
}

// Array is a request-level RAID-5 controller over member Disks, with
// rotating parity (left-symmetric), a write-back cache that gathers
// sequential writes into full stripes, and the barrier that makes RAID-5
// what it is: a stripe is written when every member has taken its unit,
// and only then does the next stripe go out.
type Array struct {
	sim     *des.Sim
	id      int32
	p       ArrayParams
	members []*Disk
	unit    int64
	width   int64 // data bytes per stripe

	// write-back cache: dirty sequential data waiting to be destaged
	cacheUsed int64
	waiting   []cacheWait
	dirty     []extent // cached data not yet sent to the members, in arrival order
	inflight  int      // stripes being written
	flushing  bool
	drainWait []func() // Flush calls waiting for the cache to drain
}

type extent struct{ lba, end int64 }

type cacheWait struct {
	lba, size int64
	done      func()
}

const evArray uint16 = 20

// NewArray makes an array of members built from dp.
func NewArray(s *des.Sim, id int32, p ArrayParams, dp DiskParams) *Array {
	a := &Array{sim: s, id: id, p: p, unit: int64(p.StripeUnit)}
	if a.unit <= 0 {
		a.unit = 64 << 10
	}
	if p.Disks < 2 {
		p.Disks = 2
		a.p.Disks = 2
	}
	a.width = a.unit * int64(p.Disks-1)
	for i := 0; i < p.Disks; i++ {
		a.members = append(a.members, NewDisk(s, id*1000+int32(i), dp))
	}
	return a
}

// Width is the data bytes in one stripe.
func (a *Array) Width() int64 { return a.width }

// member maps the data byte at lba to (member, member LBA).
func (a *Array) member(lba int64) (int, int64) {
	stripe := lba / a.width
	in := lba % a.width
	n := int64(a.p.Disks)
	parity := stripe % n
	m := (parity + 1 + in/a.unit) % n
	return int(m), stripe*a.unit + in%a.unit
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
		var cmds [][3]int64
		for o := off; o < end; {
			m, mlba := a.member(lba + o)
			n := min(a.unit-(lba+o)%a.unit, end-o)
			cmds = append(cmds, [3]int64{int64(m), mlba, n})
			o += n
		}
		left = len(cmds)
		a.sim.After(des.Time(a.p.Overhead*1e6), evArray, a.id, func() {
			for _, c := range cmds {
				a.members[c[0]].Submit(false, c[1], c[2], fin)
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
// old data and parity first (read-modify-write).
func (a *Array) writeStripe(lba, size int64) {
	a.inflight++
	stripe := lba / a.width
	n := int64(a.p.Disks)
	parity := int(stripe % n)
	full := size == a.width && lba%a.width == 0
	type cmd struct {
		m         int
		lba, size int64
	}
	var cmds []cmd
	for off := int64(0); off < size; {
		m, mlba := a.member(lba + off)
		k := min(a.unit-(lba+off)%a.unit, size-off)
		cmds = append(cmds, cmd{m, mlba, k})
		off += k
	}
	pl, psize := stripe*a.unit, a.unit
	if !full && size < a.unit {
		pl, psize = cmds[0].lba, size
	}
	cmds = append(cmds, cmd{parity, pl, psize})
	left := len(cmds)
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
		for _, c := range cmds {
			a.members[c.m].Submit(true, c.lba, c.size, finish)
		}
	}
	a.sim.After(des.Time(a.p.Overhead*1e6), evArray, a.id, func() {
		if full {
			write()
			return
		}
		reads := len(cmds)
		for _, c := range cmds {
			a.members[c.m].Submit(false, c.lba, c.size, func() {
				if reads--; reads == 0 {
					write()
				}
			})
		}
	})
}
