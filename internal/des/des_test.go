package des

import (
	"math"
	"slices"
	"testing"
)

func TestOrderTimePrioritySequence(t *testing.T) {
	s := NewSim(1)
	var got []int
	add := func(at Time, prio int8, id int) {
		s.Schedule(at, prio, 0, int32(id), func() { got = append(got, id) })
	}
	add(10, 0, 1)
	add(5, 0, 2)
	add(10, -1, 3) // same time, higher priority: first
	add(10, 0, 4)  // same time and priority: after 1 (FIFO)
	add(0, 0, 5)
	if _, err := s.Run(Forever); err != nil {
		t.Fatal(err)
	}
	want := []int{5, 2, 3, 1, 4}
	if !slices.Equal(got, want) {
		t.Fatalf("order %v, want %v", got, want)
	}
	if s.Now() != 10 || s.Events() != 5 {
		t.Fatalf("now %v events %d", s.Now(), s.Events())
	}
}

func TestCancelMoveAndUntil(t *testing.T) {
	s := NewSim(1)
	var got []int
	e1 := s.Schedule(10, 0, 0, 1, func() { got = append(got, 1) })
	e2 := s.Schedule(20, 0, 0, 2, func() { got = append(got, 2) })
	s.Schedule(30, 0, 0, 3, func() { got = append(got, 3) })
	s.Cancel(e1)
	s.Cancel(e1) // twice is harmless
	s.Move(e2, 40)
	if now, _ := s.Run(35); now != 35 {
		t.Fatalf("run until 35 stopped at %v", now)
	}
	if !slices.Equal(got, []int{3}) {
		t.Fatalf("got %v", got)
	}
	s.Run(Forever)
	if !slices.Equal(got, []int{3, 2}) || e2.Pending() {
		t.Fatalf("got %v", got)
	}
	s.Cancel(e2) // fired: no-op
}

func TestScheduleInThePastRunsNow(t *testing.T) {
	s := NewSim(1)
	var at Time = -1
	s.Schedule(100, 0, 0, 0, func() {
		s.Schedule(50, 0, 0, 0, func() { at = s.Now() })
	})
	s.Run(Forever)
	if at != 100 {
		t.Fatalf("past event ran at %v", at)
	}
}

func TestEventLimit(t *testing.T) {
	s := NewSim(1)
	var tick func()
	tick = func() { s.After(1, 0, 0, tick) }
	tick()
	s.LimitEvents(1000)
	if _, err := s.Run(Forever); err == nil {
		t.Fatal("endless model not stopped")
	}
}

// holdModel is the classic "hold" workload: n processes, each waiting an
// exponential time and rescheduling itself.
func holdModel(seed uint64, procs, events int) *Sim {
	s := NewSim(seed)
	rng := s.Rand(0, 0)
	left := events
	for p := 0; p < procs; p++ {
		p := p
		var fire func()
		fire = func() {
			if left--; left <= 0 {
				s.Stop()
				return
			}
			s.After(Time(rng.ExpFloat64()*1e6)+1, 1, int32(p), fire)
		}
		s.After(Time(rng.ExpFloat64()*1e6)+1, 1, int32(p), fire)
	}
	s.Run(Forever)
	return s
}

func TestFingerprintDeterministic(t *testing.T) {
	a := holdModel(42, 100, 50000)
	b := holdModel(42, 100, 50000)
	c := holdModel(43, 100, 50000)
	if a.Fingerprint() != b.Fingerprint() || a.Now() != b.Now() {
		t.Fatalf("same seed, different runs: %x %x", a.Fingerprint(), b.Fingerprint())
	}
	if a.Fingerprint() == c.Fingerprint() {
		t.Fatal("different seeds, same fingerprint")
	}
}

func BenchmarkHold(b *testing.B) {
	for _, procs := range []int{10, 1000, 100000} {
		b.Run("pending="+itoa(procs), func(b *testing.B) {
			s := holdModel(1, procs, b.N+procs)
			b.ReportMetric(float64(s.Events())/b.Elapsed().Seconds(), "events/s")
		})
	}
}

func itoa(n int) string {
	if n < 10 {
		return string(rune('0' + n))
	}
	return itoa(n/10) + string(rune('0'+n%10))
}

const mb = 1e6

func near(a, b, rel float64) bool { return math.Abs(a-b) <= rel*math.Abs(b) }

func TestFluidMaxMin(t *testing.T) {
	// The textbook case: link A (10) carries flows 1 and 2, link B (4)
	// carries flows 2 and 3. Flow 2 and 3 get 2 each on B; flow 1 takes
	// the rest of A: 8.
	s := NewSim(1)
	A := s.Fluid.NewResource("A", 10*mb)
	B := s.Fluid.NewResource("B", 4*mb)
	f1 := &Flow{Path: []*Resource{A}, Size: 1e12}
	f2 := &Flow{Path: []*Resource{A, B}, Size: 1e12}
	f3 := &Flow{Path: []*Resource{B}, Size: 1e12}
	for _, f := range []*Flow{f1, f2, f3} {
		s.Fluid.Start(f)
	}
	for i, c := range []struct {
		f    *Flow
		want float64
	}{{f1, 8 * mb}, {f2, 2 * mb}, {f3, 2 * mb}} {
		if !near(c.f.Rate(), c.want, 1e-9) {
			t.Errorf("flow %d rate %.0f, want %.0f", i+1, c.f.Rate(), c.want)
		}
	}
}

