package sim

import (
	"fmt"
	"math"
	"strings"
	"testing"
)

// metaStudy runs clients × files operations of op against a catalog of
// the given [catalog] lines.
func metaStudy(t *testing.T, op string, clients, files int, catalog string) *Result {
	t.Helper()
	c, err := Parse([]byte(fmt.Sprintf("[clients]\ncount = %d\n[catalog]\n%s\n[workload]\nop = %q\nfiles = %d\n", clients, catalog, op, files)))
	if err != nil {
		t.Fatal(err)
	}
	r := run(t, c)
	if r.Meta == nil || r.Meta.Ops != int64(clients*files) {
		t.Fatalf("%s, %d clients: %+v", op, clients, r.Meta)
	}
	return r
}

// With CPU free, N clients on a writer that takes sync + group + n·commit
// for a group of n: the writer starts a group as soon as it is free with what
// waits, so in a closed loop the clients split into two halves that
// alternate — one half's group is written while the other half waits for
// the next — N/2 operations per (sync + group + N/2·commit), exactly. The catalog
// alone measures the same: about 4 per group from 8 goroutines.
func TestMetaGroupCommit(t *testing.T) {
	for _, n := range []int{1, 8, 64} {
		r := metaStudy(t, "create", n, 500, "cores = 1000\nsync_us = 150\ngroup_us = 50\ncommit_us = 10")
		g := math.Max(1, float64(n)/2)
		want := g / ((150 + 50 + 10*g) / 1e6)
		t.Logf("%d clients: %.0f creates/s (%.2f per group), formula %.0f", n, r.Meta.PerS, r.Meta.PerSync, want)
		if math.Abs(r.Meta.PerS-want)/want > 0.01 || math.Abs(r.Meta.PerSync-g) > 0.01 {
			t.Errorf("%d clients: %.0f creates/s in groups of %.2f; want %.0f in groups of %.0f", n, r.Meta.PerS, r.Meta.PerSync, want, g)
		}
		if r.Meta.PerS > r.Bound.MBps*1.0001 {
			t.Errorf("%d clients: %.0f creates/s above the bound %.0f", n, r.Meta.PerS, r.Bound.MBps)
		}
	}
}

// Stats do not commit: with enough clients the cores bind, at the cores
// over the CPU of one (client and server on the same cores), seed 002's
// N/c; with one client, the round trip does.
func TestMetaCPUBound(t *testing.T) {
	cat := "cores = 2\nclient_us = 15\nserver_us = 15\nrtt_us = 20"
	many := metaStudy(t, "stat", 64, 500, cat)
	one := metaStudy(t, "stat", 1, 2000, cat)
	t.Logf("64 clients: %.0f stats/s (bound %.0f, %s); 1 client: %.0f (bound %.0f, %s)",
		many.Meta.PerS, many.Bound.MBps, many.Bound.Binding, one.Meta.PerS, one.Bound.MBps, one.Bound.Binding)
	if many.Bound.Binding != "N/c" || many.Meta.PerS < 0.99*many.Bound.MBps || many.Meta.PerS > many.Bound.MBps*1.0001 {
		t.Errorf("64 clients: %.0f stats/s against %s = %.0f", many.Meta.PerS, many.Bound.Binding, many.Bound.MBps)
	}
	if one.Bound.Binding != "N/latency" || math.Abs(one.Meta.PerS-1e6/50)/(1e6/50) > 0.001 {
		t.Errorf("1 client: %.0f stats/s, want 1 / 50 µs (%s)", one.Meta.PerS, one.Bound.Binding)
	}
	if one.Meta.Groups != 0 {
		t.Errorf("stats committed %d groups", one.Meta.Groups)
	}
}

func TestMetaErrors(t *testing.T) {
	for _, c := range []struct{ line, want string }{
		{"sync_us = -1", "catalog.sync_us"},
		{"wake_us = -3", "catalog.wake_us"}, {"park_us = -1", "catalog.park_us"},
		{"window = -1", "catalog.window"},
		{"cpu_cv = 1.5", "catalog.cpu_cv"},
	} {
		_, err := Parse([]byte("[catalog]\n" + c.line + "\n[workload]\nop = \"create\""))
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: %v", c.line, err)
		}
	}
}

// Bursts that vary about their mean break the clients' convoy: with a
// linger, fixed bursts keep 8 clients in one group, varied ones spread
// them over several, and the rate stays within the bound.
func TestMetaCPUVariation(t *testing.T) {
	cat := "cores = 2\nclient_us = 30\nserver_us = 10\nrtt_us = 10\nsync_us = 40\ngroup_us = 60\ncommit_us = 10\nlinger_us = 300\n"
	fixed := metaStudy(t, "create", 8, 500, cat)
	varied := metaStudy(t, "create", 8, 500, cat+"cpu_cv = 1")
	t.Logf("per group: %.2f fixed, %.2f varied; %.0f and %.0f creates/s (bound %.0f)", fixed.Meta.PerSync, varied.Meta.PerSync, fixed.Meta.PerS, varied.Meta.PerS, varied.Bound.MBps)
	if fixed.Meta.PerSync != 8 || varied.Meta.PerSync >= 7 {
		t.Errorf("per group: %.2f fixed (want 8), %.2f varied (want fewer)", fixed.Meta.PerSync, varied.Meta.PerSync)
	}
	if varied.Meta.PerS > varied.Bound.MBps*1.01 {
		t.Errorf("%.0f creates/s above the bound %.0f", varied.Meta.PerS, varied.Bound.MBps)
	}
}

