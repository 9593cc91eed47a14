package sim

import (
	"fmt"
	"io"
	"math"
	"sort"
	"strconv"
	"strings"
	"text/tabwriter"

	"github.com/strata-storage/strata/internal/bench"
	"github.com/strata-storage/strata/internal/chart"
)

// Sample is one measured point: requests of Size bytes at MBps with
// Streams streams.
type Sample struct {
	Op      string
	Size    int64
	Streams int
	Servers int // scaling: devices each file is striped over
	MBps    float64
	Bytes   int64
	Source  string // scenario and phase
}

// Fit is a piecewise t(s) = t0 + s/R.
type Fit struct {
	Pieces []Piece
	// Granule, when set, is the least a request costs (t0 + max(s, g)/R).
	Granule int64
	// RMS relative error of the fit over the points it was fitted on.
	RMS float64
}

// Calibration is what calibrate learned from one bench report, and how
// well it predicts the points it was not fitted on.
type Calibration struct {
	Source  string
	Target  string
	Runs    int // the calibration runs whose medians were fitted (1: one)
	Curve   CurveParams
	Fits    map[string]*Fit // by op
	Used    []Sample
	Checks  []Check
	Holdout bool
	// Repeats are the predictions of every point for a repeat of the
	// calibration run (CalibrateOptions.Repeat): one list per measured
	// repeat, or one of predictions alone.
	Sink    *ClientConfig
	Repeats []Repeat
}

// Repeat is a run of the calibration's scenarios after the calibration,
// every point of it predicted: its reads into local files when it was
// run with --sink (Sink), into memory otherwise.
type Repeat struct {
	Source string // the measured report; "" for predictions alone
	Runs   int    // the measured runs whose medians it holds
	Sink   string // where its reads went (strata bench --sink)
	Checks []Check
}

// Check compares a DES prediction with a measurement.
type Check struct {
	What      string  `json:"what"`
	Measured  float64 `json:"measured_mb_per_s"`
	Predicted float64 `json:"predicted_mb_per_s"`
	Error     float64 `json:"error"` // (predicted − measured)/measured
	// Fitted marks a repeat of a configuration the calibration was
	// fitted on: shown, but not counted in the error summary.
	Fitted bool `json:"fitted,omitempty"`
}

// samples reads the characteristic curve (cemss-char: one stream, I/O
// size swept) and the scaling runs (n streams to one server) from a report.
func samples(rep *bench.Report) (curve, scaling []Sample) {
	for _, res := range rep.Results {
		for _, ph := range res.Phases {
			if ph.Failed() || ph.Skipped != "" || ph.MiBps <= 0 {
				continue
			}
			op := strings.Fields(ph.Name)[0]
			if op != "read" && op != "write" {
				continue
			}
			mb := ph.MiBps * (1 << 20) / 1e6
			switch res.Scenario {
			case "cemss-char":
				sz, err := bench.ParseSize(ph.Labels["io_size"])
				if err != nil {
					continue
				}
				curve = append(curve, Sample{Op: op, Size: sz, Streams: 1, MBps: mb, Bytes: ph.Bytes, Source: res.Scenario + " " + ph.Name})
			case "scaling":
				n, err1 := strconv.Atoi(ph.Labels["clients"])
				m, err2 := strconv.Atoi(ph.Labels["servers"])
				if err1 != nil || err2 != nil {
					continue
				}
				sz, _ := bench.ParseSize(res.Params["transfer"])
				if sz <= 0 {
					sz, _ = bench.ParseSize(res.Params["block"])
				}
				scaling = append(scaling, Sample{Op: op, Size: sz, Streams: n, Servers: m, MBps: mb, Bytes: ph.Bytes, Source: res.Scenario + " " + ph.Name})
			}
		}
	}
	return curve, scaling
}

// fitLine fits t = t0 + s·b by least squares on relative error (each row
// divided by the measured t, so small and large requests count alike).
func fitLine(ss []Sample) (t0, b, rms float64) { return fitGranule(ss, 0) }

