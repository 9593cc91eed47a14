// Package des is Strata's discrete-event simulation kernel: virtual time in
// integer nanoseconds, an event queue ordered by (time, priority, sequence),
// seeded random streams, an event fingerprint, and fluid max-min sharing of
// bandwidth (fluid.go).
//
// It is our own because nothing maintained fits: the Go DES libraries we
// could find (simgo, godes, discrete-events) run each process as a goroutine with channel hand-offs (2–3 M resumes/s
// at best), are unmaintained, or are not reachable from this module proxy.
// The kernel is small on purpose. What it must guarantee is repeatability:
//
//   - time is an int64 of nanoseconds, so no float drift accumulates;
//   - events at the same time fire by priority, then in the order they
//     were scheduled (a global sequence number), so simultaneous events
//     are FIFO and every run of the same model fires the same events in
//     the same order;
//   - the queue is a typed binary heap over event pointers with index
//     tracking, so cancelling or moving an event is O(log n), and no
//     interface boxing sits on the hot path;
//   - random numbers come from PCG streams derived from (seed, entity,
//     purpose), never from a global source;
//   - a fingerprint hashes (time, kind, object) of every fired event, so a
//     test (or CI) can tell that two runs were identical.
//
// Model code must not iterate maps to make decisions and must not read the
// wall clock; the simulator runs one model per goroutine and parallelises
// only across independent runs (sweep points).
package des

import (
	"fmt"
	"math"
	"math/rand/v2"
	"time"
)

// Time is virtual time in nanoseconds since the start of the run.
type Time int64

// Common durations in virtual time.
const (
	Nanosecond  Time = 1
	Microsecond Time = 1000
	Millisecond Time = 1000 * Microsecond
	Second      Time = 1000 * Millisecond
	// Forever is later than any event.
	Forever Time = math.MaxInt64
)

// Seconds converts t to float seconds (for reports only).
func (t Time) Seconds() float64 { return float64(t) / 1e9 }

// Duration converts a time.Duration.
func Duration(d time.Duration) Time { return Time(d) }

// FromSeconds rounds s seconds up to whole nanoseconds: a completion is
// never early.
func FromSeconds(s float64) Time {
	if s <= 0 {
		return 0
	}
	if s >= float64(Forever)/1e9 {
		return Forever
	}
	return Time(math.Ceil(s * 1e9))
}

func (t Time) String() string { return time.Duration(t).String() }

// Event is a scheduled callback. Kind and Obj identify it in the
// fingerprint: Kind says what happens (a model-defined constant), Obj to
// which entity.
type Event struct {
	at   Time
	prio int8
	seq  uint64
	idx  int // position in the heap; -1 when not queued
	Kind uint16
	Obj  int32
	Fn   func()
}

// At is when the event fires.
func (e *Event) At() Time { return e.at }

// Pending says whether the event is still queued.
func (e *Event) Pending() bool { return e != nil && e.idx >= 0 }

// Sim is one simulation: a clock and its event queue.
type Sim struct {
	now    Time
	seq    uint64
	heap   []*Event
	fired  uint64
	fp     uint64
	stop   bool
	Seed   uint64
	Fluid  *Fluid // bandwidth sharing, created by NewSim
	limitE uint64 // stop after this many events (0: none)
}

// NewSim makes an empty simulation whose random streams derive from seed.
func NewSim(seed uint64) *Sim {
	s := &Sim{Seed: seed, fp: fnvOffset}
	s.Fluid = newFluid(s)
	return s
}

// Now is the current virtual time.
func (s *Sim) Now() Time { return s.now }

// Events is the number of events fired so far.
func (s *Sim) Events() uint64 { return s.fired }

// Fingerprint is a hash over (time, kind, object) of every fired event.
func (s *Sim) Fingerprint() uint64 { return s.fp }

// Pending is the number of queued events.
func (s *Sim) Pending() int { return len(s.heap) }

// Schedule queues fn to run at time at (not before now) with priority prio
// (lower first among events at the same time). The returned event may be
// cancelled or moved until it fires. Events are not recycled: a stale
// reference can be cancelled harmlessly (a free list would let it cancel
// somebody else's event, for a gain the benchmark does not need).
func (s *Sim) Schedule(at Time, prio int8, kind uint16, obj int32, fn func()) *Event {
	if at < s.now {
		at = s.now
	}
	s.seq++
	e := &Event{at: at, prio: prio, seq: s.seq, Kind: kind, Obj: obj, Fn: fn}
	s.push(e)
	return e
}

