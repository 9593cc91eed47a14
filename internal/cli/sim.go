package cli

import (
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"golang.org/x/term"

	"github.com/strata-storage/strata/internal/bench"
	"github.com/strata-storage/strata/internal/sim"
)

func (e *env) simCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "sim",
		Short: "Model a storage system: analytic bound, discrete-event runs, sweeps, calibration",
		Long: `Model a storage system described by a study file (TOML; see examples/sim/):

  strata sim bound STUDY         the analytic bound S = min(N/c, N·I, M·I, P·R, …) and its binding term
  strata sim run STUDY           a discrete-event run (deterministic for a seed): disk
                                 and array streams, tape recalls through Strata's
                                 scheduler, migration
  strata sim sweep STUDY         every point of the study's [sweep], in parallel
  strata sim calibrate BENCH     fit device curves from strata bench JSON
  strata sim calibrate-catalog MDRATES...
                                 fit the catalog server from strata bench md-rates`,
	}
	cmd.AddCommand(e.simBoundCmd(), e.simRunCmd(), e.simSweepCmd(), e.simCalibrateCmd(), e.simCalibrateCatalogCmd())
	return cmd
}

func (e *env) simBoundCmd() *cobra.Command {
	var jsonPath string
	var sets []string
	cmd := &cobra.Command{
		Use:   "bound STUDY",
		Short: "Analytic bound of a study and the term that binds it",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			st, err := loadStudy(args[0], sets)
			if err != nil {
				return err
			}
			c := st.Config
			b := sim.Bound(c)
			if err := writeJSONFile(jsonPath, b); err != nil {
				return err
			}
			return sim.WriteBound(e.stdout, c.Name, b)
		},
	}
	cmd.Flags().StringVar(&jsonPath, "json", "", "write the bound as JSON to this file")
	setFlag(cmd, &sets)
	return cmd
}

func (e *env) simRunCmd() *cobra.Command {
	var jsonPath string
	var seed uint64
	var sets []string
	cmd := &cobra.Command{
		Use:   "run STUDY",
		Short: "Discrete-event run of a study",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			st, err := loadStudy(args[0], sets)
			if err != nil {
				return err
			}
			c := st.Config
			t0 := time.Now()
			r, err := sim.Run(c, seed)
			if err != nil {
				return err
			}
			r.WallSeconds = time.Since(t0).Seconds()
			if err := writeJSONFile(jsonPath, r); err != nil {
				return err
			}
			if err := sim.WriteResult(e.stdout, r); err != nil {
				return err
			}
			_, err = fmt.Fprintf(e.stdout, "simulated in %.3f s (%.2f M events/s)\n", r.WallSeconds, float64(r.Events)/r.WallSeconds/1e6)
			return err
		},
	}
	cmd.Flags().StringVar(&jsonPath, "json", "", "write the result as JSON to this file")
	setFlag(cmd, &sets)
	cmd.Flags().Uint64Var(&seed, "seed", 1, "random seed (the same seed gives the same run)")
	return cmd
}

func (e *env) simSweepCmd() *cobra.Command {
	var jsonPath, csvPath, svgPath string
	var seed uint64
	var workers int
	var sets []string
	cmd := &cobra.Command{
		Use:   "sweep STUDY",
		Short: "Run every point of a study's [sweep] in parallel",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			st, err := loadStudy(args[0], sets)
			if err != nil {
				return err
			}
			if len(st.Sweep) == 0 {
				return fmt.Errorf("sim sweep: %s has no [sweep] table", args[0])
			}
			var progress func(done, total int)
			if f, ok := e.stderr.(*os.File); ok && term.IsTerminal(int(f.Fd())) {
				progress = func(done, total int) { fmt.Fprintf(e.stderr, "\r%d/%d points", done, total) }
			}
			r := st.RunSweep(seed, workers, progress)
			if progress != nil {
				fmt.Fprintln(e.stderr)
			}
			if err := writeJSONFile(jsonPath, r); err != nil {
				return err
			}
			if csvPath != "" {
				if err := bench.WriteFile(csvPath, func(w io.Writer) error { return sim.WriteSweepCSV(w, r) }); err != nil {
					return err
				}
			}
			if svgPath != "" {
				c, err := st.SweepChart(r, "")
				if err != nil {
					return err
				}
				if err := bench.WriteFile(svgPath, func(w io.Writer) error { _, err := io.WriteString(w, string(c.SVG)); return err }); err != nil {
					return err
				}
			}
			if err := sim.WriteSweepTable(e.stdout, r); err != nil {
				return err
			}
			if n := r.Failed(); n > 0 {
				return fmt.Errorf("sim sweep: %d of %d points failed", n, len(r.Points))
			}
			return nil
		},
	}
	cmd.Flags().StringVar(&jsonPath, "json", "", "write the sweep as JSON to this file")
	cmd.Flags().StringVar(&csvPath, "csv", "", "write one CSV row per point to this file")
	cmd.Flags().StringVar(&svgPath, "svg", "", "draw MB/s against the [plot] x key to this SVG file")
	cmd.Flags().Uint64Var(&seed, "seed", 1, "random seed for every point")
	cmd.Flags().IntVar(&workers, "workers", 0, "points run at once (default: one per CPU)")
	setFlag(cmd, &sets)
	return cmd
}