// fitGranule fits t = t0 + max(s, g)·b: requests smaller than the granule
// g cost as much as one granule.
func fitGranule(ss []Sample, g int64) (t0, b, rms float64) {
	var a11, a12, a22, y1, y2 float64
	for _, s := range ss {
		t := float64(s.Size) / (s.MBps * 1e6)
		u, v := 1/t, float64(max(s.Size, g))/t
		a11 += u * u
		a12 += u * v
		a22 += v * v
		y1 += u
		y2 += v
	}
	det := a11*a22 - a12*a12
	if det != 0 {
		t0 = (y1*a22 - y2*a12) / det
		b = (a11*y2 - a12*y1) / det
	}
	if det == 0 || t0 < 0 || b <= 0 {
		// no fixed cost (or one point): rate only
		t0, b = 0, y2/a22
	}
	var e2 float64
	for _, s := range ss {
		t := float64(s.Size) / (s.MBps * 1e6)
		e := (t0 + float64(max(s.Size, g))*b - t) / t
		e2 += e * e
	}
	return t0, b, math.Sqrt(e2 / float64(len(ss)))
}

// fitPiecewise fits one line, or two with a breakpoint where the
// mechanism changes (cache size, the OS's largest request), whichever
// explains the points better: a split must halve the error to be taken.
func fitPiecewise(ss []Sample) *Fit {
	sort.Slice(ss, func(i, j int) bool { return ss[i].Size < ss[j].Size })
	piece := func(part []Sample, upto int64) (Piece, float64) {
		t0, b, rms := fitLine(part)
		return Piece{Upto: Size(upto), T0: math.Round(t0*1e7) / 1e4, Rate: Size(math.Round(1 / b))}, rms
	}
	one, rms := piece(ss, math.MaxInt64)
	best := &Fit{Pieces: []Piece{one}, RMS: rms}
	for k := 2; k <= len(ss)-2; k++ {
		p1, r1 := piece(ss[:k], ss[k-1].Size)
		p2, r2 := piece(ss[k:], math.MaxInt64)
		n1, n2 := float64(k), float64(len(ss)-k)
		r := math.Sqrt((r1*r1*n1 + r2*r2*n2) / (n1 + n2))
		if r < best.RMS && r < rms/2 {
			best = &Fit{Pieces: []Piece{p1, p2}, RMS: r}
		}
	}
	// a granule: small requests cost a whole unit (a checksum chunk, a
	// page); tried at powers of two, taken if it halves the error too
	for g := int64(4 << 10); g <= 64<<20; g *= 2 {
		if g <= ss[0].Size {
			continue
		}
		t0, b, r := fitGranule(ss, g)
		if r < best.RMS && r < rms/2 {
			best = &Fit{Pieces: []Piece{{Upto: Size(math.MaxInt64), T0: math.Round(t0*1e7) / 1e4, Rate: Size(math.Round(1 / b))}}, RMS: r, Granule: g}
		}
	}
	return best
}

