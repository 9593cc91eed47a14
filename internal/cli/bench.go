package cli

import (
	"bufio"
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"strings"
	"syscall"
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
	cmd.AddCommand(e.benchListCmd(), e.benchRunCmd(), e.benchWorkerCmd())
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
	var jsonPath, csvPath, htmlPath, chartDir, deadline, hosts string
	procs := 1
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
			if procs < 1 {
				return fmt.Errorf("bench run: --procs %d: want 1 or more", procs)
			}
			if hosts != "" {
				for _, h := range strings.Split(hosts, ",") {
					if _, _, err := net.SplitHostPort(h); err != nil {
						return fmt.Errorf("bench run: --hosts %q: want HOST:PORT,… of `strata bench worker` processes", h)
					}
					cfg.Peers = append(cfg.Peers, h)
				}
			}
			if procs > 1 {
				local, err := spawnWorkers(cmd.Context(), procs-1, &cfg)
				if err != nil {
					return fmt.Errorf("bench run: %w", err)
				}
				defer local.stop()
			}
			rep, runErr := bench.Execute(cmd.Context(), cfg, scenarios)
			if rep == nil {
				return fmt.Errorf("bench run: %w", runErr)
			}
			// A run cut short (a lost worker process) still writes what it
			// measured, then fails.
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
			if runErr != nil {
				return fmt.Errorf("bench run: %w", runErr)
			}
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
	f.StringVar(&cfg.Sink, "sink", "", "write every read to a file in this local directory and fsync it at the end, as strata get does (default: reads go to memory)")
	f.IntVar(&cfg.ScalingMax, "scaling-max", 0, "scaling: up to this many clients and servers (default: the scale's: tiny 2, small 4, medium 8, large 16)")
	f.StringVar(&deadline, "deadline", "", "stonewall deadline for streaming and random phases (default: the scale's)")
	f.StringVar(&jsonPath, "json", "", "write the report as JSON to this file")
	f.StringVar(&csvPath, "csv", "", "write one CSV row per phase to this file")
	f.StringVar(&htmlPath, "html", "", "write an HTML report with SVG charts to this file")
	f.StringVar(&chartDir, "charts", "", "also write each chart as an SVG file in this directory")
	f.IntVar(&procs, "procs", 1, "run the workers in this many processes on this host (this one leads)")
	f.StringVar(&hosts, "hosts", "", "HOST:PORT,… of `strata bench worker` processes that run a share of the workers")
	f.StringVar(&cfg.Key, "key", os.Getenv("STRATA_BENCH_KEY"), "secret the worker processes were started with (default $STRATA_BENCH_KEY)")
	return cmd
}

func (e *env) benchWorkerCmd() *cobra.Command {
	var listen, key string
	var once bool
	cmd := &cobra.Command{
		Use:   "worker --listen HOST:PORT",
		Short: "Run a share of the workers of runs led by `strata bench run --hosts`",
		Long: `Serve as a worker process of multi-host runs: a leader started with
--hosts HOST:PORT connects, sends the run, and this process runs its block
of every phase's workers against the same target (which must name the same
storage here: a shared file system path or a Strata server). The first
line on stdout is the address it listens on.

The worker runs whatever target its leader names: listen where only the
leader can reach it, and give both a --key (or STRATA_BENCH_KEY).`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			ln, err := net.Listen("tcp", listen)
			if err != nil {
				return fmt.Errorf("bench worker: %w", err)
			}
			fmt.Fprintf(e.stdout, "strata bench worker: listening on %s\n", ln.Addr())
			return bench.Serve(cmd.Context(), ln, key, api.Version, once, e.stderr)
		},
	}
	f := cmd.Flags()
	f.StringVar(&listen, "listen", "127.0.0.1:7430", "address to listen on")
	f.StringVar(&key, "key", os.Getenv("STRATA_BENCH_KEY"), "secret a leader must present (default $STRATA_BENCH_KEY)")
	f.BoolVar(&once, "once", false, "exit after one run")
	return cmd
}

// localWorkers are worker processes this run started.
type localWorkers struct {
	cmds []*exec.Cmd
	logs []*bytes.Buffer
}

// spawnWorkers starts n `strata bench worker` processes on 127.0.0.1 with
// a fresh key and adds them to cfg's peers.
func spawnWorkers(ctx context.Context, n int, cfg *bench.Config) (*localWorkers, error) {
	exe, err := os.Executable()
	if err != nil {
		return nil, fmt.Errorf("--procs: find this program: %w", err)
	}
	if cfg.Key == "" {
		b := make([]byte, 16)
		rand.Read(b)
		cfg.Key = hex.EncodeToString(b)
	}
	lw := &localWorkers{}
	for range n {
		c := exec.CommandContext(ctx, exe, "bench", "worker", "--listen", "127.0.0.1:0", "--once")
		c.Env = append(os.Environ(), "STRATA_BENCH_KEY="+cfg.Key) // not on the command line, where ps shows it
		c.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
		var log bytes.Buffer
		c.Stderr = &log
		out, err := c.StdoutPipe()
		if err != nil {
			lw.stop()
			return nil, err
		}
		if err := c.Start(); err != nil {
			lw.stop()
			return nil, fmt.Errorf("--procs: start a worker process: %w", err)
		}
		lw.cmds, lw.logs = append(lw.cmds, c), append(lw.logs, &log)
		line, err := bufio.NewReader(out).ReadString('\n')
		addr, ok := strings.CutPrefix(strings.TrimSpace(line), "strata bench worker: listening on ")
		if err != nil || !ok {
			lw.stop()
			return nil, fmt.Errorf("--procs: worker process did not start: %s", strings.TrimSpace(line+" "+log.String()))
		}
		cfg.Peers = append(cfg.Peers, addr)
	}
	return lw, nil
}

// stop waits for the workers, which end with the leader's connection.
func (lw *localWorkers) stop() {
	for _, c := range lw.cmds {
		done := make(chan struct{})
		go func() { c.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(5 * time.Second):
			c.Process.Kill()
			<-done
		}
	}
}
