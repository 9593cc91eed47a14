package main

import (
	"context"
	"fmt"
	"io"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/strata-storage/strata/client"
	"github.com/strata-storage/strata/internal/api"
	"github.com/strata-storage/strata/internal/config"
	"github.com/strata-storage/strata/internal/server"
	"github.com/strata-storage/strata/internal/sim"
	"github.com/strata-storage/strata/internal/tape"
)

// The recall part validates strata sim's tape model against Strata itself:
// files migrated to an emulated library, purged, then staged at random;
// what the library did (modelled time, mounts, locates) is measured, and
// the same requests — written as a trace — are replayed by the simulator,
// which runs the same scheduler and the same timing functions in virtual
// time. The server's own time per recalled file is calibrated from the
// runs on the first drive count and predicts the others.
//
// Every predicted run's figures are computed, and written with the traces
// and studies they come from, before its staging starts: a drive count's
// library is filled and its picks made first (where each picked file lies
// is known once it is on tape), and with --go the part then waits for a
// file to exist (FILE.dN for N drives), so the predictions can be
// committed before the runs they predict.
//
// The emulator and the simulator share the tape physics, so this does not
// validate LTO timing (no real drive here); it validates that the
// simulator reproduces what Strata's recaller does with a library:
// the batches, their order, the robot, and the software around them.

const (
	recallCapacity = 64 << 20 // per cartridge: spread over a whole tape
	recallFile     = 1 << 20
	recallAge      = "1m" // holds the queue until everything is staged
)

type recallRun struct {
	drives, rep int
	paths       []string
	trace       []sim.RecallRequest
	tracePath   string
	staged      float64 // library seconds the stage call took
	meas        recallOutcome
	des         recallOutcome
}

type recallOutcome struct {
	makespan, mean float64 // modelled seconds
	mounts         int
	locates        int
}

// recallLib is a library filled for the recall part, its picks made.
type recallLib struct {
	s    *server.Server
	c    *client.Client
	stop func()
	runs []*recallRun
}