func (e *env) simCalibrateCmd() *cobra.Command {
	var out, sinkPath string
	var against []string
	var predict []int
	var holdout, repeat bool
	cmd := &cobra.Command{
		Use:   "calibrate BENCH.json...",
		Short: "Fit t(s) = t0 + s/R (piecewise) and capacity(n) from strata bench JSON",
		Long: `Fit t(s) = t0 + s/R (piecewise) per operation from strata bench's
cemss-char, and capacity(n) (or, against a Strata server with several
devices, the rate they share) from its scaling runs. Several reports of
the same run (each on a fresh server, taken in turns) count by each
phase's median rate, as do several --against reports of one kind of
repeat (reads into memory; reads into local files with --sink).`,
		Args: minArgs(1, "sim calibrate BENCH.json..."),
		RunE: func(cmd *cobra.Command, args []string) error {
			reps, err := readReports(args, "sim calibrate: ")
			if err != nil {
				return err
			}
			rep, err := bench.Median(reps)
			if err != nil {
				return fmt.Errorf("sim calibrate: %w", err)
			}
			opt := &sim.CalibrateOptions{Holdout: holdout, Repeat: repeat || sinkPath != "" || len(against) > 0}
			if sinkPath != "" {
				if opt.Sink, err = readSink(sinkPath); err != nil {
					return fmt.Errorf("sim calibrate: --sink %s: %w", sinkPath, err)
				}
			}
			// repeats of one kind (where their reads went) count by
			// their medians, in the order each kind first appears
			var kinds []string
			byKind := map[string][]*bench.Report{}
			for _, a := range against {
				r, err := readReport(a)
				if err != nil {
					return fmt.Errorf("sim calibrate: --against %s: %w", a, err)
				}
				if _, ok := byKind[r.Target.Sink]; !ok {
					kinds = append(kinds, r.Target.Sink)
				}
				byKind[r.Target.Sink] = append(byKind[r.Target.Sink], r)
			}
			for _, k := range kinds {
				r, err := bench.Median(byKind[k])
				if err != nil {
					return fmt.Errorf("sim calibrate: --against: %w", err)
				}
				opt.Against = append(opt.Against, r)
			}
			cal, err := sim.Calibrate(rep, opt)
			if err != nil {
				return fmt.Errorf("sim calibrate: %s: %w", args[0], err)
			}
			if out != "" {
				if err := bench.WriteFile(out, cal.WriteTOML); err != nil {
					return err
				}
			}
			return cal.WriteReport(e.stdout)
		},
	}
	cmd.Flags().StringVar(&out, "out", "", "write the fitted [storage.curve] as a TOML study fragment to this file")
	cmd.Flags().BoolVar(&holdout, "holdout", false, "fit on every other I/O size and the extreme stream counts; predict the rest with the DES and report the error")
	cmd.Flags().BoolVar(&repeat, "repeat", false, "predict every point for a repeat of the run (reads into memory, and with --sink into local files)")
	cmd.Flags().StringVar(&sinkPath, "sink", "", "a study fragment with the client's [clients] sink_rate and sink_dirty (bench/sinkcal prints one), for repeats whose reads went into local files (strata bench --sink)")
	cmd.Flags().IntSliceVar(&predict, "predict", nil, "predict creates, removes and stats a second at these worker counts (1,2,4,…)")
	cmd.Flags().StringArrayVar(&against, "against", nil, "strata bench JSON of a repeat of the run, measured after the predictions (repeatable): print its measurements beside them")
	return cmd
}