// Calibrate fits a curve device from a bench report: t(s) per operation
// from the characteristic sweep, capacity(n) from the scaling runs. With
// holdout set, it fits on every other I/O size and on the smallest and
// largest stream counts only, then predicts the rest with the DES and
// reports the error of each prediction.
func Calibrate(rep *bench.Report, opt *CalibrateOptions) (*Calibration, error) {
	if opt == nil {
		opt = &CalibrateOptions{}
	}
	curve, scaling := samples(rep)
	if len(curve) == 0 {
		return nil, fmt.Errorf("no cemss-char phases to fit (run: strata bench run cemss-char scaling --json FILE)")
	}
	cal := &Calibration{Source: rep.Tool + " " + rep.Version, Target: rep.Target.Spec, Runs: max(rep.Runs, 1), Fits: map[string]*Fit{}, Holdout: opt.Holdout}
	var held []Sample
	for _, op := range []string{"write", "read"} {
		var fit []Sample
		var all []Sample
		for _, s := range curve {
			if s.Op == op {
				all = append(all, s)
			}
		}
		sort.Slice(all, func(i, j int) bool { return all[i].Size < all[j].Size })
		for i, s := range all {
			if opt.Holdout && i%2 == 1 && i != len(all)-1 {
				held = append(held, s)
				continue
			}
			fit = append(fit, s)
		}
		if len(fit) == 0 {
			continue
		}
		f := fitPiecewise(fit)
		cal.Fits[op] = f
		cal.Used = append(cal.Used, fit...)
		last := f.Pieces[len(f.Pieces)-1]
		if op == "write" {
			cal.Curve.WritePieces, cal.Curve.WriteRate, cal.Curve.WriteT0, cal.Curve.WriteGranule = f.Pieces, last.Rate, last.T0, Size(f.Granule)
		} else {
			cal.Curve.ReadPieces, cal.Curve.ReadRate, cal.Curve.ReadT0, cal.Curve.ReadGranule = f.Pieces, last.Rate, last.T0, Size(f.Granule)
		}
	}
	// A Strata server with several devices places the scaling runs'
	// files on different devices (and stripes them over M): those runs
	// are not n streams sharing one device, so they fit nothing and are
	// all predictions — N streams striped over M of the server's devices.
	if devs := rep.Target.Devices; rep.Target.Kind == "strata" && devs > 1 {
		// The devices share one machine: the fastest run that keeps every
		// device busy (streams × stripe width ≥ devices) measures what
		// they move together — the fastest, because on a shared machine
		// noise only ever slows a run down.
		widest := map[string]Sample{}
		for _, s := range scaling {
			if s.Streams*s.Servers < devs {
				continue
			}
			if w, ok := widest[s.Op]; !ok || s.MBps > w.MBps {
				widest[s.Op] = s
			}
		}
		if w, ok := widest["write"]; ok {
			cal.Curve.SharedWriteRate = Size(math.Round(w.MBps * 1e6))
		}
		if w, ok := widest["read"]; ok {
			cal.Curve.SharedReadRate = Size(math.Round(w.MBps * 1e6))
		}
		for _, s := range scaling {
			if w, ok := widest[s.Op]; ok && s.Source == w.Source {
				cal.Used = append(cal.Used, s)
				continue
			}
			p, err := predictStriped(&cal.Curve, s, &rep.Target, nil)
			if err != nil {
				return nil, err
			}
			cal.Checks = append(cal.Checks, check(s, p))
		}
		scaling = nil
	}
	// capacity(n): the aggregate with n streams over the aggregate with
	// one, from the scaling runs (one server: a file system)
	counts := map[int]bool{}
	var one []Sample // on one server
	for _, s := range scaling {
		if s.Servers == 1 {
			one = append(one, s)
		}
	}
	scaling = one
	for _, s := range scaling {
		counts[s.Streams] = true
	}
	var ns []int
	for n := range counts {
		ns = append(ns, n)
	}
	sort.Ints(ns)
	fitN := ns
	if opt.Holdout && len(ns) > 2 {
		fitN = []int{ns[0], ns[len(ns)-1]}
	}
	if len(fitN) > 1 && fitN[0] == 1 {
		var heldN []Sample
		for _, op := range []string{"write", "read"} {
			one := 0.0
			for _, s := range scaling {
				if s.Op == op && s.Streams == 1 {
					one = s.MBps
				}
			}
			if one == 0 {
				continue
			}
			var sc []float64
			for _, n := range fitN {
				for _, s := range scaling {
					if s.Op == op && s.Streams == n {
						sc = append(sc, round3(s.MBps/one))
						if n != 1 {
							cal.Used = append(cal.Used, s)
						}
					}
				}
			}
			if len(sc) != len(fitN) {
				continue
			}
			cal.Curve.Streams = fitN
			if op == "write" {
				cal.Curve.WriteScale = sc
			} else {
				cal.Curve.ReadScale = sc
			}
			for _, s := range scaling {
				if s.Op == op && !contains(fitN, s.Streams) {
					heldN = append(heldN, s)
				}
			}
		}
		held = append(held, heldN...)
	}
	// predict the held-out points by running the DES on the fitted device
	for _, s := range held {
		p, err := predict(&cal.Curve, s, nil)
		if err != nil {
			return nil, err
		}
		cal.Checks = append(cal.Checks, check(s, p))
	}
	if opt.Repeat {
		if err := cal.predictRepeats(rep, opt); err != nil {
			return nil, err
		}
	}
	return cal, nil
}

