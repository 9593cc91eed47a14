package cli

import (
	"fmt"
	"io"
	"os"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"
	"golang.org/x/term"

	"github.com/strata-storage/strata/internal/api"
	"github.com/strata-storage/strata/internal/bench"
)

func (e *env) benchCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "bench",
		Short: "Measure a file system or a Strata server: HPCS scenarios, storage characteristics, scaling",
	}
	cmd.AddCommand(e.benchListCmd(), e.benchRunCmd())
	return cmd
}

func (e *env) benchListCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "list",
		Short: "Name every scenario",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			tw := tabwriter.NewWriter(e.stdout, 0, 0, 2, ' ', 0)
			fmt.Fprintln(tw, "SCENARIO\tWHAT\tSAME AS")
			for _, s := range bench.Scenarios() {
				fmt.Fprintf(tw, "%s\t%s\t%s\n", s.Name, s.Title, s.Pattern)
			}
			return tw.Flush()
		},
	}
}

func (e *env) benchRunCmd() *cobra.Command {
	var cfg bench.Config
	var jsonPath, csvPath, htmlPath, chartDir, deadline string
	cmd := &cobra.Command{
		Use:   "run SCENARIO... --target TARGET",
		Short: "Run scenarios (or all) against posix:PATH or strata://HOST:PORT",
		Long: `Run scenarios against a target:

  posix:PATH            any mounted file system (a directory on it)
  strata://HOST:PORT    a Strata server through the native client
                        (add ?cos=CLASS for a class of service)

Workers start together after a barrier; bandwidth is bytes over the time
from the barrier to the last worker's end, and "first done" figures are
what all workers had done when the first one finished. Writes are durable
inside the timed region; caches are dropped before reads (root) or the
files are fadvised out. The table goes to stdout; --json, --csv and --html
write the report to files. The exit code is non-zero when a phase fails or
data does not verify.`,
		Args: cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if cfg.Target == "" {
				return fmt.Errorf("bench run: --target is required (posix:PATH or strata://HOST:PORT)")
			}
			if deadline != "" {
				d, err := time.ParseDuration(deadline)
				if err != nil || d <= 0 {
					return fmt.Errorf("bench run: --deadline %q: want a duration such as 5s", deadline)
				}
				cfg.Deadline = d
			}
			scenarios, err := bench.Lookup(args)
			if err != nil {
				return fmt.Errorf("bench run: %w", err)
			}
			cfg.Version = api.Version
			if f, ok := e.stderr.(*os.File); ok && term.IsTerminal(int(f.Fd())) {
				cfg.Progress = e.stderr
			}
			rep, err := bench.Execute(cmd.Context(), cfg, scenarios)
			if err != nil {
				return fmt.Errorf("bench run: %w", err)
			}
			for _, out := range []struct {
				path  string
				write func(io.Writer) error
			}{{jsonPath, rep.WriteJSON}, {csvPath, rep.WriteCSV}, {htmlPath, rep.WriteHTML}} {
				if out.path != "" {
					if err := bench.WriteFile(out.path, out.write); err != nil {
						return fmt.Errorf("bench run: write %s: %w", out.path, err)
					}
				}
			}
			if chartDir != "" {
				if err := os.MkdirAll(chartDir, 0o755); err != nil {
					return fmt.Errorf("bench run: %w", err)
				}
				if _, err := rep.WriteCharts(chartDir); err != nil {
					return fmt.Errorf("bench run: charts: %w", err)
				}
			}
			rep.WriteTable(e.stdout)
			if cmd.Context().Err() != nil {
				return cmd.Context().Err()
			}
			if rep.Failures > 0 {
				var names []string
				for _, r := range rep.Results {
					for _, ph := range r.Phases {
						if ph.Failed() {
							names = append(names, r.Scenario+"/"+ph.Name)
						}
					}
					if r.Error != "" {
						names = append(names, r.Scenario)
					}
				}
				return fmt.Errorf("bench run: %d scenarios failed: %s", rep.Failures, strings.Join(names, ", "))
			}
			return nil
		},
	}
	f := cmd.Flags()
	f.StringVar(&cfg.Target, "target", "", "posix:PATH or strata://HOST:PORT")
	f.StringVar(&cfg.Scale, "scale", "small", "tiny (smoke test), small, medium or large")
	f.IntVar(&cfg.Workers, "workers", 0, "parallel workers for multi-stream scenarios (default: CPUs)")
	f.StringVar(&cfg.Verify, "verify", "inline", "data check: off, inline (timed, in the read) or after (untimed re-read)")
	f.BoolVar(&cfg.Direct, "direct", false, "posix: O_DIRECT")
	f.StringVar(&deadline, "deadline", "", "stonewall deadline for streaming and random phases (default: the scale's)")
	f.StringVar(&jsonPath, "json", "", "write the report as JSON to this file")
	f.StringVar(&csvPath, "csv", "", "write one CSV row per phase to this file")
	f.StringVar(&htmlPath, "html", "", "write an HTML report with SVG charts to this file")
	f.StringVar(&chartDir, "charts", "", "also write each chart as an SVG file in this directory")
	return cmd
}