func (e *env) simCalibrateCatalogCmd() *cobra.Command {
	var out string
	var against []string
	var predict []int
	cmd := &cobra.Command{
		Use:   "calibrate-catalog MDRATES.json...",
		Short: "Fit the catalog server's terms from strata bench md-rates at 1, 2–8 and 32+ workers",
		Long: `Fit the catalog server's terms from strata bench md-rates reports against a
Strata server, at 1 worker, at 2 to 8 and at 32 or more (strata bench run
md-rates --workers N --json FILE). Several reports at one worker count,
best run in turns with the other counts, count by their medians: rates
drift by several per cent between runs minutes apart. With --against, the
fitted study predicts the worker counts of md-rates reports measured after
it (medians where a count was run more than once) and prints each beside
its measurement; --predict prints predictions for worker counts not yet
measured (to be committed before measuring).`,
		Args: minArgs(3, "sim calibrate-catalog MDRATES.json..."),
		RunE: func(cmd *cobra.Command, args []string) error {
			reps, err := readReports(args, "sim calibrate-catalog: ")
			if err != nil {
				return err
			}
			fit, err := sim.CalibrateCatalog(reps)
			if err != nil {
				return fmt.Errorf("sim calibrate-catalog: %w", err)
			}
			if out != "" {
				if err := bench.WriteFile(out, fit.WriteTOML); err != nil {
					return err
				}
			}
			if err := fit.WriteReport(e.stdout); err != nil {
				return err
			}
			if len(predict) > 0 {
				as, err := fit.PredictWorkers(predict)
				if err != nil {
					return fmt.Errorf("sim calibrate-catalog: --predict: %w", err)
				}
				if err := fit.WritePredicted(e.stdout, as); err != nil {
					return err
				}
			}
			if len(against) == 0 {
				return nil
			}
			measured, err := readReports(against, "sim calibrate-catalog: --against ")
			if err != nil {
				return err
			}
			as, err := fit.Predict(measured)
			if err != nil {
				return fmt.Errorf("sim calibrate-catalog: --against: %w", err)
			}
			return fit.WriteAgainst(e.stdout, as)
		},
	}
	cmd.Flags().StringVar(&out, "out", "", "write the fit as a metadata study (creates against 1 to 64 clients) to this file")
	cmd.Flags().IntSliceVar(&predict, "predict", nil, "predict creates, removes and stats a second at these worker counts (1,2,4,…)")
	cmd.Flags().StringArrayVar(&against, "against", nil, "strata bench md-rates JSON measured after the fit (repeatable): print the fit's predictions beside it")
	return cmd
}

// readReports reads calibrate-catalog's strata bench reports; what names
// where they came from in an error ("--against ").
func readReports(paths []string, what string) ([]*bench.Report, error) {
	var reps []*bench.Report
	for _, a := range paths {
		r, err := readReport(a)
		if err != nil {
			return nil, fmt.Errorf("%s%s: %w", what, a, err)
		}
		reps = append(reps, r)
	}
	return reps, nil
}

// readSink reads the client's local-disk terms from a study fragment.
func readSink(path string) (*sim.ClientConfig, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	c, err := sim.Parse(b)
	if err != nil {
		return nil, err
	}
	if c.Clients.SinkRate <= 0 {
		return nil, fmt.Errorf("no [clients] sink_rate")
	}
	return &c.Clients, nil
}

func readReport(path string) (*bench.Report, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return bench.ReadJSON(f)
}

func writeJSONFile(path string, v any) error {
	if path == "" {
		return nil
	}
	return bench.WriteFile(path, func(w io.Writer) error { return sim.WriteJSON(w, v) })
}

func setFlag(cmd *cobra.Command, sets *[]string) {
	cmd.Flags().StringArrayVar(sets, "set", nil, "override a study parameter, e.g. --set workload.op=read (repeatable; takes the key out of a sweep)")
}

// loadStudy reads a study and applies --set overrides.
func loadStudy(path string, sets []string) (*sim.Study, error) {
	st, err := sim.LoadStudy(path)
	if err != nil {
		return nil, err
	}
	m := map[string]string{}
	for _, kv := range sets {
		k, v, ok := strings.Cut(kv, "=")
		if !ok || k == "" {
			return nil, fmt.Errorf("--set %q: want key=value, e.g. workload.op=read", kv)
		}
		m[k] = v
	}
	return st.Override(m)
}
