package sim

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"math"
	"slices"
	"strconv"

	"github.com/strata-storage/strata/internal/api"
	"github.com/strata-storage/strata/internal/bench"
)

// The catalog model's terms from strata bench: md-rates against a Strata
// server at one worker, at a few (no more than the client's window of
// requests in flight, so every create goes alone) and at many (so none of
// the server's CPU is a thread going to sleep or being woken), each phase
// with both sides' CPU an operation and the catalog's groups (strata
// bench records them from the core's /metrics). Every term comes from the
// runs that isolate it:
//
//   - a request's CPU, each side's, from the most workers' stats;
//   - the wake-up and the going idle from one worker's stats, where each
//     process is woken and goes idle once an operation: its time is both
//     sides' request CPU and two wake-ups (no wire: a client on the
//     server's host), its CPU beyond the loaded one two wake-ups and two
//     parks;
//   - the writer's line, a group's time against the creates it held
//     (µs a group = sync_us + group_us + commit_us · creates), over every
//     run's creates;
//   - the group's CPU from the server's CPU a create at a few workers and
//     at many, where groups hold different numbers of creates (and many
//     workers' creates share a request: the client sends those beyond its
//     window together), the rest of the group's time being the sync;
//   - a create's (a remove's) own CPU, each side's, from the few workers'
//     creates (removes) less what the terms above charge.
//
// The fit assumes what strata bench on the server's host measures: the
// clients' CPU on the server's cores (clients_on_server, cores from the
// report's host) and no wire (rtt_us = 0).

// catalogWindow is the client's window of requests in flight
// (client/batch.go's batchWindow): the creates beyond it go together.
const catalogWindow = 8

// CatalogFit is a [catalog] fitted from md-rates runs, with what each term
// came from.
type CatalogFit struct {
	Catalog CatalogConfig
	// RemoveClientUS and RemoveServerUS are a remove's own CPU (the
	// catalog's client_us and server_us are a create's).
	RemoveClientUS, RemoveServerUS float64
	Workers                        []int    // the runs' worker counts
	Lines                          []string // how each term was found
}

// mdRun is one md-rates run's 0-byte phases.
type mdRun struct {
	workers              int
	create, stat, remove bench.Phase
}