// predictRepeats predicts every point of the calibration report — writes,
// and reads into memory or (with a sink) into local files — as a repeat
// of that run would measure them, and sets them beside each measured
// repeat (matched by scenario and phase). Every point of a repeat is a
// prediction: the calibration saw only the first run.
func (cal *Calibration) predictRepeats(rep *bench.Report, opt *CalibrateOptions) error {
	cal.Sink = opt.Sink
	// predictions alone: a repeat into memory and, given the client's
	// disk, one into local files
	type run struct {
		rep  *bench.Report
		sink bool
	}
	var runs []run
	for _, a := range opt.Against {
		runs = append(runs, run{a, a.Target.Sink != ""})
	}
	if len(runs) == 0 {
		runs = append(runs, run{nil, false})
		if opt.Sink != nil {
			runs = append(runs, run{nil, true})
		}
	}
	curve, scaling := samples(rep)
	devs := rep.Target.Devices
	fitted := map[string]bool{}
	for _, u := range cal.Used {
		fitted[u.Source] = true
	}
	for _, rn := range runs {
		r := Repeat{}
		measured := map[string]float64{}
		if rn.sink {
			r.Sink = "(predicted)"
			if opt.Sink == nil {
				return fmt.Errorf("a run with --sink %s: give the client's disk (--sink FRAGMENT)", rn.rep.Target.Sink)
			}
		}
		if rn.rep != nil {
			r.Source, r.Runs = rn.rep.Target.Spec, max(rn.rep.Runs, 1)
			if rn.sink {
				r.Sink = rn.rep.Target.Sink
			}
			c, sc := samples(rn.rep)
			for _, s := range append(c, sc...) {
				measured[s.Source] = s.MBps
			}
		}
		for _, s := range append(curve, scaling...) {
			var cl *ClientConfig
			if r.Sink != "" && s.Op == "read" {
				cl = opt.Sink
			}
			var p float64
			var err error
			if s.Servers > 0 && rep.Target.Kind == "strata" && devs > 1 {
				p, err = predictStriped(&cal.Curve, s, &rep.Target, cl)
			} else {
				p, err = predict(&cal.Curve, s, cl)
			}
			if err != nil {
				return err
			}
			ch := Check{What: s.Source, Predicted: round3(p)}
			if m, ok := measured[s.Source]; ok && m > 0 {
				ch = check(Sample{Source: s.Source, MBps: m}, p)
			} else if rn.rep != nil {
				continue // not in the measured run
			}
			// a read into a local file is a configuration no calibration
			// run saw; anything else the fit used is a repeat of it
			ch.Fitted = cl == nil && fitted[s.Source]
			r.Checks = append(r.Checks, ch)
		}
		cal.Repeats = append(cal.Repeats, r)
	}
	return nil
}

func check(s Sample, predicted float64) Check {
	return Check{What: s.Source, Measured: round3(s.MBps), Predicted: round3(predicted), Error: math.Round((predicted-s.MBps)/s.MBps*1e4) / 1e4}
}

// CalibrateOptions: Holdout fits on part of the points and predicts the
// rest. A repeat's reads into local files, fsynced (strata bench --sink,
// strata get), are predicted with the fitted devices and the client's
// disk from its own calibration (bench/sinkcal).
type CalibrateOptions struct {
	Holdout bool
	// Repeat predicts every point again for a repeat of the run;
	// Against are such repeats, measured after the predictions were
	// made; Sink is the client's disk, for repeats run with --sink.
	Repeat  bool
	Sink    *ClientConfig
	Against []*bench.Report
}

func contains(xs []int, x int) bool {
	for _, v := range xs {
		if v == x {
			return true
		}
	}
	return false
}

// predict runs the measured configuration — n streams, one device, the
// measured request and file sizes — on the calibrated device.
func predict(cp *CurveParams, s Sample, cl *ClientConfig) (float64, error) {
	return predictOn(s, StorageConfig{Kind: "curve", Curve: cp}, cl, func(w *WorkloadConfig) { w.OneDevice = true })
}

// predictStriped runs a scaling point as Strata laid it out on the
// target's devices: N streams, each file striped over M of them in units
// of the target's stripe unit (0: each request split evenly), consecutive
// files on consecutive devices (placement balances by load). A put moves
// a striped file's stripes in parallel, so each writer keeps M requests
// in flight. strata bench reads through the client's Reader, one request
// at a time on the stripes it spans, and so do the model's readers of
// uncapped devices; on capped ones a request in flight per stripe stands
// in for the devices' token buckets, which let a reader that turns to
// the next device find it ready to burst (docs/SIMULATION.md).
func predictStriped(cp *CurveParams, s Sample, t *bench.TargetInfo, cl *ClientConfig) (float64, error) {
	devs, unit := t.Devices, t.StripeUnit
	return predictOn(s, StorageConfig{Kind: "curve", Curve: cp, PerServer: devs}, cl, func(w *WorkloadConfig) {
		w.Layout, w.Stripe, w.StripeUnit = "stripe", s.Servers, Size(unit)
		if unit > 0 && (s.Op != "read" || !t.Uncapped) {
			w.Depth = max(1, s.Servers)
		}
	})
}

