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
	_, err := Parse([]byte("[catalog]\nsync_us = -1\n[workload]\nop = \"create\""))
	if err == nil || !strings.Contains(err.Error(), "catalog.sync_us") {
		t.Errorf("a negative sync: %v", err)
	}
}