// CalibrateCatalog fits the catalog model from md-rates reports against a
// Strata server at 1 worker, at 2 to the client's window (8) and at 32 or
// more; several runs at one count (best taken in turns with the others)
// count by their medians.
func CalibrateCatalog(reps []*bench.Report) (*CatalogFit, error) {
	var runs []mdRun
	cores := 0
	for _, rep := range reps {
		rs, err := mdRuns(rep, true)
		if err != nil {
			return nil, err
		}
		cores = max(cores, rep.Env.CPUs)
		runs = append(runs, rs...)
	}
	slices.SortFunc(runs, func(a, b mdRun) int { return a.workers - b.workers })
	runs, repeated := medianRuns(runs)
	var one, few, many *mdRun
	for i := range runs {
		switch r := &runs[i]; {
		case r.workers == 1:
			one = r
		case r.workers <= catalogWindow:
			few = r // the most workers that still send every create alone
		case r.workers >= 32:
			many = r
		}
	}
	if one == nil || few == nil || many == nil {
		var ws []int
		for _, r := range runs {
			ws = append(ws, r.workers)
		}
		return nil, fmt.Errorf("md-rates at %v workers: want runs at 1, at 2–%d and at 32 or more", ws, catalogWindow)
	}
	f := &CatalogFit{}
	for _, r := range runs {
		f.Workers = append(f.Workers, r.workers)
	}
	note := func(format string, a ...any) { f.Lines = append(f.Lines, fmt.Sprintf(format, a...)) }
	if repeated != "" {
		note("runs repeated at one worker count taken by their medians (each figure its own): %s", repeated)
	}
	c := &f.Catalog
	c.Cores = max(cores, 1)
	on := true
	c.ClientsOnServer = &on
	c.Window = catalogWindow
	c.LingerUS = 300 // internal/catalog/sqlstore's lingerFor
	c.CPUCV = 1

	cpu := func(ph bench.Phase) (float64, float64) { return ph.CPU.Client, *ph.CPU.Server }
	creq, sreq := cpu(many.stat)
	c.ClientRequestUS, c.ServerRequestUS = round1(creq), round1(sreq)
	note("client_request_us, server_request_us: %d workers' stats, CPU a stat %.1f (client) and %.1f (server) µs", many.workers, creq, sreq)

	c1, s1 := cpu(one.stat)
	wake := math.Max((1e6/one.stat.OpsPerSec-creq-sreq)/2, 0)
	park := math.Max((c1+s1-creq-sreq)/2-wake, 0)
	c.WakeUS, c.ParkUS = round1(wake), round1(park)
	note("wake_us, park_us: 1 worker's stats, %.0f/s and %.1f + %.1f µs of CPU a stat, against the request's %.1f", one.stat.OpsPerSec, c1, s1, creq+sreq)

	var ns, ts []float64
	for _, r := range runs {
		ns = append(ns, r.create.Groups.OpsPerGroup)
		ts = append(ts, r.create.Groups.USPerGroup)
	}
	commit, perGroup, err := leastSquares(ns, ts)
	if err != nil {
		return nil, fmt.Errorf("the writer's groups: %w", err)
	}
	commit, perGroup = math.Max(commit, 0), math.Max(perGroup, 0)
	note("commit_us, and sync_us + group_us = %.1f: µs a group against creates a group over every run (%s)", perGroup, pairs(ns, ts))

	// A create's server CPU is its request's, its own, its commit and its
	// share of a group: at a few workers the request is a stat's there
	// (each create alone), at many a stat's shared by the creates sent
	// together; the groups' sizes differ, which separates group_us.
	share := math.Max(1, math.Min(api.MaxBatch, float64(many.workers-catalogWindow+1)))
	cFew, sFew := cpu(few.create)
	_, sMany := cpu(many.create)
	cStat, sStat := cpu(few.stat)
	nFew, nMany := few.create.Groups.OpsPerGroup, many.create.Groups.OpsPerGroup
	group := perGroup / 2
	if d := 1/nFew - 1/nMany; d > 0.01 {
		group = (sFew - sStat - sMany + sreq/share) / d
	} else {
		note("group_us: the groups at %d and %d workers held alike (%.2f, %.2f): half the group's time taken as its CPU", few.workers, many.workers, nFew, nMany)
	}
	group = math.Min(math.Max(group, 0), perGroup)
	c.GroupUS, c.SyncUS, c.CommitUS = round1(group), round1(perGroup-group), round1(commit)
	note("group_us: the server's CPU a create at %d workers (%.1f µs, %.2f a group, a stat's %.1f) and %d (%.1f, %.2f a group, a request's CPU shared by %.0f)", few.workers, sFew, nFew, sStat, many.workers, sMany, nMany, share)

	own := func(client, server, n float64) (float64, float64) {
		return round1(math.Max(client-cStat, 0)), round1(math.Max(server-sStat-commit-group/n, 0))
	}
	c.ClientUS, c.ServerUS = own(cFew, sFew, nFew)
	cr, sr := cpu(few.remove)
	f.RemoveClientUS, f.RemoveServerUS = own(cr, sr, few.remove.Groups.OpsPerGroup)
	note("client_us, server_us: %d workers' creates (removes) less their stats and the writer's share", few.workers)
	if err := c.fill(); err != nil {
		return nil, err
	}
	return f, nil
}

// mdRuns reads a report's md-rates runs against a Strata server; for a
// fit, each phase must have both sides' CPU and the writes their groups.
func mdRuns(rep *bench.Report, fit bool) ([]mdRun, error) {
	if rep.Target.Kind != "strata" {
		return nil, fmt.Errorf("a %s target: the catalog is a Strata server's", rep.Target.Kind)
	}
	var runs []mdRun
	for _, res := range rep.Results {
		if res.Scenario != "md-rates" {
			continue
		}
		var r mdRun
		for _, ph := range res.Phases {
			switch ph.Name {
			case "create 0 B":
				r.create = ph
			case "stat 0 B":
				r.stat = ph
			case "delete 0 B":
				r.remove = ph
			}
		}
		r.workers = r.stat.Workers
		for i, ph := range []bench.Phase{r.create, r.stat, r.remove} {
			if ph.Name == "" || ph.Error != "" || ph.OpsPerSec <= 0 {
				return nil, fmt.Errorf("md-rates at %d workers: no %q result", r.workers, []string{"create 0 B", "stat 0 B", "delete 0 B"}[i])
			}
			if fit && (ph.CPU == nil || ph.CPU.Server == nil) {
				return nil, fmt.Errorf("md-rates at %d workers, %s: no CPU an operation of the client and the server (a strata bench from before it recorded them?)", r.workers, ph.Name)
			}
		}
		if fit && (r.create.Groups == nil || r.remove.Groups == nil) {
			return nil, fmt.Errorf("md-rates at %d workers: no catalog groups recorded", r.workers)
		}
		runs = append(runs, r)
	}
	return runs, nil
}

