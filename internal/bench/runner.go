package bench

import (
	"context"
	"errors"
	"fmt"
	"math"
	"runtime"
	"sort"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	hdr "github.com/HdrHistogram/hdrhistogram-go"
	"golang.org/x/sys/cpu"
)

// The timing contract (IOR's and mdtest's, see docs/BENCHMARKS.md): all
// workers of a phase pass a barrier, then each runs its share; the phase
// lasts from the barrier's release to the moment the last worker is done,
// so bandwidth = bytes / (last close − first open) and rates = items /
// (barrier-to-barrier time). The first worker to finish marks the
// stonewall ("first done"): what all workers had done by then, over that
// time, is reported too. A deadline stops the phase early: each worker
// stops at its next step, then all continue to the largest count any of
// them reached (wear-out), so the result covers equal shares.

// Worker is one parallel stream of a phase. With --procs or --hosts a
// phase's workers are spread over processes; ID is the worker's number in
// the whole phase, N the phase's worker count.
type Worker struct {
	ID, N int
	ph    *phaseRun
	hist  *hdr.Histogram
	// The counters every operation updates get a cache line of their
	// own: Workers are allocated side by side, and two cores updating
	// one line would slow every operation of both.
	_     cpu.CacheLinePad
	ops   atomic.Int64
	bytes atomic.Int64
	_     cpu.CacheLinePad
	steps int64  // where the worker's loop ended (Finish)
	buf   []byte // a read buffer Setup prepared (readBuffer)
	// stonewall state
	target int64 // after the deadline: run to this count; -1 before
	end    time.Time
}

// tick is a monotonic clock reading. An operation's latency takes two:
// time.Now would read the wall clock too, and on a VM each clock read is
// a visible part of a microsecond-long stat.
type tick int64

var epoch = time.Now()

func now() tick { return tick(time.Since(epoch)) }

// paddedHist keeps a worker's histogram, whose count every operation
// updates, off its neighbours' cache lines.
type paddedHist struct {
	_ cpu.CacheLinePad
	h hdr.Histogram
	_ cpu.CacheLinePad
}

func newWorkerHist() *hdr.Histogram {
	p := &paddedHist{h: *hdr.New(1, int64(time.Hour), 3)}
	return &p.h
}

// Op records one operation that began at t0 and moved n bytes.
func (w *Worker) Op(t0 tick, n int64) {
	w.hist.RecordValue(int64(now() - t0))
	w.ops.Add(1)
	if n != 0 {
		w.bytes.Add(n)
	}
}

// Bytes counts bytes moved outside Op (a close that flushes, for one).
func (w *Worker) Bytes(n int64) { w.bytes.Add(n) }

// More says whether step i (counted from 0) of at most planned steps
// should run. After the phase's deadline it waits until every worker (in
// every process) has stopped, then lets each run on to the largest count
// reached.
func (w *Worker) More(i, planned int64) bool {
	if i >= planned {
		return false
	}
	if w.target >= 0 {
		return i < w.target
	}
	p := w.ph
	if !p.expired.Load() { // a timer sets it: no clock read per step
		return true
	}
	w.target = p.stonewall(i)
	return i < w.target
}

// Finish records where a worker's loop ended (the read phase replays it)
// and reports a worker that ran out of steps before the deadline, so a
// stonewall waits for no one who has stopped for good. Workers that use
// More must call it when they leave their loop.
func (w *Worker) Finish(i int64) {
	w.steps = i
	if w.target < 0 && w.ph.deadline > 0 {
		w.target = i
		w.ph.register(i)
	}
}

// Ctx is the phase's context.
func (w *Worker) Ctx() context.Context { return w.ph.ctx }

type phaseRun struct {
	ctx      context.Context
	deadline time.Duration
	t0       time.Time
	expired  atomic.Bool
	workers  []*Worker // this process's share

	mu       sync.Mutex
	cond     *sync.Cond
	stopped  int
	maxCount int64
	hit      bool
	// stopOnce reports this process's workers stopped (all of them
	// registered, or all returned); onStop hands the local maximum on
	// and, once every process has stopped, release gives the global one.
	stopOnce sync.Once
	onStop   func(local int64)
	released bool
	global   int64
}

// register records a worker's count where it stopped: at the deadline or
// at its natural end.
func (p *phaseRun) register(count int64) {
	p.mu.Lock()
	p.stopped++
	p.maxCount = max(p.maxCount, count)
	all := p.stopped == len(p.workers)
	local := p.maxCount
	p.mu.Unlock()
	if all {
		p.localStopped(local)
	}
}