// predictOn runs sample s's streams, request and file sizes on storage,
// laid out by layout, from one client (cl, when set: its local disk),
// and returns the DES's aggregate MB/s.
func predictOn(s Sample, storage StorageConfig, cl *ClientConfig, layout func(*WorkloadConfig)) (float64, error) {
	per := s.Bytes / int64(max(1, s.Streams))
	if per <= 0 {
		per = s.Size
	}
	c := &Config{Name: "predict " + s.Source, Storage: storage,
		Workload: WorkloadConfig{Op: s.Op, Streams: s.Streams, Record: Size(s.Size), File: Size(per), Depth: 1}}
	if cl != nil {
		c.Clients = *cl
	}
	layout(&c.Workload)
	if err := c.fill(); err != nil {
		return 0, err
	}
	r, err := Run(c, 1)
	if err != nil {
		return 0, err
	}
	return r.MBps, nil
}

// Summary gives the median and worst absolute relative error of the
// checks.
func (c *Calibration) Summary() (median, worst float64) { return summary(c.Checks) }

func summary(checks []Check) (median, worst float64) {
	var es []float64
	for _, ch := range checks {
		if ch.Measured == 0 || ch.Fitted {
			continue // a prediction not measured yet, a repeat of a fitted point
		}
		es = append(es, math.Abs(ch.Error))
	}
	if len(es) == 0 {
		return 0, 0
	}
	sort.Float64s(es)
	median = es[len(es)/2]
	if len(es)%2 == 0 {
		median = (es[len(es)/2-1] + es[len(es)/2]) / 2
	}
	return median, es[len(es)-1]
}

// WriteReport prints the fits and, with a holdout, the predictions.
func (c *Calibration) WriteReport(w io.Writer) error {
	fmt.Fprintf(w, "calibrated from %s on %s (%d points fitted%s)\n", c.Source, c.Target, len(c.Used), medians(c.Runs))
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "OP\tREQUESTS UP TO\tt0 (ms)\tR (MB/s)\tfit RMS error")
	for _, op := range []string{"write", "read"} {
		f := c.Fits[op]
		if f == nil {
			continue
		}
		for _, p := range f.Pieces {
			upto := "all"
			if p.Upto < math.MaxInt64 {
				upto = chart.SizeStr(int64(p.Upto))
			}
			if f.Granule > 0 {
				upto += ", each at least " + chart.SizeStr(f.Granule)
			}
			fmt.Fprintf(tw, "%s\t%s\t%.4f\t%.1f\t%.1f%%\n", op, upto, p.T0, float64(p.Rate)/1e6, f.RMS*100)
		}
	}
	if c.Curve.SharedWriteRate > 0 || c.Curve.SharedReadRate > 0 {
		fmt.Fprintf(tw, "shared by the server's devices\t\t\twrite %.1f, read %.1f\t\n", float64(c.Curve.SharedWriteRate)/1e6, float64(c.Curve.SharedReadRate)/1e6)
	}
	if len(c.Curve.Streams) > 0 {
		fmt.Fprintf(tw, "capacity(n)\tn = %v\twrite %v\tread %v\t\n", c.Curve.Streams, c.Curve.WriteScale, c.Curve.ReadScale)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	if len(c.Checks) == 0 {
		return c.writeRepeats(w)
	}
	fmt.Fprintln(w, "\npredicted (DES on the fitted device) against measured, for points not used in the fit:")
	tw = tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "MEASUREMENT\tMEASURED MB/s\tPREDICTED MB/s\tERROR")
	for _, ch := range c.Checks {
		fmt.Fprintf(tw, "%s\t%.1f\t%.1f\t%+.1f%%\n", ch.What, ch.Measured, ch.Predicted, ch.Error*100)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	med, worst := summary(c.Checks)
	if _, err := fmt.Fprintf(w, "median |error| %.1f%%, worst %.1f%%\n", med*100, worst*100); err != nil {
		return err
	}
	return c.writeRepeats(w)
}

// medians says how many runs' medians a report's rates are, if several.
func medians(runs int) string {
	if runs > 1 {
		return fmt.Sprintf(", medians of %d runs", runs)
	}
	return ""
}