// medianRuns makes the runs at one worker count one run: each phase's
// rate, CPU and groups the median of theirs, figure by figure. This
// machine's rates drift by several per cent from one run to the next
// minutes later; a fit from one run at each count carries that drift into
// every term, a fit from the medians of runs taken in turns much less.
// runs are sorted by workers; repeated says which counts had several.
func medianRuns(runs []mdRun) (out []mdRun, repeated string) {
	for i := 0; i < len(runs); {
		j := i
		for j < len(runs) && runs[j].workers == runs[i].workers {
			j++
		}
		same := runs[i:j]
		i = j
		if len(same) == 1 {
			out = append(out, same[0])
			continue
		}
		if repeated != "" {
			repeated += ", "
		}
		repeated += fmt.Sprintf("%d × %d workers", len(same), same[0].workers)
		m := mdRun{workers: same[0].workers}
		for _, ph := range []struct {
			dst *bench.Phase
			get func(mdRun) bench.Phase
		}{
			{&m.create, func(r mdRun) bench.Phase { return r.create }},
			{&m.stat, func(r mdRun) bench.Phase { return r.stat }},
			{&m.remove, func(r mdRun) bench.Phase { return r.remove }},
		} {
			phases := make([]bench.Phase, len(same))
			for k, r := range same {
				phases[k] = ph.get(r)
			}
			*ph.dst = bench.MedianPhase(phases)
		}
		out = append(out, m)
	}
	return out, repeated
}

// leastSquares fits y = a·x + b.
func leastSquares(xs, ys []float64) (a, b float64, err error) {
	n := float64(len(xs))
	var mx, my float64
	for i := range xs {
		mx, my = mx+xs[i]/n, my+ys[i]/n
	}
	var sxy, sxx float64
	for i := range xs {
		sxy += (xs[i] - mx) * (ys[i] - my)
		sxx += (xs[i] - mx) * (xs[i] - mx)
	}
	if sxx == 0 {
		return 0, 0, errors.New("every run's groups held as many operations: no line")
	}
	a = sxy / sxx
	return a, my - a*mx, nil
}

func pairs(xs, ys []float64) string {
	s := ""
	for i := range xs {
		if i > 0 {
			s += ", "
		}
		s += strconv.FormatFloat(xs[i], 'f', 2, 64) + " → " + strconv.FormatFloat(ys[i], 'f', 0, 64)
	}
	return s
}

func round1(v float64) float64 { return math.Round(v*10) / 10 }

// WriteTOML writes the fit as a metadata study (creates against 1 to 64
// clients on these cores): `strata sim sweep` predicts with it, and
// --set workload.op=stat (with client_us and server_us 0) or remove (with
// the remove's) the other operations.
func (f *CatalogFit) WriteTOML(w io.Writer) error {
	c := f.Catalog
	_, err := fmt.Fprintf(w, `name = "Strata's catalog: creates against clients (strata sim calibrate-catalog)"
note = """
Fitted from strata bench md-rates at %v workers on the server's host
(strata sim calibrate-catalog). A stat: --set workload.op=stat --set catalog.client_us=0
--set catalog.server_us=0; a remove: --set workload.op=remove --set
catalog.client_us=%g --set catalog.server_us=%g."""

[clients]
count = 8

[catalog]
cores = %d
clients_on_server = true
rtt_us = 0
sync_us = %g
group_us = %g
commit_us = %g
client_request_us = %g
server_request_us = %g
wake_us = %g
park_us = %g
window = %d
linger_us = %g
cpu_cv = %g
client_us = %g
server_us = %g

[workload]
op = "create"
files = 2000

[sweep]
"clients.count" = ["1", "2", "4", "8", "16", "32", "64"]
`, f.Workers, f.RemoveClientUS, f.RemoveServerUS, c.Cores, c.SyncUS, c.GroupUS, c.CommitUS, c.ClientRequestUS, c.ServerRequestUS,
		c.WakeUS, c.ParkUS, c.Window, c.LingerUS, c.CPUCV, c.ClientUS, c.ServerUS)
	return err
}

// WriteReport prints the terms and what each came from.
func (f *CatalogFit) WriteReport(w io.Writer) error {
	c := f.Catalog
	fmt.Fprintf(w, "catalog fitted from strata bench md-rates at %v workers\n", f.Workers)
	fmt.Fprintf(w, "  sync_us %g  group_us %g  commit_us %g\n", c.SyncUS, c.GroupUS, c.CommitUS)
	fmt.Fprintf(w, "  client_request_us %g  server_request_us %g  wake_us %g  park_us %g\n", c.ClientRequestUS, c.ServerRequestUS, c.WakeUS, c.ParkUS)
	fmt.Fprintf(w, "  create: client_us %g  server_us %g; remove: %g, %g\n", c.ClientUS, c.ServerUS, f.RemoveClientUS, f.RemoveServerUS)
	for _, l := range f.Lines {
		fmt.Fprintf(w, "  %s\n", l)
	}
	return nil
}

// Against is one measured md-rates run beside what the fit predicts for
// its worker count: creates, removes and stats a second.
type Against struct {
	Workers             int
	Measured, Predicted [3]float64 // create, remove, stat
}