func (p *phaseRun) localStopped(local int64) {
	p.stopOnce.Do(func() { p.onStop(local) })
}

// release lets stonewalled workers run on to count.
func (p *phaseRun) release(count int64) {
	p.mu.Lock()
	p.released, p.global = true, count
	p.cond.Broadcast()
	p.mu.Unlock()
}

// stonewall registers a worker stopped by the deadline, waits until every
// worker has stopped, and returns the largest count reached.
func (p *phaseRun) stonewall(count int64) int64 {
	p.mu.Lock()
	p.hit = true
	p.mu.Unlock()
	p.register(count)
	p.mu.Lock()
	defer p.mu.Unlock()
	for !p.released && p.ctx.Err() == nil {
		p.cond.Wait()
	}
	return max(p.global, count)
}

// PhaseSpec describes one timed phase.
type PhaseSpec struct {
	Name     string
	Workers  int
	Deadline time.Duration // 0: run every step
	Work     func(w *Worker) error
	// Setup, if set, runs in each worker before the phase's barrier,
	// untimed: what a worker needs ready before the clock starts.
	Setup func(w *Worker)
	// Role, if set, splits the result by worker role (full duplex: the
	// writers and the readers of one phase are reported apart).
	Role func(id int) string
}

// runPhase runs spec's workers together and measures them as one.
func (r *Run) runPhase(spec PhaseSpec) Phase {
	spec.Role = nil
	return r.runRoles(spec)[0]
}

// workerResult is what one worker did in a phase: the unit a process
// hands the leader.
type workerResult struct {
	ID       int           `json:"id"`
	Proc     int           `json:"proc"`
	Ops      int64         `json:"ops"`
	Bytes    int64         `json:"bytes"`
	End      time.Duration `json:"end_ns"` // since the barrier's release
	Steps    int64         `json:"steps"`
	Err      string        `json:"err,omitempty"`
	Canceled bool          `json:"canceled,omitempty"`
	// Snap is every worker of this process as [id, ops, bytes] when this
	// worker ended: the exact "first done" figures within a process.
	Snap [][3]int64 `json:"snap"`
	Hist []int64    `json:"hist"` // sparse HDR counts: index, count, …
	hist *hdr.Histogram
}

// processResult is one process's share of a phase.
type processResult struct {
	Proc    int            `json:"proc"`
	Hit     bool           `json:"hit"`
	Workers []workerResult `json:"workers"`
	// CPU is this process's CPU time over the phase.
	CPU time.Duration `json:"cpu_ns"`
	// Samples are this process's workers' counts every sampleEvery since
	// the release, from which the leader interpolates "first done"
	// figures across processes.
	Samples []sample `json:"samples,omitempty"`
}

// selfCPU is this process's CPU time so far, user and system.
func selfCPU() time.Duration {
	var ru syscall.Rusage
	if syscall.Getrusage(syscall.RUSAGE_SELF, &ru) != nil {
		return 0
	}
	return time.Duration(syscall.TimevalToNsec(ru.Utime) + syscall.TimevalToNsec(ru.Stime))
}

// ServerStats are a server's counters so far, where the target reports
// them (a Strata core's /metrics): its CPU time and its catalog writer's
// group commits (how many, the operations and the time they held).
type ServerStats struct {
	CPU       time.Duration
	Groups    int64
	GroupOps  int64
	GroupTime time.Duration
}

// serverStats reads the target's server's counters, if it has them.
func (r *Run) serverStats() (ServerStats, bool) {
	sc, ok := r.T.(interface {
		ServerStats(context.Context) (ServerStats, error)
	})
	if !ok {
		return ServerStats{}, false
	}
	st, err := sc.ServerStats(r.ctx)
	return st, err == nil
}

type sample struct {
	T      time.Duration `json:"t_ns"`
	Counts [][2]int64    `json:"counts"` // per worker of the process, in Workers order
}

const sampleEvery = 10 * time.Millisecond