func TestFluidCompletionAndReshare(t *testing.T) {
	// Two flows on a 100 MB/s link: 100 MB and 300 MB. Both run at 50
	// until the first ends at 2 s; the second then runs at 100 and ends at
	// 2 + 200/100 = 4 s.
	s := NewSim(1)
	L := s.Fluid.NewResource("link", 100*mb)
	var ends []Time
	for _, size := range []int64{100e6, 300e6} {
		s.Fluid.Start(&Flow{Path: []*Resource{L}, Size: size, Done: func() { ends = append(ends, s.Now()) }})
	}
	s.Run(Forever)
	if len(ends) != 2 || !near(ends[0].Seconds(), 2, 1e-6) || !near(ends[1].Seconds(), 4, 1e-6) {
		t.Fatalf("ends %v", ends)
	}
	if !near(L.Bytes, 400e6, 1e-9) {
		t.Fatalf("link moved %.0f bytes", L.Bytes)
	}
}

func TestFluidLimitAndCapN(t *testing.T) {
	s := NewSim(1)
	// a disk whose capacity falls with streams: 100 − 10·(n−1)
	D := s.Fluid.NewResource("disk", 0)
	D.CapN = func(n int) float64 { return (100 - 10*float64(n-1)) * mb }
	slow := &Flow{Path: []*Resource{D}, Size: 1e12, Limit: 5 * mb}
	fast := &Flow{Path: []*Resource{D}, Size: 1e12}
	s.Fluid.Start(slow)
	s.Fluid.Start(fast)
	if !near(slow.Rate(), 5*mb, 1e-9) || !near(fast.Rate(), 85*mb, 1e-9) {
		t.Fatalf("rates %.0f %.0f", slow.Rate(), fast.Rate())
	}
	s.Fluid.Abort(slow)
	if !near(fast.Rate(), 100*mb, 1e-9) {
		t.Fatalf("after abort %.0f", fast.Rate())
	}
}

func TestFluidIndependentComponents(t *testing.T) {
	// Flows on disjoint resources do not disturb each other's events.
	s := NewSim(1)
	A := s.Fluid.NewResource("A", 10*mb)
	B := s.Fluid.NewResource("B", 10*mb)
	fa := &Flow{Path: []*Resource{A}, Size: 10e6}
	s.Fluid.Start(fa)
	before := fa.ev.At()
	s.Fluid.Start(&Flow{Path: []*Resource{B}, Size: 5e6})
	if fa.ev.At() != before {
		t.Fatal("a flow on another component was rescheduled")
	}
	s.Run(Forever)
	if s.Now() != Second {
		t.Fatalf("ended at %v", s.Now())
	}
}

func BenchmarkFluidChurn(b *testing.B) {
	// 64 flows over 16 servers × 4 client links; each completion starts a
	// new flow, so every event re-solves a component.
	s := NewSim(1)
	servers := make([]*Resource, 16)
	for i := range servers {
		servers[i] = s.Fluid.NewResource("srv", 100*mb)
	}
	clients := make([]*Resource, 4)
	for i := range clients {
		clients[i] = s.Fluid.NewResource("cli", 400*mb)
	}
	rng := s.Rand(1, 1)
	n := 0
	var start func()
	start = func() {
		if n >= b.N {
			return
		}
		n++
		f := &Flow{Path: []*Resource{clients[rng.IntN(4)], servers[rng.IntN(16)]}, Size: int64(1e6 + rng.IntN(1e7))}
		f.Done = start
		s.Fluid.Start(f)
	}
	b.ResetTimer()
	for i := 0; i < 64; i++ {
		start()
	}
	s.Run(Forever)
	b.ReportMetric(float64(s.Events())/b.Elapsed().Seconds(), "events/s")
}

func TestFluidSetCap(t *testing.T) {
	// 1 GB on a 100 MB/s link whose capacity halves at 5 s: 500 MB moved
	// by then, the rest at 50 MB/s, done at 15 s; a link with no flows
	// takes its new capacity for the next one.
	s := NewSim(1)
	L := s.Fluid.NewResource("link", 100*mb)
	var end Time
	s.Fluid.Start(&Flow{Path: []*Resource{L}, Size: 1e9, Done: func() { end = s.Now() }})
	s.Schedule(5*Second, 0, 1, 0, func() { s.Fluid.SetCap(L, 50*mb) })
	s.Run(Forever)
	if !near(end.Seconds(), 15, 1e-6) || !near(L.Bytes, 1e9, 1e-9) {
		t.Fatalf("ended at %v having moved %.0f bytes", end, L.Bytes)
	}
	s.Fluid.SetCap(L, 200*mb)
	start := s.Now()
	s.Fluid.Start(&Flow{Path: []*Resource{L}, Size: 1e9, Done: func() { end = s.Now() }})
	s.Run(Forever)
	if !near((end - start).Seconds(), 5, 1e-6) {
		t.Fatalf("took %v at 200 MB/s", end-start)
	}
}