// Ops names Against's columns.
var Ops = [3]string{"create", "remove", "stat"}

// Predict runs the fitted study (seed 1, as strata sim sweep) for every
// worker count of reps' md-rates runs, medians where a count was run more
// than once, and returns each beside its measurement.
func (f *CatalogFit) Predict(reps []*bench.Report) ([]Against, error) {
	var runs []mdRun
	for _, rep := range reps {
		rs, err := mdRuns(rep, false)
		if err != nil {
			return nil, err
		}
		runs = append(runs, rs...)
	}
	slices.SortFunc(runs, func(a, b mdRun) int { return a.workers - b.workers })
	runs, _ = medianRuns(runs)
	var as []Against
	for _, r := range runs {
		as = append(as, Against{Workers: r.workers, Measured: [3]float64{r.create.OpsPerSec, r.remove.OpsPerSec, r.stat.OpsPerSec}})
	}
	return as, f.predict(as)
}

// PredictWorkers is Predict for worker counts not (yet) measured.
func (f *CatalogFit) PredictWorkers(workers []int) ([]Against, error) {
	as := make([]Against, len(workers))
	for i, w := range workers {
		if w < 1 {
			return nil, fmt.Errorf("%d workers", w)
		}
		as[i].Workers = w
	}
	return as, f.predict(as)
}

// predict fills as' predictions.
func (f *CatalogFit) predict(as []Against) error {
	var b bytes.Buffer
	if err := f.WriteTOML(&b); err != nil {
		return err
	}
	st, err := ParseStudy(b.Bytes())
	if err != nil {
		return err
	}
	for k := range as {
		a := &as[k]
		for i, op := range Ops {
			set := map[string]string{"clients.count": strconv.Itoa(a.Workers), "workload.op": op}
			switch op {
			case "remove":
				set["catalog.client_us"], set["catalog.server_us"] = fmtUS(f.RemoveClientUS), fmtUS(f.RemoveServerUS)
			case "stat":
				set["catalog.client_us"], set["catalog.server_us"] = "0", "0"
			}
			c, err := st.With(set)
			if err != nil {
				return err
			}
			res, err := Run(c, 1)
			if err != nil {
				return fmt.Errorf("%s at %d workers: %w", op, a.Workers, err)
			}
			a.Predicted[i] = res.IOPS
		}
	}
	return nil
}

func fmtUS(v float64) string { return strconv.FormatFloat(v, 'g', -1, 64) }

// WritePredicted prints predictions not yet measured.
func (f *CatalogFit) WritePredicted(w io.Writer, as []Against) error {
	fmt.Fprintf(w, "\npredicted (this fit, strata sim's DES, seed 1), per second\n  %7s", "workers")
	for _, op := range Ops {
		fmt.Fprintf(w, "  %9s", op)
	}
	fmt.Fprintln(w)
	for _, a := range as {
		fmt.Fprintf(w, "  %7d", a.Workers)
		for i := range Ops {
			fmt.Fprintf(w, "  %9.0f", a.Predicted[i])
		}
		fmt.Fprintln(w)
	}
	return nil
}

// WriteAgainst prints predictions beside measurements, with each error
// and the median and worst of the worker counts the fit did not use.
func (f *CatalogFit) WriteAgainst(w io.Writer, as []Against) error {
	fmt.Fprintf(w, "\npredicted (this fit) against measured (the reports given with --against); ( ) a worker count the fit used\n")
	fmt.Fprintf(w, "  %7s", "workers")
	for _, op := range Ops {
		fmt.Fprintf(w, "  %9s %9s %8s", op+"/s", "measured", "error")
	}
	fmt.Fprintln(w)
	var errs []float64
	for _, a := range as {
		used := slices.Contains(f.Workers, a.Workers)
		fmt.Fprintf(w, "  %7d", a.Workers)
		for i := range Ops {
			e := 100 * (a.Predicted[i] - a.Measured[i]) / a.Measured[i]
			s := fmt.Sprintf("%+.1f %%", e)
			if used {
				s = "(" + s + ")"
			} else {
				errs = append(errs, math.Abs(e))
			}
			fmt.Fprintf(w, "  %9.0f %9.0f %8s", a.Predicted[i], a.Measured[i], s)
		}
		fmt.Fprintln(w)
	}
	if len(errs) == 0 {
		_, err := fmt.Fprintln(w, "  every worker count measured was one the fit used")
		return err
	}
	slices.Sort(errs)
	med := errs[len(errs)/2]
	if len(errs)%2 == 0 {
		med = (errs[len(errs)/2-1] + errs[len(errs)/2]) / 2
	}
	_, err := fmt.Fprintf(w, "  %d predictions at worker counts the fit did not use: median |error| %.1f %%, worst %.1f %%\n", len(errs), med, errs[len(errs)-1])
	return err
}