// runRoles runs spec's workers together and reports each role (or the
// whole phase without roles).
func (r *Run) runRoles(spec PhaseSpec) []Phase {
	n := max(spec.Workers, 1)
	names := roleNames(spec, n)
	if r.dist != nil && r.dist.abandoned {
		return errorPhases(names, errAbandoned)
	}
	ctx, cancel := context.WithCancel(r.ctx)
	defer cancel()
	p := &phaseRun{ctx: ctx, deadline: spec.Deadline}
	p.cond = sync.NewCond(&p.mu)
	for _, id := range r.mine(n) {
		p.workers = append(p.workers, &Worker{ID: id, N: n, ph: p, target: -1,
			hist: newWorkerHist()})
	}
	p.onStop = p.release // one process: its maximum is the global one
	// Wake stonewall waiters if the run is cancelled.
	stopWake := context.AfterFunc(ctx, func() { p.mu.Lock(); p.cond.Broadcast(); p.mu.Unlock() })
	defer stopWake()

	var ready, done sync.WaitGroup
	var release barrier
	release.init()
	var called atomic.Bool // the phase was called off at the barrier
	ready.Add(len(p.workers))
	errs := make([]error, len(p.workers))
	// snaps[i] is this process's workers' (ops, bytes) when worker i ended.
	snaps := make([][][3]int64, len(p.workers))
	for i, w := range p.workers {
		done.Add(1)
		go func() {
			defer done.Done()
			if spec.Setup != nil {
				spec.Setup(w)
			}
			ready.Done()
			release.wait(len(p.workers))
			if called.Load() {
				return
			}
			err := spec.Work(w)
			w.end = time.Now()
			if w.target < 0 && p.deadline > 0 {
				// A worker that never registered (a reader beside
				// stonewalled writers, one that failed) has stopped for
				// good: without this, writers waiting at the stonewall
				// would wait for it, and it for them, for ever. It
				// brings no count of its own to the wear-out.
				w.target = 0
				p.register(0)
			}
			if err != nil {
				errs[i] = err
				cancel()
			}
			snap := make([][3]int64, len(p.workers))
			for j, o := range p.workers {
				snap[j] = [3]int64{int64(o.ID), o.ops.Load(), o.bytes.Load()}
			}
			snaps[i] = snap
		}()
	}
	ready.Wait()
	// the server's CPU is read over HTTP: before the phase's start is
	// agreed (with peers) and its clock starts
	srv0, srvOK := r.serverStats()
	label := r.stepLabel(spec.Name)
	if r.dist != nil {
		if err := r.dist.begin(label, p); err != nil {
			called.Store(true)
			release.open()
			done.Wait()
			return errorPhases(names, err)
		}
	}
	stopProgress := r.progress(spec.Name, p)
	p.t0 = time.Now()
	if spec.Deadline > 0 {
		timer := time.AfterFunc(spec.Deadline, func() { p.expired.Store(true) })
		defer timer.Stop()
	}
	var samples []sample
	stopSampling := func() {}
	if r.dist != nil {
		stopSampling = p.sample(&samples)
	}
	cpu0 := selfCPU()
	r.inPhase.Store(true)
	release.open()
	done.Wait()
	r.inPhase.Store(false)
	used := selfCPU() - cpu0
	srv1, srvOK1 := r.serverStats()
	stopSampling()
	stopProgress()
	p.localStopped(p.maxCount) // workers that returned early (errors) never registered

	pr := processResult{Proc: r.rank(), Hit: p.hit, Samples: samples, CPU: used}
	for i, w := range p.workers {
		wr := workerResult{ID: w.ID, Proc: r.rank(), Ops: w.ops.Load(), Bytes: w.bytes.Load(),
			End: w.end.Sub(p.t0), Steps: w.steps, Snap: snaps[i], hist: w.hist}
		if errs[i] != nil {
			wr.Err, wr.Canceled = errs[i].Error(), errors.Is(errs[i], context.Canceled)
		}
		pr.Workers = append(pr.Workers, wr)
	}
	merge := func(prs []processResult) []Phase {
		phs := mergePhase(spec.Name, p.deadline, n, names, spec.Role, prs)
		if len(phs) == 1 && phs[0].Ops > 0 && phs[0].Error == "" {
			// the whole phase's CPU; a duplex phase's roles share it,
			// so it is not split between them
			var client time.Duration
			for _, pr := range prs {
				client += pr.CPU
			}
			perOp := func(d time.Duration) float64 {
				return math.Round(float64(d.Nanoseconds())/float64(phs[0].Ops)/100) / 10
			}
			phs[0].CPU = &PhaseCPU{Client: perOp(client)}
			if srvOK && srvOK1 {
				v := perOp(srv1.CPU - srv0.CPU)
				phs[0].CPU.Server = &v
				if g := srv1.Groups - srv0.Groups; g > 0 {
					phs[0].Groups = &PhaseGroups{Groups: g,
						OpsPerGroup: math.Round(float64(srv1.GroupOps-srv0.GroupOps)/float64(g)*100) / 100,
						USPerGroup:  math.Round(float64((srv1.GroupTime-srv0.GroupTime).Nanoseconds())/float64(g)/100) / 10}
				}
			}
		}
		return phs
	}
	if r.dist != nil {
		phs, err := r.dist.finish(pr, merge)
		if err != nil {
			return errorPhases(names, err)
		}
		return phs
	}
	return merge([]processResult{pr})
}

