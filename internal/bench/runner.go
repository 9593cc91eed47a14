package bench

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"sync"
	"sync/atomic"
	"time"

	hdr "github.com/HdrHistogram/hdrhistogram-go"
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

// Worker is one parallel stream of a phase.
type Worker struct {
	ID, N int
	ph    *phaseRun
	hist  *hdr.Histogram
	ops   atomic.Int64
	bytes atomic.Int64
	// stonewall state
	target int64 // after the deadline: run to this count; -1 before
	start  time.Time
	end    time.Time
}

// Op records one operation that began at t0 and moved n bytes.
func (w *Worker) Op(t0 time.Time, n int64) {
	d := time.Since(t0)
	w.hist.RecordValue(int64(d))
	w.ops.Add(1)
	if n != 0 {
		w.bytes.Add(n)
	}
}

// Bytes counts bytes moved outside Op (a close that flushes, for one).
func (w *Worker) Bytes(n int64) { w.bytes.Add(n) }

// More says whether step i (counted from 0) of at most planned steps
// should run. After the phase's deadline it waits until every worker has
// stopped, then lets each run on to the largest count reached.
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

// Finish reports a worker that ran out of steps before the deadline, so a
// stonewall waits for no one who has stopped for good. Workers that use
// More must call it when they leave their loop.
func (w *Worker) Finish(i int64) {
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
	workers  []*Worker

	mu       sync.Mutex
	cond     *sync.Cond
	stopped  int
	maxCount int64
	hit      bool
}

// register records a worker's count where it stopped: at the deadline or
// at its natural end.
func (p *phaseRun) register(count int64) {
	p.mu.Lock()
	p.stopped++
	p.maxCount = max(p.maxCount, count)
	p.cond.Broadcast()
	p.mu.Unlock()
}

// stonewall registers a worker stopped by the deadline, waits until every
// worker has stopped, and returns the largest count reached.
func (p *phaseRun) stonewall(count int64) int64 {
	p.register(count)
	p.mu.Lock()
	defer p.mu.Unlock()
	p.hit = true
	for p.stopped < len(p.workers) && p.ctx.Err() == nil {
		p.cond.Wait()
	}
	return p.maxCount
}

// PhaseSpec describes one timed phase.
type PhaseSpec struct {
	Name     string
	Workers  int
	Deadline time.Duration // 0: run every step
	Work     func(w *Worker) error
	// Role, if set, splits the result by worker role (full duplex: the
	// writers and the readers of one phase are reported apart).
	Role func(id int) string
}

// runPhase runs spec's workers together and measures them as one.
func (r *Run) runPhase(spec PhaseSpec) Phase {
	spec.Role = nil
	return r.runRoles(spec)[0]
}

// runRoles runs spec's workers together and reports each role (or the
// whole phase without roles).
func (r *Run) runRoles(spec PhaseSpec) []Phase {
	ctx, cancel := context.WithCancel(r.ctx)
	defer cancel()
	p := &phaseRun{ctx: ctx, deadline: spec.Deadline}
	p.cond = sync.NewCond(&p.mu)
	n := max(spec.Workers, 1)
	for i := range n {
		p.workers = append(p.workers, &Worker{ID: i, N: n, ph: p, target: -1,
			hist: hdr.New(1, int64(time.Hour), 3)})
	}
	// Wake stonewall waiters if the run is cancelled.
	stopWake := context.AfterFunc(ctx, func() { p.mu.Lock(); p.cond.Broadcast(); p.mu.Unlock() })
	defer stopWake()

	var ready, release, done sync.WaitGroup
	ready.Add(n)
	release.Add(1)
	errs := make([]error, n)
	// snaps[i] is every worker's (ops, bytes) when worker i ended: the
	// "first done" figures of any group of workers come from it.
	snaps := make([][][2]int64, n)
	for _, w := range p.workers {
		done.Add(1)
		go func() {
			defer done.Done()
			ready.Done()
			release.Wait() // the barrier
			w.start = time.Now()
			err := spec.Work(w)
			w.end = time.Now()
			if err != nil {
				errs[w.ID] = err
				cancel()
			}
			snap := make([][2]int64, n)
			for j, o := range p.workers {
				snap[j] = [2]int64{o.ops.Load(), o.bytes.Load()}
			}
			snaps[w.ID] = snap
		}()
	}
	ready.Wait()
	stopProgress := r.progress(spec.Name, p)
	p.t0 = time.Now()
	if spec.Deadline > 0 {
		timer := time.AfterFunc(spec.Deadline, func() { p.expired.Store(true) })
		defer timer.Stop()
	}
	release.Done()
	done.Wait()
	stopProgress()

	groups := map[string][]*Worker{}
	var names []string
	for _, w := range p.workers {
		name := spec.Name
		if spec.Role != nil {
			name = spec.Role(w.ID)
		}
		if groups[name] == nil {
			names = append(names, name)
		}
		groups[name] = append(groups[name], w)
	}
	var out []Phase
	for _, name := range names {
		ph := p.summary(name, groups[name], snaps)
		var gerrs []error
		for _, w := range groups[name] {
			gerrs = append(gerrs, errs[w.ID])
		}
		if err := firstError(gerrs); err != nil {
			ph.Error = err.Error()
		} else if err := firstError(errs); err != nil {
			ph.Error = err.Error() // another role's failure stopped this one
		}
		out = append(out, ph)
	}
	return out
}

// summary measures a group of a phase's workers.
func (p *phaseRun) summary(name string, ws []*Worker, snaps [][][2]int64) Phase {
	ph := Phase{Name: name, Workers: len(ws), Deadline: p.deadline.Seconds(), StonewallHit: p.hit}
	var end time.Time
	first := ws[0]
	h := hdr.New(1, int64(time.Hour), 3)
	for _, w := range ws {
		ph.Ops += w.ops.Load()
		ph.Bytes += w.bytes.Load()
		if w.end.After(end) {
			end = w.end
		}
		if w.end.Before(first.end) {
			first = w
		}
		h.Merge(w.hist)
	}
	ph.Seconds = end.Sub(p.t0).Seconds()
	ph.FirstDone = first.end.Sub(p.t0).Seconds()
	for _, w := range ws {
		ph.OpsFirstDone += snaps[first.ID][w.ID][0]
		ph.BytesFirstDone += snaps[first.ID][w.ID][1]
	}
	ph.Latency = latencyOf(h)
	ph.rates()
	return ph
}

// firstError is the first real failure (not a cancellation that followed
// it), naming its worker.
func firstError(errs []error) error {
	for i, err := range errs {
		if err != nil && !errors.Is(err, context.Canceled) {
			return fmt.Errorf("worker %d: %w", i, err)
		}
	}
	for _, err := range errs {
		if err != nil {
			return err
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