func recall(g tape.Generation, driveList []int, carts, picks, reps int, out, goFile string) {
	k, out := validationRun("recall", "x100", out)
	poll := time.Duration(200 * float64(time.Millisecond) * k) // the recaller's ticker, in library time
	study := func(r *recallRun, overheadMS float64) string {
		return fmt.Sprintf(`name = "recall, %d drives, rep %d"
note = "the requests of a run of bench/hsmbench --parts recall, replayed"
[tape]
generation = %q
drives = %d
capacity = "%d"
recall_min_files = 1000000
recall_min_bytes = "1PB"
recall_max_age = %q
poll = %q
overhead_ms = %g
[workload]
op = "recall"
trace = %q
`, r.drives, r.rep, g.Name, r.drives, recallCapacity, recallAge, poll.String(), overheadMS, filepath.Base(r.tracePath))
	}
	// simulate writes r's trace and study and replays them.
	simulate := func(r *recallRun, overheadMS float64) recallOutcome {
		writeCSV(r.tracePath, func(w io.Writer) error { return sim.WriteTrace(w, r.trace) })
		text := study(r, overheadMS)
		if err := os.WriteFile(strings.TrimSuffix(r.tracePath, ".csv")+".toml", []byte(text), 0o644); err != nil {
			fail(err)
		}
		st, err := sim.ParseStudy([]byte(text))
		if err != nil {
			fail(err)
		}
		c, err := st.With(map[string]string{"workload.trace": r.tracePath})
		if err != nil {
			fail(err)
		}
		res, err := sim.Run(c, 1)
		if err != nil {
			fail(err)
		}
		x := res.Recall
		return recallOutcome{makespan: x.Seconds, mean: x.Mean, mounts: x.Mounts, locates: x.Locates}
	}

	// The first drive count calibrates the server's time per file.
	lib := newRecallLib(g, driveList[0], carts, picks, reps, out)
	var extra, files, staged float64
	for _, r := range lib.runs {
		lib.measure(r, k)
		spread(r.trace, r.staged) // as it ran
		extra += r.meas.makespan - simulate(r, 0).makespan
		files += float64(len(r.paths))
		staged += r.staged / float64(len(lib.runs))
	}
	lib.stop()
	overhead := math.Max(0, extra/files*1e3) * float64(driveList[0])
	calib := lib.runs
	for _, r := range calib {
		r.des = simulate(r, overhead)
	}

	fmt.Printf("\n### Recall: Strata with an emulated %s library (time scale %s) against strata sim\n\n", g.Name, *scale)
	fmt.Printf("%d cartridges of %d MiB spread over the whole tape, %d-MiB files, %d picked at random per run, staged at once; rules hold the queue for %s.\n",
		carts, recallCapacity>>20, recallFile>>20, picks, recallAge)
	fmt.Printf("Server time per file calibrated on the %d-drive runs: %.0f ms of library time (%.2f ms wall); the stage call %.2f s of library time. Traces and studies: %s\n\n",
		driveList[0], overhead, overhead/k, staged, out)
	all := slices.Clone(calib)
	for _, d := range driveList[1:] {
		lib := newRecallLib(g, d, carts, picks, reps, out)
		// The prediction, before the runs: each request arrives as the
		// calibration's stage calls spread theirs (see measure).
		var head strings.Builder
		fmt.Fprintf(&head, "# strata sim's prediction of bench/hsmbench --parts recall on %d drives, made %s before the runs\n", d, time.Now().UTC().Format(time.RFC3339))
		fmt.Fprintf(&head, "# server time per file %.0f ms of library time (%d-drive runs), stage call %.2f s\n", overhead, driveList[0], staged)
		fmt.Fprintln(&head, "# rep  mounts  locates  makespan_s  mean_wait_s")
		for _, r := range lib.runs {
			spread(r.trace, staged)
			r.des = simulate(r, overhead)
			fmt.Fprintf(&head, "%d %d %d %.1f %.1f\n", r.rep, r.des.mounts, r.des.locates, r.des.makespan, r.des.mean)
		}
		name := filepath.Join(out, fmt.Sprintf("recall-predicted-d%d.txt", d))
		if err := os.WriteFile(name, []byte(head.String()), 0o644); err != nil {
			fail(err)
		}
		fmt.Print(head.String())
		if goFile != "" {
			waitFor(fmt.Sprintf("%s.d%d", goFile, d))
		}
		for _, r := range lib.runs {
			lib.measure(r, k)
		}
		lib.stop()
		all = append(all, lib.runs...)
	}

	fmt.Println("\n| drives | rep | use | mounts meas / sim | locates meas / sim | makespan meas s | sim s | error | mean wait meas s | sim s | error |")
	fmt.Println("|---|---|---|---|---|---|---|---|---|---|---|")
	var errs []float64
	for _, r := range all {
		use := "predict"
		if r.drives == driveList[0] {
			use = "calibrate"
		}
		e1 := (r.des.makespan - r.meas.makespan) / r.meas.makespan
		e2 := (r.des.mean - r.meas.mean) / r.meas.mean
		if use == "predict" {
			errs = append(errs, math.Abs(e1), math.Abs(e2))
		}
		fmt.Printf("| %d | %d | %s | %d / %d | %d / %d | %.0f | %.0f | %+.1f %% | %.0f | %.0f | %+.1f %% |\n", r.drives, r.rep, use,
			r.meas.mounts, r.des.mounts, r.meas.locates, r.des.locates, r.meas.makespan, r.des.makespan, 100*e1, r.meas.mean, r.des.mean, 100*e2)
	}
	if len(errs) > 0 {
		slices.Sort(errs)
		fmt.Printf("\nPredicted runs: median |error| %.1f %%, worst %.1f %% (%d figures).\n", 100*errs[len(errs)/2], 100*errs[len(errs)-1], len(errs))
	}
}

