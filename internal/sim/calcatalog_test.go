package sim

import (
	"bytes"
	"math"
	"strings"
	"testing"

	"github.com/strata-storage/strata/internal/bench"
)

// mdReport is an md-rates report at w workers: a stat, a create and a
// delete phase with their rates, both sides' CPU an operation and, for the
// writes, the catalog's groups (creates a group, µs a group).
func mdReport(w int, stat, statC, statS, createC, createS, createN, createT, delC, delS, delN, delT float64) *bench.Report {
	ph := func(name string, rate, c, s float64, n, t float64) bench.Phase {
		p := bench.Phase{Name: name, Workers: w, Ops: 1000, OpsPerSec: rate, CPU: &bench.PhaseCPU{Client: c, Server: &s}}
		if n > 0 {
			p.Groups = &bench.PhaseGroups{Groups: 100, OpsPerGroup: n, USPerGroup: t}
		}
		return p
	}
	rep := &bench.Report{}
	rep.Target.Kind = "strata"
	rep.Env.CPUs = 2
	rep.Results = []bench.Result{{Scenario: "md-rates", Phases: []bench.Phase{
		ph("create 0 B", 1000, createC, createS, createN, createT),
		ph("stat 0 B", stat, statC, statS, 0, 0),
		ph("delete 0 B", 1000, delC, delS, delN, delT),
	}}}
	return rep
}

