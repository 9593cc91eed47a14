package main

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"maps"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/strata-storage/strata/client"
	"github.com/strata-storage/strata/internal/api"
	"github.com/strata-storage/strata/internal/bench"
	"github.com/strata-storage/strata/internal/config"
	"github.com/strata-storage/strata/internal/sim"
	"github.com/strata-storage/strata/internal/tape"
)

// The mixed part validates strata sim's site model against Strata itself
// under a site's mixed load: files arriving (puts at their times),
// migration passes taking them to tape, and recalls of older files from
// the same library, all at once on two drives. The library is filled
// first (files migrated and purged); then the load is drawn (arrival
// times and sizes, recall times and files) and written as the traces a
// site study replays (workload.arrivals, workload.trace, [tape.written]
// from the cartridges as the fill left them), and strata sim predicts the
// run — before it runs: with --go FILE the part stops after writing the
// prediction until FILE exists, so the prediction can be committed first.
// Then the same load runs against the server, and each figure is set
// beside its prediction.
//
// The benchmark is the policy's ticker (a forced migration every
// migrate_every, as a tick would start one, a tick that comes during a
// pass waiting for it), so the sim's ticks and the server's are in phase.

const (
	// mixedCapacity is fifteen of the fill's tape files (16 files of 1
	// MiB, 16,779,937 bytes on tape with their headers) and 1.5 MB: a
	// filled cartridge has no room for any tape file of the ingest (≥ 1
	// MiB and the 1 MiB a writer keeps spare). With room for some tape
	// files and not others, whether a writer appends there or changes
	// cartridge — 200 s of rewind, unload and load apart — would turn on
	// which files a pass happened to group, a second either way.
	mixedCapacity  = 15*16779937 + 1500000
	mixedFill      = 3 * 15 * 16 // three cartridges, full
	mixedDrives    = 2
	mixedCarts     = 6
	mixedArrivals  = 100 // files arriving, 1–4 MiB
	mixedRate      = 0.5 // files a second of library time
	mixedRecalls   = 20
	mixedAggregate = 16 << 20         // tape files of 16 MiB
	mixedEvery     = 30 * time.Second // migrate_every, library time
	mixedAge       = "60s"            // recall_max_age, library time
	mixedPoll      = 50 * time.Millisecond
	// mixedOverheadMS is the server's time per recalled file, in wall
	// time: the recall validation's calibration (SIMULATION.md), 8.6 ms.
	mixedOverheadMS = 8.6
)