// barrier holds a phase's workers until the leader opens it. A worker
// that parks hands its CPU back to the kernel, and waking it again takes
// the scheduler's hand-off and, on a VM, the host's rescheduling of an
// idle vCPU: up to a few hundred microseconds, a visible part of a 4 ms
// metadata phase, and paid by one worker more than another. So, as MPI
// barriers do, workers first spin (yielding, so the leader still runs),
// and park only if the barrier stays shut (a multi-host phase waiting for
// its peers), or when there are more workers than CPUs to spin on.
type barrier struct {
	opened atomic.Bool
	ch     chan struct{}
}

const barrierSpin = 2 * time.Millisecond

func (b *barrier) init() { b.ch = make(chan struct{}) }

func (b *barrier) open() {
	b.opened.Store(true)
	close(b.ch)
}

func (b *barrier) wait(workers int) {
	if workers <= runtime.GOMAXPROCS(0) {
		deadline := time.Now().Add(barrierSpin)
		for i := 0; ; i++ {
			if b.opened.Load() {
				return
			}
			if i%64 == 63 && time.Now().After(deadline) {
				break
			}
			runtime.Gosched()
		}
	}
	<-b.ch
}

// roleNames lists a phase's result names in worker order.
func roleNames(spec PhaseSpec, n int) []string {
	if spec.Role == nil {
		return []string{spec.Name}
	}
	var out []string
	seen := map[string]bool{}
	for id := range n {
		if name := spec.Role(id); !seen[name] {
			seen[name] = true
			out = append(out, name)
		}
	}
	return out
}

func errorPhases(names []string, err error) []Phase {
	out := make([]Phase, len(names))
	for i, name := range names {
		out[i] = Phase{Name: name, Error: err.Error()}
	}
	return out
}

// sample records this process's workers' counts every sampleEvery.
func (p *phaseRun) sample(into *[]sample) (stop func()) {
	quit := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	take := func() {
		s := sample{T: time.Since(p.t0), Counts: make([][2]int64, len(p.workers))}
		for j, w := range p.workers {
			s.Counts[j] = [2]int64{w.ops.Load(), w.bytes.Load()}
		}
		*into = append(*into, s)
	}
	go func() {
		defer wg.Done()
		tick := time.NewTicker(sampleEvery)
		defer tick.Stop()
		for {
			select {
			case <-quit:
				take()
				return
			case <-tick.C:
				take()
			}
		}
	}()
	return func() { close(quit); wg.Wait() }
}

// mergePhase measures a phase from every process's results: one Phase per
// role, with the steps each worker reached.
func mergePhase(name string, deadline time.Duration, n int, names []string, role func(int) string, prs []processResult) []Phase {
	all := make([]*workerResult, n)
	procs := map[int]*processResult{}
	hit := false
	for i := range prs {
		pr := &prs[i]
		procs[pr.Proc] = pr
		hit = hit || pr.Hit
		for j := range pr.Workers {
			w := &pr.Workers[j]
			if w.hist == nil {
				w.hist = decodeHist(w.Hist)
			}
			all[w.ID] = w
		}
	}
	steps := make([]int64, n)
	for id, w := range all {
		if w == nil {
			return errorPhases(names, fmt.Errorf("no result from worker %d", id))
		}
		steps[id] = w.Steps
	}
	groups := map[string][]*workerResult{}
	for _, w := range all {
		g := name
		if role != nil {
			g = role(w.ID)
		}
		groups[g] = append(groups[g], w)
	}
	out := make([]Phase, 0, len(names))
	for _, g := range names {
		ph := summary(g, groups[g], procs)
		ph.Deadline, ph.StonewallHit, ph.steps = deadline.Seconds(), hit, steps
		if err := firstError(groups[g]); err != nil {
			ph.Error = err.Error()
		} else if err := firstError(all); err != nil {
			ph.Error = err.Error() // another role's failure stopped this one
		}
		out = append(out, ph)
	}
	return out
}

// summary measures a group of a phase's workers. "First done" counts come
// from the first finisher's process exactly, and from the other processes
// by interpolating their samples at that moment.
func summary(name string, ws []*workerResult, procs map[int]*processResult) Phase {
	ph := Phase{Name: name, Workers: len(ws)}
	var end time.Duration
	first := ws[0]
	h := hdr.New(1, int64(time.Hour), 3)
	for _, w := range ws {
		ph.Ops += w.Ops
		ph.Bytes += w.Bytes
		end = max(end, w.End)
		if w.End < first.End {
			first = w
		}
		h.Merge(w.hist)
	}
	ph.Seconds = end.Seconds()
	ph.FirstDone = first.End.Seconds()
	for _, w := range ws {
		c := countsAt(w, first, procs)
		ph.OpsFirstDone += c[0]
		ph.BytesFirstDone += c[1]
	}
	ph.Latency = latencyOf(h)
	ph.rates()
	return ph
}