// Reports made from known terms give the terms back: request CPU 10 + 12
// µs, wake-up 8, park 5, a group 50 µs of sync and 90 of CPU plus 18 a
// create, a create's own CPU 14 (client) and 6 (server), a remove's 9 and
// 11.
func TestCalibrateCatalog(t *testing.T) {
	const creq, sreq, wake, park, sync, group, commit = 10.0, 12.0, 8.0, 5.0, 50.0, 90.0, 18.0
	groupT := func(n float64) float64 { return sync + group + commit*n }
	statFewC, statFewS := 11.0, 13.0
	few := func(own, n float64) float64 { return statFewS + own + commit + group/n }
	share := 64.0 - 8 + 1
	reps := []*bench.Report{
		// one worker: only its stats and its groups (one create each) count
		mdReport(1, 1e6/(creq+sreq+2*wake), 22, 26, 60, 200, 1, groupT(1), 50, 190, 1, groupT(1)),
		mdReport(8, 70000, statFewC, statFewS, statFewC+14, few(6, 3.3), 3.3, groupT(3.3), statFewC+9, few(11, 3.5), 3.5, groupT(3.5)),
		mdReport(64, 80000, creq, sreq, 10, sreq/share+6+commit+group/14.5, 14.5, groupT(14.5), 12, 40, 10, groupT(10)),
	}
	// (c1 + s1) = 48 = creq + sreq + 2 (wake + park)
	f, err := CalibrateCatalog(reps)
	if err != nil {
		t.Fatal(err)
	}
	c := f.Catalog
	for _, v := range []struct {
		name      string
		got, want float64
	}{
		{"client_request_us", c.ClientRequestUS, creq}, {"server_request_us", c.ServerRequestUS, sreq},
		{"wake_us", c.WakeUS, wake}, {"park_us", c.ParkUS, park},
		{"sync_us", c.SyncUS, sync}, {"group_us", c.GroupUS, group}, {"commit_us", c.CommitUS, commit},
		{"client_us", c.ClientUS, 14}, {"server_us", c.ServerUS, 6},
		{"remove client_us", f.RemoveClientUS, 9}, {"remove server_us", f.RemoveServerUS, 11},
	} {
		if math.Abs(v.got-v.want) > 0.15 {
			t.Errorf("%s = %g, want %g", v.name, v.got, v.want)
		}
	}
	// Runs repeated at a worker count are taken by their medians: a run
	// above and one below each of the three change no term.
	var repeated []*bench.Report
	for _, r := range reps {
		repeated = append(repeated, scaled(r, 1.2), r, scaled(r, 0.7))
	}
	g, err := CalibrateCatalog(repeated)
	if err != nil {
		t.Fatal(err)
	}
	gc, cc := g.Catalog, c
	gc.ClientsOnServer, cc.ClientsOnServer = nil, nil // pointers to the same true
	if gc != cc || g.RemoveClientUS != f.RemoveClientUS || g.RemoveServerUS != f.RemoveServerUS {
		t.Errorf("from repeated runs %+v, from one run each %+v", g.Catalog, c)
	}
	if !strings.Contains(strings.Join(g.Lines, "\n"), "3 × 64 workers") {
		t.Errorf("the fit does not say which runs were repeated:\n%s", strings.Join(g.Lines, "\n"))
	}
	// With two of a count, their mean: two runs 20 % apart at 64 workers
	// give the stats' CPU between them.
	h, err := CalibrateCatalog([]*bench.Report{reps[0], reps[1], scaled(reps[2], 1.2), scaled(reps[2], 0.8)})
	if err != nil {
		t.Fatal(err)
	}
	if h.Catalog.ClientRequestUS != creq || h.Catalog.ServerRequestUS != sreq {
		t.Errorf("two runs at 64 workers: request CPU %g, %g, want %g, %g", h.Catalog.ClientRequestUS, h.Catalog.ServerRequestUS, creq, sreq)
	}

	// Predictions beside measurements: each report's rates as measured,
	// the fit's predictions for its worker count, a median of repeats.
	as, err := f.Predict(append(repeated, mdReport(2, 30000, 11, 13, 25, 150, 1.1, groupT(1.1), 20, 160, 1.1, groupT(1.1))))
	if err != nil {
		t.Fatal(err)
	}
	if len(as) != 4 || as[0].Workers != 1 || as[1].Workers != 2 || as[1].Measured != [3]float64{1000, 1000, 30000} ||
		as[0].Measured[2] != reps[0].Results[0].Phases[1].OpsPerSec {
		t.Fatalf("against: %+v", as)
	}
	ps, err := f.PredictWorkers([]int{2})
	if err != nil || ps[0].Predicted != as[1].Predicted {
		t.Fatalf("predicted at 2 workers %+v (%v), beside the measurement %+v", ps, err, as[1])
	}
	for i, p := range as[1].Predicted {
		if p <= 0 || p > 1e6 {
			t.Errorf("%s at 2 workers predicted %g a second", Ops[i], p)
		}
	}
	var tb bytes.Buffer
	if err := f.WriteAgainst(&tb, as); err != nil || !strings.Contains(tb.String(), "3 predictions at worker counts the fit did not use") {
		t.Errorf("WriteAgainst: %v\n%s", err, tb.String())
	}
	if _, err := f.PredictWorkers([]int{0}); err == nil {
		t.Error("0 workers predicted")
	}

	// the study it writes runs, and as it was fitted
	var b bytes.Buffer
	if err := f.WriteTOML(&b); err != nil {
		t.Fatal(err)
	}
	st, err := Parse(b.Bytes())
	if err != nil {
		t.Fatalf("%v\n%s", err, b.String())
	}
	if st.Catalog.GroupUS != c.GroupUS || st.Catalog.ParkUS != c.ParkUS || st.Workload.Op != "create" {
		t.Errorf("the study's catalog %+v, fitted %+v", st.Catalog, c)
	}
	run(t, st)

	for _, bad := range []struct {
		reps []*bench.Report
		want string
	}{
		{reps[1:], "want runs at 1"},
		{reps[:2], "want runs at 1"},
		{append([]*bench.Report{{Target: bench.TargetInfo{Kind: "posix"}}}, reps...), "a posix target"},
		{[]*bench.Report{reps[0], reps[1], noCPU(reps[2])}, "no CPU an operation"},
	} {
		if _, err := CalibrateCatalog(bad.reps); err == nil || !strings.Contains(err.Error(), bad.want) {
			t.Errorf("got %v, want an error with %q", err, bad.want)
		}
	}
}

// scaled is rep with every figure of its phases k times its own.
func scaled(rep *bench.Report, k float64) *bench.Report {
	r := *rep
	r.Results = []bench.Result{rep.Results[0]}
	r.Results[0].Phases = append([]bench.Phase(nil), rep.Results[0].Phases...)
	for i := range r.Results[0].Phases {
		p := &r.Results[0].Phases[i]
		p.OpsPerSec *= k
		s := *p.CPU.Server * k
		p.CPU = &bench.PhaseCPU{Client: p.CPU.Client * k, Server: &s}
		if p.Groups != nil {
			p.Groups = &bench.PhaseGroups{Groups: p.Groups.Groups, OpsPerGroup: p.Groups.OpsPerGroup * k, USPerGroup: p.Groups.USPerGroup * k}
		}
	}
	return &r
}

// noCPU is rep as a strata bench before CPU was recorded wrote it.
func noCPU(rep *bench.Report) *bench.Report {
	r := *rep
	r.Results = []bench.Result{rep.Results[0]}
	r.Results[0].Phases = append([]bench.Phase(nil), rep.Results[0].Phases...)
	for i := range r.Results[0].Phases {
		r.Results[0].Phases[i].CPU = nil
	}
	return &r
}