// After is Schedule at now+d with priority 0.
func (s *Sim) After(d Time, kind uint16, obj int32, fn func()) *Event {
	return s.Schedule(s.now+d, 0, kind, obj, fn)
}

// Cancel removes a pending event; cancelling a fired or cancelled event is
// a no-op.
func (s *Sim) Cancel(e *Event) {
	if e == nil || e.idx < 0 {
		return
	}
	s.remove(e.idx)
	e.idx = -1
}

// Move reschedules a pending event to a new time. It takes a new sequence
// number, as if cancelled and scheduled again, so the order stays the one
// a fresh Schedule would give.
func (s *Sim) Move(e *Event, at Time) {
	if at < s.now {
		at = s.now
	}
	s.seq++
	e.at, e.seq = at, s.seq
	if e.idx < 0 {
		s.push(e)
		return
	}
	s.fix(e.idx)
}

// Stop ends Run after the current event.
func (s *Sim) Stop() { s.stop = true }

// LimitEvents makes Run return with an error after n events (0: no limit):
// a guard against a model that never ends.
func (s *Sim) LimitEvents(n uint64) { s.limitE = n }

// Run fires events in order until the queue is empty, Stop is called, or
// the next event is after until. It returns the time reached.
func (s *Sim) Run(until Time) (Time, error) {
	s.stop = false
	for len(s.heap) > 0 && !s.stop {
		e := s.heap[0]
		if e.at > until {
			s.now = until
			return s.now, nil
		}
		s.remove(0)
		e.idx = -1
		s.now = e.at
		s.fired++
		s.fp = mix(s.fp, uint64(e.at))
		s.fp = mix(s.fp, uint64(e.Kind)<<32|uint64(uint32(e.Obj)))
		e.Fn()
		if s.limitE > 0 && s.fired >= s.limitE {
			return s.now, fmt.Errorf("des: stopped after %d events at %v (event limit)", s.fired, s.now)
		}
	}
	return s.now, nil
}

// Rand is a deterministic random stream for one entity and purpose.
func (s *Sim) Rand(entity, purpose uint64) *rand.Rand {
	return rand.New(rand.NewPCG(s.Seed^0x9e3779b97f4a7c15*(entity+1), purpose*0xbf58476d1ce4e5b9+entity))
}

const (
	fnvOffset = 14695981039346656037
	fnvPrime  = 1099511628211
)

// mix folds a 64-bit word into an FNV-1a hash, byte by byte.
func mix(h, v uint64) uint64 {
	for i := 0; i < 8; i++ {
		h ^= v & 0xff
		h *= fnvPrime
		v >>= 8
	}
	return h
}

// less orders events by (time, priority, sequence).
func less(a, b *Event) bool {
	if a.at != b.at {
		return a.at < b.at
	}
	if a.prio != b.prio {
		return a.prio < b.prio
	}
	return a.seq < b.seq
}

func (s *Sim) push(e *Event) {
	e.idx = len(s.heap)
	s.heap = append(s.heap, e)
	s.up(e.idx)
}

func (s *Sim) remove(i int) {
	n := len(s.heap) - 1
	if i != n {
		s.swap(i, n)
	}
	s.heap[n] = nil
	s.heap = s.heap[:n]
	if i != n {
		s.fix(i)
	}
}

func (s *Sim) fix(i int) {
	if !s.down(i) {
		s.up(i)
	}
}

func (s *Sim) swap(i, j int) {
	h := s.heap
	h[i], h[j] = h[j], h[i]
	h[i].idx = i
	h[j].idx = j
}

func (s *Sim) up(j int) {
	h := s.heap
	for j > 0 {
		i := (j - 1) / 2
		if !less(h[j], h[i]) {
			break
		}
		s.swap(i, j)
		j = i
	}
}

func (s *Sim) down(i0 int) bool {
	h := s.heap
	n := len(h)
	i := i0
	for {
		j := 2*i + 1
		if j >= n {
			break
		}
		if r := j + 1; r < n && less(h[r], h[j]) {
			j = r
		}
		if !less(h[j], h[i]) {
			break
		}
		s.swap(i, j)
		i = j
	}
	return i > i0
}