// writeRepeats prints the predictions for repeats of the run, against
// their measurements when there are some.
func (c *Calibration) writeRepeats(w io.Writer) error {
	for _, r := range c.Repeats {
		into := "into memory"
		if r.Sink != "" {
			into = fmt.Sprintf("into local files, fsynced (client disk %s, page cache %s before writeback)",
				mbps(float64(c.Sink.SinkRate)), chart.SizeStr(int64(c.Sink.SinkDirty)))
			if c.Sink.SinkCopy > 0 {
				into = strings.TrimSuffix(into, ")") + fmt.Sprintf(", copied into it at %s)", mbps(float64(c.Sink.SinkCopy)))
			}
		}
		if r.Source == "" {
			fmt.Fprintf(w, "\npredicted for a repeat of the run, reads %s:\n", into)
		} else {
			fmt.Fprintf(w, "\na repeat of the run on %s%s, reads %s, against the predictions:\n", r.Source, medians(r.Runs), into)
		}
		tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
		fmt.Fprintln(tw, "MEASUREMENT\tMEASURED MB/s\tPREDICTED MB/s\tERROR")
		for _, ch := range r.Checks {
			what := ch.What
			if ch.Fitted {
				what += " (fitted)"
			}
			if r.Source == "" {
				fmt.Fprintf(tw, "%s\t-\t%.1f\t\n", what, ch.Predicted)
				continue
			}
			fmt.Fprintf(tw, "%s\t%.1f\t%.1f\t%+.1f%%\n", what, ch.Measured, ch.Predicted, ch.Error*100)
		}
		if err := tw.Flush(); err != nil {
			return err
		}
		if r.Source == "" {
			continue
		}
		med, worst := summary(r.Checks)
		n := 0
		for _, ch := range r.Checks {
			if !ch.Fitted {
				n++
			}
		}
		if _, err := fmt.Fprintf(w, "configurations the calibration did not use: %d, median |error| %.1f%%, worst %.1f%%\n", n, med*100, worst*100); err != nil {
			return err
		}
	}
	return nil
}

// WriteTOML writes the fitted device as a study fragment.
func (c *Calibration) WriteTOML(w io.Writer) error {
	fmt.Fprintf(w, "# fitted by strata sim calibrate from %s on %s\n[storage]\nkind = \"curve\"\n\n[storage.curve]\n", c.Source, c.Target)
	cp := c.Curve
	fmt.Fprintf(w, "write_rate = %d\nwrite_t0_ms = %g\nread_rate = %d\nread_t0_ms = %g\n", int64(cp.WriteRate), cp.WriteT0, int64(cp.ReadRate), cp.ReadT0)
	if cp.WriteGranule > 0 {
		fmt.Fprintf(w, "write_granule = %d\n", int64(cp.WriteGranule))
	}
	if cp.ReadGranule > 0 {
		fmt.Fprintf(w, "read_granule = %d\n", int64(cp.ReadGranule))
	}
	if cp.SharedWriteRate > 0 {
		fmt.Fprintf(w, "shared_write_rate = %d\n", int64(cp.SharedWriteRate))
	}
	if cp.SharedReadRate > 0 {
		fmt.Fprintf(w, "shared_read_rate = %d\n", int64(cp.SharedReadRate))
	}
	if len(cp.Streams) > 0 {
		fmt.Fprintf(w, "streams = %s\n", ints(cp.Streams))
		if cp.WriteScale != nil {
			fmt.Fprintf(w, "write_scale = %s\n", fl64s(cp.WriteScale))
		}
		if cp.ReadScale != nil {
			fmt.Fprintf(w, "read_scale = %s\n", fl64s(cp.ReadScale))
		}
	}
	for _, x := range []struct {
		name   string
		pieces []Piece
	}{{"write_pieces", cp.WritePieces}, {"read_pieces", cp.ReadPieces}} {
		if len(x.pieces) < 2 {
			continue
		}
		for _, p := range x.pieces {
			upto := int64(p.Upto)
			if upto == math.MaxInt64 {
				upto = 1 << 62
			}
			if _, err := fmt.Fprintf(w, "\n[[storage.curve.%s]]\nupto = %d\nt0_ms = %g\nrate = %d\n", x.name, upto, p.T0, int64(p.Rate)); err != nil {
				return err
			}
		}
	}
	return nil
}

func ints(v []int) string {
	var s []string
	for _, x := range v {
		s = append(s, strconv.Itoa(x))
	}
	return "[" + strings.Join(s, ", ") + "]"
}

func fl64s(v []float64) string {
	var s []string
	for _, x := range v {
		s = append(s, strconv.FormatFloat(x, 'g', -1, 64))
	}
	return "[" + strings.Join(s, ", ") + "]"
}