func mixed(g tape.Generation, out, goFile string) {
	k, out := validationRun("mixed", "x10", out)
	ctx := context.Background()
	wall := func(lib time.Duration) time.Duration { return time.Duration(float64(lib) / k) }
	s, c, stop := start(func(cfg *config.Config) {
		cfg.Library = config.Library{Generation: g.Name, Drives: mixedDrives, Cartridges: mixedCarts, Capacity: mixedCapacity, TimeScale: *scale, Path: *tapeDir}
		cfg.HSM.MigrateDrives = 1
		cfg.HSM.Aggregate = mixedAggregate
		cfg.HSM.RecallMinFiles, cfg.HSM.RecallMinBytes, cfg.HSM.RecallMaxAge = 1000000, 1<<50, mixedAge
	})
	defer stop()
	// one at a time, so every run lays the files out alike
	fill := make([]string, mixedFill)
	for i := range fill {
		fill[i] = fmt.Sprintf("/f%06d", i)
		if _, err := c.Put(ctx, fill[i], gen(uint64(i)), 1<<20, client.PutOptions{COS: "single", NoFixity: true}); err != nil {
			fail(err)
		}
	}
	if _, err := c.Migrate(ctx); err != nil {
		fail(err)
	}
	if _, err := c.Purge(ctx, fill...); err != nil {
		fail(err)
	}
	written := map[string]int64{}
	for _, ci := range s.Library.Cartridges() {
		if ci.Used > 0 {
			written[ci.Volume] = ci.Used
			if room := ci.Capacity - ci.Used; room >= 2<<20 {
				fail(fmt.Errorf("mixed: %s has %d bytes free after the fill: the layout of tape files changed (mixedCapacity)", ci.Volume, room))
			}
		}
	}

	// The load, in library seconds from the start of the run.
	rng := rand.New(rand.NewPCG(42, 7))
	var arr []sim.Arrival
	t := 0.0
	for range mixedArrivals {
		t += rng.ExpFloat64() / mixedRate
		arr = append(arr, sim.Arrival{Time: math.Round(t*1000) / 1000, Size: int64(1+rng.IntN(4)) << 20})
	}
	span := arr[len(arr)-1].Time
	picks := rng.Perm(len(fill))[:mixedRecalls]
	var reqs []sim.RecallRequest
	var times []float64
	for range picks {
		times = append(times, math.Round(rng.Float64()*span*1000)/1000)
	}
	slices.Sort(times)
	for i, p := range picks {
		fi, err := c.Stat(ctx, fill[p])
		if err != nil || len(fi.Layout.Tapes) != 1 {
			fail(fmt.Errorf("mixed: %s: want one tape copy: %v", fill[p], err))
		}
		tc := fi.Layout.Tapes[0]
		reqs = append(reqs, sim.RecallRequest{Time: times[i], Volume: tc.Volume, Offset: tc.Position + tc.Offset, Size: tc.Length})
	}
	writeCSV(filepath.Join(out, "arrivals.csv"), func(w io.Writer) error { return sim.WriteArrivals(w, arr) })
	writeCSV(filepath.Join(out, "recalls.csv"), func(w io.Writer) error { return sim.WriteTrace(w, reqs) })
	var wl strings.Builder
	for _, v := range slices.Sorted(maps.Keys(written)) {
		fmt.Fprintf(&wl, "%s = \"%d\"\n", v, written[v])
	}
	study := fmt.Sprintf(`name = "mixed: ingest, migration and recalls on %d %s drives"
note = "bench/hsmbench --parts mixed --scale %s: the load it ran, replayed; times are the library's"
[tape]
generation = %q
drives = %d
cartridges = %d
capacity = "%d"
migrate_drives = 1
migrate_every = %q
migrate_after = "0s"
aggregate = "%d"
recall_min_files = 1000000
recall_min_bytes = "1PB"
recall_max_age = %q
poll = %q
drive_poll = %q
overhead_ms = %g
buffer_rate = "%.0fMB/s"
[tape.written]
%s
[workload]
op = "site"
streams = 8
arrivals = "arrivals.csv"
trace = "recalls.csv"
`, mixedDrives, g.Name, *scale, g.Name, mixedDrives, mixedCarts, mixedCapacity, mixedEvery.String(), mixedAggregate, mixedAge,
		(time.Duration(200*k) * time.Millisecond).String(), (time.Duration(100*k) * time.Millisecond).String(), mixedOverheadMS*k, 1000/k, wl.String())
	studyPath := filepath.Join(out, "mixed.toml")
	if err := os.WriteFile(studyPath, []byte(study), 0o644); err != nil {
		fail(err)
	}
	cfg, err := sim.Load(studyPath)
	if err != nil {
		fail(err)
	}
	res, err := sim.Run(cfg, 1)
	if err != nil {
		fail(err)
	}
	// Migrate.Seconds runs from the first arrival, Recall.Seconds from
	// the first request: both are taken from the run's start here.
	pred := mixedOutcome{toTapeMean: res.Site.Migrate.Mean, toTapeMax: res.Site.Migrate.Max, recallMean: res.Site.Recall.Mean, recallMax: res.Site.Recall.Max,
		mounts: res.Site.Migrate.Mounts, lastOnTape: arr[0].Time + res.Site.Migrate.Seconds, lastRecall: reqs[0].Time + res.Site.Recall.Seconds}
	var head strings.Builder
	fmt.Fprintf(&head, "# strata sim's prediction of bench/hsmbench --parts mixed, made %s before the run\n", time.Now().UTC().Format(time.RFC3339))
	fmt.Fprintf(&head, "# %d files arriving over %.0f s (1-4 MiB), %d recalls of 1 MiB files on %d filled cartridges, %d %s drives, time scale %s\n",
		len(arr), span, len(reqs), len(written), mixedDrives, g.Name, *scale)
	fmt.Fprintf(&head, "to_tape_mean_s %.1f\nto_tape_max_s %.1f\nrecall_wait_mean_s %.1f\nrecall_wait_max_s %.1f\nlast_on_tape_s %.1f\nlast_recall_s %.1f\nmounts %d\n",
		pred.toTapeMean, pred.toTapeMax, pred.recallMean, pred.recallMax, pred.lastOnTape, pred.lastRecall, pred.mounts)
	if err := os.WriteFile(filepath.Join(out, "mixed-predicted.txt"), []byte(head.String()), 0o644); err != nil {
		fail(err)
	}
	fmt.Print(head.String())
	if goFile != "" {
		waitFor(goFile)
	}

	// The run.
	emptyDrives(ctx, s.Library)
	before := s.Library.Stats()
	t0 := time.Now()
	lib := func() float64 { return time.Since(t0).Seconds() * k }
	at := func(libS float64) { time.Sleep(time.Until(t0.Add(wall(time.Duration(libS * float64(time.Second)))))) }
	var mu sync.Mutex
	onTape := make([]float64, len(arr))
	resident := make([]float64, len(reqs))
	put := make([]bool, len(arr))
	asked := make([]bool, len(reqs))
	var wg sync.WaitGroup
	wg.Add(2)
	go func() { // arrivals
		defer wg.Done()
		var pw sync.WaitGroup
		for i, a := range arr {
			at(a.Time)
			pw.Add(1)
			go func() {
				defer pw.Done()
				if _, err := c.Put(ctx, fmt.Sprintf("/m%04d", i), gen(uint64(1000+i)), a.Size, client.PutOptions{COS: "single", NoFixity: true}); err != nil {
					fail(err)
				}
				mu.Lock()
				put[i] = true
				mu.Unlock()
			}()
		}
		pw.Wait()
	}()
	go func() { // recalls
		defer wg.Done()
		for i, q := range reqs {
			at(q.Time)
			if _, err := c.Stage(ctx, []string{fill[picks[i]]}, 0); err != nil {
				fail(err)
			}
			mu.Lock()
			asked[i] = true
			mu.Unlock()
		}
	}()
	done := make(chan struct{})
	ticks := make(chan struct{})
	go func() { // the policy's ticker
		defer close(ticks)
		for n := 1; ; n++ {
			select {
			case <-done:
				return
			case <-time.After(time.Until(t0.Add(wall(time.Duration(n) * mixedEvery)))):
			}
			if _, err := c.Migrate(ctx); err != nil {
				fail(err)
			}
			// a tick missed during the pass fires at once (one, as Go's
			// ticker keeps it); those before it are dropped
			for time.Until(t0.Add(wall(time.Duration(n+2)*mixedEvery))) < 0 {
				n++
			}
		}
	}()
	for {
		time.Sleep(mixedPoll)
		now := lib()
		mu.Lock()
		left := 0
		for i := range arr {
			if onTape[i] == 0 && put[i] {
				if fi, err := c.Stat(ctx, fmt.Sprintf("/m%04d", i)); err == nil && len(fi.Layout.Tapes) > 0 {
					onTape[i] = now
				}
			}
			if onTape[i] == 0 {
				left++
			}
		}
		for i := range reqs {
			if resident[i] == 0 && asked[i] {
				st, err := c.StageStatus(ctx, fill[picks[i]])
				if err != nil || st.State == api.StageFailed {
					fail(fmt.Errorf("mixed: recall %s: %+v %v", fill[picks[i]], st, err))
				}
				if st.State == api.StageResident {
					resident[i] = now
				}
			}
			if resident[i] == 0 {
				left++
			}
		}
		mu.Unlock()
		if left == 0 {
			break
		}
	}
	close(done)
	<-ticks
	wg.Wait()
	st := s.Library.Stats()
	writeCSV(filepath.Join(out, "mixed-files.csv"), func(w io.Writer) error {
		fmt.Fprintln(w, "kind,index,time_s,done_s")
		for i, a := range arr {
			fmt.Fprintf(w, "arrival,%d,%g,%g\n", i, a.Time, onTape[i])
		}
		for i, q := range reqs {
			fmt.Fprintf(w, "recall,%d,%g,%g\n", i, q.Time, resident[i])
		}
		return nil
	})
	var meas mixedOutcome
	for i, a := range arr {
		d := onTape[i] - a.Time
		meas.toTapeMean += d / float64(len(arr))
		meas.toTapeMax = max(meas.toTapeMax, d)
		meas.lastOnTape = max(meas.lastOnTape, onTape[i])
	}
	for i, q := range reqs {
		d := resident[i] - q.Time
		meas.recallMean += d / float64(len(reqs))
		meas.recallMax = max(meas.recallMax, d)
		meas.lastRecall = max(meas.lastRecall, resident[i])
	}
	meas.mounts = int(st.Mounts - before.Mounts)
	fmt.Printf("library: %d mounts, %d locates, %d read-throughs, positioning %.0f s (library time); by drive:", st.Mounts-before.Mounts, st.Locates-before.Locates, st.ReadThroughs-before.ReadThroughs, (st.Positioning - before.Positioning).Seconds())
	for _, d := range s.Library.Drives() {
		fmt.Printf(" %s %+v;", d.ID, d.Stats)
	}
	fmt.Printf("\nsim: recall %+v\nsim: migrate %+v\n", *res.Site.Recall, *res.Site.Migrate)

	var b strings.Builder
	fmt.Fprintf(&b, "\n### Mixed: ingest, migration and recalls at once, Strata with an emulated %s library (time scale %s) against strata sim's prediction\n\n", g.Name, *scale)
	fmt.Fprintf(&b, "%d files of 1-4 MiB arriving over %.0f s of library time, a forced migration every %v as the policy's ticks, %d recalls of 1 MiB files from %d cartridges filled before, %d drives (one migrating). Polled every %v of wall time (%.1f s of library time). Study, traces and prediction: %s\n\n",
		len(arr), span, mixedEvery, len(reqs), len(written), mixedDrives, mixedPoll, mixedPoll.Seconds()*k, out)
	b.WriteString("| figure | predicted | measured | error |\n|---|---|---|---|\n")
	var errs []float64
	row := func(name string, p, m float64, count bool) {
		e := (p - m) / m
		if count {
			errs = append(errs, math.Abs(e))
		}
		fmt.Fprintf(&b, "| %s | %.1f | %.1f | %+.1f %% |\n", name, p, m, 100*e)
	}
	row("time to tape, mean s", pred.toTapeMean, meas.toTapeMean, true)
	row("time to tape, max s", pred.toTapeMax, meas.toTapeMax, true)
	row("recall wait, mean s", pred.recallMean, meas.recallMean, true)
	row("recall wait, max s", pred.recallMax, meas.recallMax, true)
	row("last file on tape, s", pred.lastOnTape, meas.lastOnTape, true)
	row("last recall done, s", pred.lastRecall, meas.lastRecall, true)
	fmt.Fprintf(&b, "| mounts | %d | %d | |\n", pred.mounts, meas.mounts)
	slices.Sort(errs)
	fmt.Fprintf(&b, "\nMedian |error| %.1f %%, worst %.1f %% (%d figures).\n", 100*errs[len(errs)/2], 100*errs[len(errs)-1], len(errs))
	fmt.Print(b.String())
	if err := os.WriteFile(filepath.Join(out, "mixed-measured.txt"), []byte(b.String()), 0o644); err != nil {
		fail(err)
	}
}

type mixedOutcome struct {
	toTapeMean, toTapeMax, recallMean, recallMax float64
	lastOnTape, lastRecall                       float64 // library seconds from the run's start
	mounts                                       int
}

func writeCSV(path string, write func(io.Writer) error) {
	var buf bytes.Buffer
	if err := write(&buf); err != nil {
		fail(err)
	}
	if err := bench.WriteFile(path, func(w io.Writer) error { _, err := w.Write(buf.Bytes()); return err }); err != nil {
		fail(err)
	}
}