// countsAt is what worker w had done when worker first ended.
func countsAt(w, first *workerResult, procs map[int]*processResult) [2]int64 {
	if w.End <= first.End {
		return [2]int64{w.Ops, w.Bytes}
	}
	if w.Proc == first.Proc {
		for _, s := range first.Snap {
			if int(s[0]) == w.ID {
				return [2]int64{s[1], s[2]}
			}
		}
	}
	pr := procs[w.Proc]
	col := -1
	for j := range pr.Workers {
		if pr.Workers[j].ID == w.ID {
			col = j
		}
	}
	if col < 0 {
		return [2]int64{w.Ops, w.Bytes}
	}
	var prev sample
	prev.Counts = make([][2]int64, len(pr.Workers))
	for _, s := range pr.Samples {
		if s.T >= first.End {
			// Linear between the samples around the moment.
			f := float64(first.End-prev.T) / float64(max(s.T-prev.T, 1))
			lerp := func(a, b int64) int64 { return a + int64(f*float64(b-a)) }
			return [2]int64{lerp(prev.Counts[col][0], s.Counts[col][0]), lerp(prev.Counts[col][1], s.Counts[col][1])}
		}
		prev = s
	}
	return [2]int64{w.Ops, w.Bytes}
}

// firstError is the first real failure (not a cancellation that followed
// it), naming its worker.
func firstError(ws []*workerResult) error {
	for _, w := range ws {
		if w.Err != "" && !w.Canceled {
			return fmt.Errorf("worker %d: %s", w.ID, w.Err)
		}
	}
	for _, w := range ws {
		if w.Err != "" {
			return errors.New(w.Err)
		}
	}
	return nil
}

// rates derives the per-second figures.
func (ph *Phase) rates() {
	if ph.Seconds > 0 {
		ph.MiBps = float64(ph.Bytes) / (1 << 20) / ph.Seconds
		ph.OpsPerSec = float64(ph.Ops) / ph.Seconds
	}
	if ph.FirstDone > 0 {
		ph.MiBpsFirstDone = float64(ph.BytesFirstDone) / (1 << 20) / ph.FirstDone
		ph.OpsPerSecFirstDone = float64(ph.OpsFirstDone) / ph.FirstDone
	}
}

// Latency summarises a phase's per-operation times, in microseconds.
type Latency struct {
	Count int64   `json:"count"`
	Mean  float64 `json:"mean_us"`
	Min   float64 `json:"min_us"`
	P50   float64 `json:"p50_us"`
	P90   float64 `json:"p90_us"`
	P99   float64 `json:"p99_us"`
	P999  float64 `json:"p99_9_us"`
	Max   float64 `json:"max_us"`
}

func latencyOf(h *hdr.Histogram) Latency {
	if h.TotalCount() == 0 {
		return Latency{}
	}
	us := func(v int64) float64 { return float64(v) / 1e3 }
	return Latency{Count: h.TotalCount(), Mean: h.Mean() / 1e3, Min: us(h.Min()), P50: us(h.ValueAtQuantile(50)),
		P90: us(h.ValueAtQuantile(90)), P99: us(h.ValueAtQuantile(99)), P999: us(h.ValueAtQuantile(99.9)), Max: us(h.Max())}
}

// repeat runs a metadata phase reps times (each on a fresh tree, which
// setup makes and teardown removes, both untimed) and reports the median
// repetition with the min, median and max rates.
func (r *Run) repeat(reps int, setup, teardown func(rep int) error, spec func(rep int) PhaseSpec) Phase {
	var all []Phase
	for rep := range reps {
		if setup != nil {
			if err := setup(rep); err != nil {
				return Phase{Name: spec(rep).Name, Error: err.Error()}
			}
		}
		ph := r.runPhase(spec(rep))
		if teardown != nil {
			if err := teardown(rep); err != nil && ph.Error == "" {
				ph.Error = err.Error()
			}
		}
		all = append(all, ph)
		if ph.Error != "" {
			return ph
		}
	}
	sort.Slice(all, func(i, j int) bool { return all[i].OpsPerSec < all[j].OpsPerSec })
	med := all[len(all)/2]
	for _, ph := range all {
		med.Repeats = append(med.Repeats, ph.OpsPerSec)
	}
	return med
}