// A window of w requests sends every create alone while no more than w
// clients make them, and batches the rest: with the request's CPU the
// dearer part, batching is what lets many clients go faster than the
// cores would let requests of one create each.
func TestMetaBatchWindow(t *testing.T) {
	cat := "cores = 2\nclient_us = 5\nserver_us = 5\nclient_request_us = 40\nserver_request_us = 40\nsync_us = 100\ncommit_us = 5\n"
	alone := metaStudy(t, "create", 8, 500, cat)
	within := metaStudy(t, "create", 8, 500, cat+"window = 8")
	if within.Meta.PerS != alone.Meta.PerS || within.Meta.Requests != 8*500 {
		t.Errorf("8 clients, window 8: %.0f creates/s in %d requests; alone %.0f", within.Meta.PerS, within.Meta.Requests, alone.Meta.PerS)
	}
	many := metaStudy(t, "create", 64, 100, cat)
	batched := metaStudy(t, "create", 64, 100, cat+"window = 2")
	t.Logf("64 clients: %.0f creates/s alone (bound %.0f), %.0f with a window of 2 (%.1f a request, bound %.0f)",
		many.Meta.PerS, many.Bound.MBps, batched.Meta.PerS, float64(batched.Meta.Ops)/float64(batched.Meta.Requests), batched.Bound.MBps)
	if many.Meta.Requests != many.Meta.Ops || batched.Meta.Requests*8 > batched.Meta.Ops {
		t.Errorf("requests: %d for %d creates alone, %d for %d with a window", many.Meta.Requests, many.Meta.Ops, batched.Meta.Requests, batched.Meta.Ops)
	}
	if batched.Meta.PerS < 2*many.Meta.PerS || batched.Meta.PerS > batched.Bound.MBps*1.0001 {
		t.Errorf("64 clients with a window of 2: %.0f creates/s against %.0f alone, bound %.0f", batched.Meta.PerS, many.Meta.PerS, batched.Bound.MBps)
	}
	// stats and removes are not batched
	if r := metaStudy(t, "remove", 64, 50, cat+"window = 2"); r.Meta.Requests != r.Meta.Ops {
		t.Errorf("removes with a window: %d requests for %d", r.Meta.Requests, r.Meta.Ops)
	}
}

// One core serves the clients' requests one after another, so they reach
// the writer server_us apart: a writer that takes what waits starts a
// group with the first, one that lingers for those still in the server's
// CPU takes all of them.
func TestMetaLinger(t *testing.T) {
	cat := "cores = 1\nclients_on_server = false\nserver_us = 10\nsync_us = 1000\n"
	eager := metaStudy(t, "create", 8, 200, cat)
	linger := metaStudy(t, "create", 8, 200, cat+"linger_us = 300")
	t.Logf("%.2f per group eager, %.2f lingering", eager.Meta.PerSync, linger.Meta.PerSync)
	if linger.Meta.PerSync != 8 || eager.Meta.PerSync >= 7 {
		t.Errorf("per group: %.2f lingering (want 8), %.2f eager (want fewer)", linger.Meta.PerSync, eager.Meta.PerSync)
	}
	// a linger shorter than the stragglers' CPU ends with what came
	short := metaStudy(t, "create", 8, 200, cat+"linger_us = 25")
	if short.Meta.PerSync >= linger.Meta.PerSync || short.Meta.PerSync <= 1 {
		t.Errorf("per group with a 25 µs linger: %.2f", short.Meta.PerSync)
	}
}

// One client's stat is two bursts (its own, the server's) and a round
// trip, and each process is idle when its burst comes: the burst pays
// wake_us of CPU first, unless the process's thread is still going idle
// (park_us, on its core, off the operation's path) and takes it.
func TestMetaWake(t *testing.T) {
	cat := "cores = 2\nclient_us = 10\nserver_us = 10\nrtt_us = 20\nwake_us = 15\n"
	for _, c := range []struct {
		park string
		want float64 // µs an operation
		busy float64 // CPU µs an operation
	}{{"park_us = 0", 70, 50}, {"park_us = 5", 70, 60}, {"park_us = 1000", 40, 80}} {
		r := metaStudy(t, "stat", 1, 2000, cat+c.park)
		got := 1e6 / r.Meta.PerS
		if math.Abs(got-c.want) > 0.1 {
			t.Errorf("%s: %.2f µs a stat, want %.0f (%d wakes)", c.park, got, c.want, r.Meta.Wakes)
		}
		// with park_us = 1000 both cores are always held: 2 × 40 µs
		if busy := r.Meta.CoresBusy * 2 * got; math.Abs(busy-c.busy) > 0.5 {
			t.Errorf("%s: %.2f CPU µs a stat, want %.0f", c.park, busy, c.busy)
		}
	}
}

// Under load a process is seldom idle: its threads go from one burst to
// the next, so the wake-ups and parks that more than double an
// operation's CPU at one client all but vanish, and stats run near the
// cores over their CPU.
func TestMetaWakeUnderLoad(t *testing.T) {
	cat := "cores = 2\nclient_us = 10\nserver_us = 10\nwake_us = 30\npark_us = 30\ncpu_cv = 1\n"
	one := metaStudy(t, "stat", 1, 2000, cat)
	if one.Meta.Wakes != 2*2000 {
		t.Errorf("one client: %d wakes in 2,000 stats, want 4,000", one.Meta.Wakes)
	}
	r := metaStudy(t, "stat", 64, 200, cat)
	if f := float64(r.Meta.Wakes) / float64(r.Meta.Ops); f > 0.1 {
		t.Errorf("64 clients: %.3f wakes a stat", f)
	}
	if want := 2 / 20e-6; r.Meta.PerS < 0.85*want || r.Meta.PerS > want {
		t.Errorf("64 clients: %.0f stats/s, want the cores' %.0f", r.Meta.PerS, want)
	}
}
