// Package bench is `strata bench`: the HPCS I/O scenarios, the classic
// storage characteristics (CeMSS's throughput against I/O size, an IOzone
// matrix, HPSS-style metadata rates) and client × server scaling runs,
// against any mounted file system or a Strata server through one Target
// interface, timed the way IOR and mdtest time (barriers, first and last
// done, stonewall with wear-out, durability inside the timed region) and
// reported as a table, one JSON document, CSV and an HTML page with SVG
// charts.
//
// It owns the measurement: what a phase is, how its time is taken, what
// the report says. Scenarios are plain functions over a Run; the data
// they write is a fixed pseudo-random pattern shifted per file, so a
// reader can check every byte without storing what was written.
package bench

import (
	"context"
	"fmt"
	"io"
	"os"
	"path"
	"runtime"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// Report is one run of `strata bench run`: what ran, where, and every
// result. It is the JSON document the run writes.
type Report struct {
	Tool    string     `json:"tool"`
	Version string     `json:"version"`
	Started time.Time  `json:"started"`
	Seconds float64    `json:"seconds"`
	Env     Env        `json:"environment"`
	Target  TargetInfo `json:"target"`
	Scale   string     `json:"scale"`
	Workers int        `json:"workers"`
	Verify  string     `json:"verify"` // off, inline (timed, in the read phase), after (untimed re-read)
	// Procs is the number of processes the workers ran in (--procs,
	// --hosts); Peers, the environment of each process but the leader's.
	Procs    int      `json:"procs"`
	Peers    []Env    `json:"peer_processes,omitempty"`
	Results  []Result `json:"results"`
	Failures int      `json:"failures"`
	// Runs, when above one, is how many runs' medians the rates are
	// (Median).
	Runs int `json:"runs,omitempty"`
}

// Result is one scenario's outcome.
type Result struct {
	Scenario string            `json:"scenario"`
	Title    string            `json:"title"`
	Pattern  string            `json:"pattern"`           // in IOR/mdtest/fio terms
	Params   map[string]string `json:"params"`            // what was run
	Phases   []Phase           `json:"phases"`            // in order
	Notes    []string          `json:"notes,omitempty"`   // caveats that change the numbers
	Skipped  string            `json:"skipped,omitempty"` // why the scenario did not run here
	Error    string            `json:"error,omitempty"`
	Bound    []BoundCheck      `json:"bound,omitempty"` // scaling: measured against S = min(N·I, M·I, P·R)
}

// PhaseCPU is a phase's CPU an operation, µs, user and system: the
// client's (every worker process) and the server's (a Strata core's, from
// its /metrics).
type PhaseCPU struct {
	Client float64  `json:"client"`
	Server *float64 `json:"server,omitempty"`
}

// PhaseGroups is a Strata core's catalog group commits during a phase:
// how many, the operations one held and its time, BEGIN to the end of its
// durable COMMIT (how far the writer's syncs were shared).
type PhaseGroups struct {
	Groups      int64   `json:"groups"`
	OpsPerGroup float64 `json:"ops_per_group"`
	USPerGroup  float64 `json:"us_per_group"`
}

// Phase is one timed step.
type Phase struct {
	Name   string            `json:"name"`
	Labels map[string]string `json:"labels,omitempty"` // sweep coordinates (io_size, file_size, clients …)
	// X and Series place the phase on a chart: X is the swept value,
	// Series the curve it belongs to.
	X       float64 `json:"x,omitempty"`
	Series  string  `json:"series,omitempty"`
	Workers int     `json:"workers"`
	Ops     int64   `json:"ops"`
	Bytes   int64   `json:"bytes"`
	// Seconds is barrier to last done; FirstDone, barrier to the first
	// worker's end (the stonewall), with what all had done by then.
	Seconds            float64   `json:"seconds"`
	MiBps              float64   `json:"mib_per_s"`
	OpsPerSec          float64   `json:"ops_per_s"`
	FirstDone          float64   `json:"first_done_seconds"`
	OpsFirstDone       int64     `json:"ops_first_done"`
	BytesFirstDone     int64     `json:"bytes_first_done"`
	MiBpsFirstDone     float64   `json:"mib_per_s_first_done"`
	OpsPerSecFirstDone float64   `json:"ops_per_s_first_done"`
	Deadline           float64   `json:"deadline_seconds,omitempty"`
	StonewallHit       bool      `json:"stonewall_hit,omitempty"`
	Repeats            []float64 `json:"repeats_ops_per_s,omitempty"` // metadata: each repetition's rate, ascending
	Latency            Latency   `json:"latency"`
	Durability         string    `json:"durability,omitempty"` // writes: what made them durable inside the timing
	Cache              string    `json:"cache,omitempty"`      // reads: what was done to caches before
	Verify             string    `json:"verify,omitempty"`     // reads: how data was checked
	VerifyErrors       int64     `json:"verify_errors,omitempty"`
	// CPU is what the phase cost an operation in CPU: its worker
	// processes' own and, on a strata:// target, the core's process
	// (with its embedded mover). Absent where not measured.
	CPU *PhaseCPU `json:"cpu_us_per_op,omitempty"`
	// Groups is what a Strata core's catalog writer committed during the
	// phase, its own or another's (a phase of reads has none).
	Groups  *PhaseGroups `json:"catalog_groups,omitempty"`
	Skipped string       `json:"skipped,omitempty"`
	Error   string       `json:"error,omitempty"`
	steps   []int64      // where each worker's loop ended: what a read replays
}

// Failed says whether the phase failed or its data did not verify.
func (ph *Phase) Failed() bool { return ph.Error != "" || ph.VerifyErrors > 0 }

// Scale sizes a run. Every scenario derives its amounts from it, so one
// flag takes the suite from seconds on a laptop to hours on a cluster.
type Scale struct {
	Name       string
	StreamSize int64         // capture streams: bytes per stream
	Block      int64         // large transfers
	MemFrac    float64       // checkpoints: fraction of memory a node dumps (scenario 5: ×1, 6: ×½)
	Files      int           // metadata: files per worker
	Tree       [3]int        // walks: depth, fan-out, files per directory
	RandSize   int64         // random I/O: bytes per file
	SweepSize  int64         // characteristic: file size per point (at least 2 records)
	MaxIO      int64         // characteristic: largest I/O size (CeMSS: 160 MiB)
	UserFile   int64         // CeMSS user pattern: file size
	IOzoneMax  int64         // largest IOzone file
	Deadline   time.Duration // stonewall for streaming and random phases
	Reps       int           // metadata repetitions
	ScalingMax int           // clients and servers up to this
}

// Scales are the named sizes. "small" runs the suite in minutes on a
// 2-core machine; "large" uses half the memory per checkpoint, as the HPCS
// document does.
var Scales = map[string]Scale{
	// tiny is for smoke tests: every scenario in a second or two.
	"tiny": {Name: "tiny", StreamSize: 16 << 20, Block: 1 << 20, MemFrac: 0.0005, Files: 50, Tree: [3]int{2, 3, 4},
		RandSize: 4 << 20, SweepSize: 4 << 20, MaxIO: 1 << 20, UserFile: 8 << 20, IOzoneMax: 4 << 20, Deadline: 500 * time.Millisecond, Reps: 2, ScalingMax: 2},
	"small": {Name: "small", StreamSize: 512 << 20, Block: 4 << 20, MemFrac: 0.01, Files: 2000, Tree: [3]int{3, 6, 12},
		RandSize: 64 << 20, SweepSize: 256 << 20, MaxIO: 160 << 20, UserFile: 256 << 20, IOzoneMax: 64 << 20, Deadline: 3 * time.Second, Reps: 3, ScalingMax: 4},
	"medium": {Name: "medium", StreamSize: 4 << 30, Block: 4 << 20, MemFrac: 0.1, Files: 20000, Tree: [3]int{4, 8, 20},
		RandSize: 1 << 30, SweepSize: 1 << 30, MaxIO: 160 << 20, UserFile: 2 << 30, IOzoneMax: 512 << 20, Deadline: 20 * time.Second, Reps: 3, ScalingMax: 8},
	"large": {Name: "large", StreamSize: 32 << 30, Block: 16 << 20, MemFrac: 0.5, Files: 200000, Tree: [3]int{5, 10, 40},
		RandSize: 8 << 30, SweepSize: 8 << 30, MaxIO: 160 << 20, UserFile: 2 << 30, IOzoneMax: 4 << 30, Deadline: 120 * time.Second, Reps: 5, ScalingMax: 16},
}

// Config is what `strata bench run` asks for.
type Config struct {
	Target  string
	Scale   string
	Workers int    // parallel streams per scenario that runs several (0: number of CPUs)
	Verify  string // off, inline, after
	Direct  bool
	// Sink is a local directory reads are written to and fsynced in, as
	// `strata get` writes a file (""): reads go to memory only).
	Sink     string
	Deadline time.Duration // overrides the scale's
	// ScalingMax overrides the scale's largest client and server count
	// in the scaling scenario.
	ScalingMax int
	Version    string
	Progress   io.Writer `json:"-"` // live progress (a terminal), or nil
	// Peers are `strata bench worker` processes (HOST:PORT) that run
	// their share of every phase's workers; Key is the secret they were
	// started with.
	Peers []string `json:"-"`
	Key   string   `json:"-"`
}

// Run is the state a scenario works with.
type Run struct {
	ctx     context.Context
	T       Target
	S       Scale
	Workers int
	Verify  string
	root    string // this run's directory on the target
	env     Env
	info    TargetInfo
	pat     *pattern
	out     io.Writer
	mu      sync.Mutex
	lastMsg string
	cur     *Result
	dist    *dist       // multi-process runs
	step    int         // exchanges so far in the current scenario
	inPhase atomic.Bool // workers are running (followers gate set-up on it)
}

// Scenario is one workload of the suite.
type Scenario struct {
	Name    string
	Title   string
	Pattern string // the IOR/mdtest/fio equivalent
	Run     func(r *Run, res *Result) error
}

var registry []Scenario

func register(s Scenario) { registry = append(registry, s) }

// Scenarios lists every scenario in suite order.
func Scenarios() []Scenario {
	out := append([]Scenario(nil), registry...)
	return out
}

// Lookup finds scenarios by name; "all" is the whole suite.
func Lookup(names []string) ([]Scenario, error) {
	var out []Scenario
	for _, n := range names {
		if n == "all" {
			out = append(out, registry...)
			continue
		}
		found := false
		for _, s := range registry {
			if s.Name == n {
				out = append(out, s)
				found = true
			}
		}
		if !found {
			return nil, fmt.Errorf("no scenario %q (strata bench list names them)", n)
		}
	}
	return out, nil
}

// Execute runs the scenarios against the configured target and returns
// the report; it fails only when the run could not start.
func Execute(ctx context.Context, cfg Config, scenarios []Scenario) (*Report, error) {
	sc, err := cfg.normalise()
	if err != nil {
		return nil, err
	}
	t, err := OpenTarget(ctx, cfg.Target, Options{Direct: cfg.Direct, Sink: cfg.Sink})
	if err != nil {
		return nil, err
	}
	defer t.Close()
	if len(cfg.Peers) == 0 {
		return execute(ctx, cfg, sc, t, scenarios)
	}
	ctx, fail := context.WithCancelCause(ctx)
	defer fail(nil)
	d, err := lead(ctx, fail, cfg, scenarios)
	if err != nil {
		return nil, err
	}
	defer d.close()
	return executeWith(ctx, cfg, sc, t, scenarios, d)
}

// normalise fills defaults and checks the configuration.
func (cfg *Config) normalise() (Scale, error) {
	sc, ok := Scales[cfg.Scale]
	if !ok {
		return sc, fmt.Errorf("scale %q: want tiny, small, medium or large", cfg.Scale)
	}
	if cfg.Deadline > 0 {
		sc.Deadline = cfg.Deadline
	}
	switch {
	case cfg.ScalingMax < 0 || cfg.ScalingMax > 64:
		return sc, fmt.Errorf("scaling-max %d: want 1 to 64", cfg.ScalingMax)
	case cfg.ScalingMax > 0:
		sc.ScalingMax = cfg.ScalingMax
	}
	switch cfg.Verify {
	case "":
		cfg.Verify = "inline"
	case "off", "inline", "after":
	default:
		return sc, fmt.Errorf("verify %q: want off, inline or after", cfg.Verify)
	}
	if cfg.Workers <= 0 {
		// One worker per CPU of every process's host (assumed alike).
		cfg.Workers = runtime.NumCPU() * (1 + len(cfg.Peers))
	}
	return sc, nil
}

// execute runs the scenarios against an open target in this process.
func execute(ctx context.Context, cfg Config, sc Scale, t Target, scenarios []Scenario) (*Report, error) {
	if _, err := cfg.normalise(); err != nil {
		return nil, err
	}
	return executeWith(ctx, cfg, sc, t, scenarios, nil)
}

func newRun(ctx context.Context, cfg Config, sc Scale, t Target, env Env, root string) *Run {
	return &Run{ctx: ctx, T: t, S: sc, Workers: cfg.Workers, Verify: cfg.Verify, env: env, info: t.Describe(ctx), pat: newPattern(), out: cfg.Progress, root: root}
}

// executeWith runs the scenarios as the leader of the processes in d (or
// alone when d is nil).
func executeWith(ctx context.Context, cfg Config, sc Scale, t Target, scenarios []Scenario, d *dist) (*Report, error) {
	env := CaptureEnv(cfg.Version)
	root := fmt.Sprintf("strata-bench-%d-%d", os.Getpid(), time.Now().UnixNano())
	r := newRun(ctx, cfg, sc, t, env, root)
	rep := &Report{Tool: "strata bench", Version: cfg.Version, Started: time.Now().UTC(), Env: env, Target: r.info, Scale: sc.Name, Workers: cfg.Workers, Verify: cfg.Verify, Procs: 1}
	if d != nil {
		r.dist = d
		if err := d.start(root, env); err != nil {
			return nil, err
		}
		rep.Procs, rep.Peers = d.procs, d.peerEnvs
	}
	if err := t.Mkdir(ctx, r.root); err != nil {
		return nil, fmt.Errorf("target %s: make the run's directory: %w", t, err)
	}
	rep.Results = r.runScenarios(scenarios)
	for i := range rep.Results {
		if rep.Results[i].failed() {
			rep.Failures++
		}
	}
	t.RemoveAll(ctx, r.root)
	rep.Seconds = time.Since(rep.Started).Seconds()
	if err := context.Cause(ctx); err != nil && ctx.Err() != nil && d != nil {
		return rep, err // a lost worker process: the report is incomplete
	}
	return rep, nil
}

// runScenarios runs each scenario, the leader and followers alike.
func (r *Run) runScenarios(scenarios []Scenario) []Result {
	var out []Result
	for _, s := range scenarios {
		res := Result{Scenario: s.Name, Title: s.Title, Pattern: s.Pattern, Params: map[string]string{}}
		r.cur, r.step = &res, 0
		r.status(fmt.Sprintf("%s: %s", s.Name, s.Title))
		err := s.Run(r, &res)
		if err != nil {
			res.Error = err.Error()
		}
		if err := r.barrier(s.Name); err != nil && res.Error == "" {
			res.Error = err.Error()
		}
		r.T.RemoveAll(r.ctx, r.dir(s.Name))
		out = append(out, res)
		r.done(&res)
		if r.ctx.Err() != nil {
			break
		}
	}
	return out
}

func (res *Result) failed() bool {
	if res.Error != "" {
		return true
	}
	for i := range res.Phases {
		if res.Phases[i].Failed() {
			return true
		}
	}
	return false
}

// dir is a scenario's directory on the target.
func (r *Run) dir(elem ...string) string { return path.Join(append([]string{r.root}, elem...)...) }

// fresh makes an empty directory for a scenario step.
func (r *Run) fresh(elem ...string) (string, error) {
	d := r.dir(elem...)
	r.T.RemoveAll(r.ctx, d)
	return d, r.T.Mkdir(r.ctx, d)
}

// add appends a phase to the current result, with the run's context.
func (r *Run) add(res *Result, ph Phase) *Phase {
	res.Phases = append(res.Phases, ph)
	return &res.Phases[len(res.Phases)-1]
}

// param records a parameter of the current result.
func (res *Result) param(k string, v any) { res.Params[k] = fmt.Sprint(v) }

// sortedKeys returns m's keys in order, for stable output.
func sortedKeys(m map[string]string) []string {
	ks := make([]string, 0, len(m))
	for k := range m {
		ks = append(ks, k)
	}
	sort.Strings(ks)
	return ks
}

// status prints a progress line (terminals only).
func (r *Run) status(msg string) {
	if r.out == nil {
		return
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	pad := ""
	if n := len(r.lastMsg) - len(msg); n > 0 {
		pad = strings.Repeat(" ", n)
	}
	fmt.Fprintf(r.out, "\r%s%s", msg, pad)
	r.lastMsg = msg
}

// done ends a scenario's progress line.
func (r *Run) done(res *Result) {
	if r.out == nil {
		return
	}
	r.status("")
	fmt.Fprint(r.out, "\r")
	r.lastMsg = ""
}

// progress shows a running phase's totals twice a second.
func (r *Run) progress(name string, p *phaseRun) (stop func()) {
	if r.out == nil {
		return func() {}
	}
	quit := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		tick := time.NewTicker(500 * time.Millisecond)
		defer tick.Stop()
		for {
			select {
			case <-quit:
				return
			case <-tick.C:
				var ops, bytes int64
				for _, w := range p.workers {
					ops += w.ops.Load()
					bytes += w.bytes.Load()
				}
				el := time.Since(p.t0).Seconds()
				r.status(fmt.Sprintf("%s: %s  %d ops  %s  %.0f ops/s  %.1f MiB/s", r.cur.Scenario, name, ops, sizeStr(bytes), float64(ops)/el, float64(bytes)/(1<<20)/el))
			}
		}
	}()
	return func() { close(quit); wg.Wait() }
}

// BoundCheck compares a scaling point with seed 002's bound
// S = min(N·I, M·I, P·R): N clients and M servers with links of I bytes/s,
// P disks of R bytes/s.
type BoundCheck struct {
	Phase    string  `json:"phase"`
	Clients  int     `json:"clients"`
	Servers  int     `json:"servers"`
	Measured float64 `json:"measured_mib_per_s"`
	Bound    float64 `json:"bound_mib_per_s"`
	Binding  string  `json:"binding_term"` // N·I, M·I or P·R
	Ratio    float64 `json:"ratio"`
}