// newRecallLib builds a library with the given drives, fills carts
// cartridges with files, leaves only their tape copies, and picks reps
// runs' files at random, each with where it lies.
func newRecallLib(g tape.Generation, drives, carts, picks, reps int, out string) *recallLib {
	ctx := context.Background()
	s, c, stop := start(func(cfg *config.Config) {
		cfg.Library = config.Library{Generation: g.Name, Drives: drives, Cartridges: carts, Capacity: recallCapacity, TimeScale: *scale, Path: *tapeDir}
		cfg.HSM.MigrateDrives = 1
		cfg.HSM.Aggregate = recallFile / 2 // every file its own tape file
		cfg.HSM.RecallMinFiles, cfg.HSM.RecallMinBytes, cfg.HSM.RecallMaxAge = 1000000, 1<<50, recallAge
	})
	// fill the cartridges (the last one partly), then leave only tape copies
	per := recallCapacity * 9 / 10 / recallFile
	n := per * carts
	all := onTapeOnly(ctx, c, "r", n, recallFile)
	rng := rand.New(rand.NewPCG(uint64(drives), 7))
	lib := &recallLib{s: s, c: c, stop: stop}
	for rep := 1; rep <= reps; rep++ {
		r := &recallRun{drives: drives, rep: rep, tracePath: filepath.Join(out, fmt.Sprintf("recall-d%d-r%d.csv", drives, rep))}
		for _, p := range rng.Perm(n)[:picks] {
			fi, err := c.Stat(ctx, all[p])
			if err != nil || len(fi.Layout.Tapes) != 1 {
				fail(fmt.Errorf("recall: %s: want one tape copy: %v", all[p], err))
			}
			tc := fi.Layout.Tapes[0]
			r.paths = append(r.paths, all[p])
			r.trace = append(r.trace, sim.RecallRequest{Volume: tc.Volume, Offset: tc.Position + tc.Offset, Size: tc.Length})
		}
		lib.runs = append(lib.runs, r)
	}
	return lib
}

// spread times a trace's requests over a stage call of staged seconds:
// the server queues the paths in order while the call lasts, so the
// scheduler's "oldest first" sees the same order in both.
func spread(trace []sim.RecallRequest, staged float64) {
	for i := range trace {
		trace[i].Time = staged * float64(i+1) / float64(len(trace))
	}
}

// measure stages r's files at once from a library with every cartridge in
// its slot, polls until every one is on disk (a file's wait ends at the
// poll that sees it: 50 ms wall, 5 s of library time at x100), records
// what the library did, and purges them again.
func (l *recallLib) measure(r *recallRun, k float64) {
	ctx := context.Background()
	emptyDrives(ctx, l.s.Library)
	before := l.s.Library.Stats()
	t0 := time.Now()
	if _, err := l.c.Stage(ctx, r.paths, 0); err != nil {
		fail(err)
	}
	r.staged = time.Since(t0).Seconds() * k
	left := slices.Clone(r.paths)
	var waits []float64
	for len(left) > 0 {
		time.Sleep(50 * time.Millisecond)
		var still []string
		for _, p := range left {
			st, err := l.c.StageStatus(ctx, p)
			if err != nil || st.State == api.StageFailed {
				fail(fmt.Errorf("recall %s: %+v %v", p, st, err))
			}
			if st.State == api.StageResident {
				waits = append(waits, time.Since(t0).Seconds()*k)
			} else {
				still = append(still, p)
			}
		}
		left = still
	}
	st := l.s.Library.Stats()
	r.meas = recallOutcome{makespan: slices.Max(waits), mean: mean(waits), mounts: int(st.Mounts - before.Mounts), locates: int(st.Locates - before.Locates)}
	if _, err := l.c.Purge(ctx, r.paths...); err != nil {
		fail(err)
	}
}

// validationRun checks that a part comparing Strata with strata sim runs
// faster than real time, and makes its output directory (out, or one named
// after the part under --data); it returns the time scale's factor.
func validationRun(part, example, out string) (float64, string) {
	k, ok := scaleFactor(*scale)
	if !ok || k == 1 {
		fail(fmt.Errorf("%s: want a --scale like %s (real time would take hours)", part, example))
	}
	if out == "" {
		out = filepath.Join(*dataDir, part)
	}
	if err := os.MkdirAll(out, 0o755); err != nil {
		fail(err)
	}
	return k, out
}

// emptyDrives dismounts every cartridge, so each run starts as the
// simulator's does: all cartridges in their slots.
func emptyDrives(ctx context.Context, lib *tape.Emulator) {
	for _, d := range lib.Drives() {
		if d.Volume != "" {
			if err := lib.Dismount(ctx, d.ID); err != nil {
				fail(err)
			}
		}
	}
}

func mean(v []float64) float64 {
	s := 0.0
	for _, x := range v {
		s += x
	}
	return s / float64(len(v))
}

// waitFor waits until the file name exists: the go-ahead for runs whose
// predictions have been committed.
func waitFor(name string) {
	fmt.Printf("waiting for %s before the run …\n", name)
	for {
		if _, err := os.Stat(name); err == nil {
			return
		}
		time.Sleep(time.Second)
	}
}
