// Command hsmbench measures the tape tier for docs/PERFORMANCE.md: how close
// migration comes to the emulated drives' native rate, for large files, for
// small files (aggregated into large tape files), and on several drives at
// once. Every figure is a ratio against the rate the library's own timing
// model allows in the same run (N drives × the generation's native rate).
//
//	go run ./bench/hsmbench --data /scratch/dir --tapes /dev/shm/tapes
//
// The disk tier lives under --data (the file system under test); cartridges
// live under --tapes (tmpfs, so the host's disk is not the drives' limit).
// Drives run in real time: a migration of G bytes on N drives cannot take
// less than G / (N × rate) plus the positioning it waits for (a backhitch
// when a write follows a synchronising flush within two seconds).
//
// Parts that validate strata sim against Strata (recall.go, mixed.go)
// run the library faster than real time (--scale) and set what the server
// did beside what the simulator predicts for the same load:
//
//	go run ./bench/hsmbench --data /scratch/dir --parts mixed --gen LTO-9 --scale x10 --out docs/sim/mixed --go /tmp/go
package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"runtime/pprof"
	"sync"
	"time"

	"github.com/strata-storage/strata/client"
	"github.com/strata-storage/strata/internal/config"
	"github.com/strata-storage/strata/internal/server"
	"github.com/strata-storage/strata/internal/tape"
)

var (
	dataDir  = flag.String("data", "", "directory for the disk tier (required)")
	tapeDir  = flag.String("tapes", "/dev/shm/strata-hsmbench", "directory for the cartridges")
	genName  = flag.String("gen", "LTO-5", "tape generation")
	scale    = flag.String("scale", "real", "time scale")
	parts    = flag.String("parts", "large,small,scaling", "what to run")
	gib      = flag.String("gib", "4", "GiB of large files per drive in the large part (a list: one migration each, on one mount) and the scaling part (the first)")
	queueN   = flag.Int("queue", 100000, "files staged at once in the queue part")
	rDrives  = flag.String("recall-drives", "1,2,4", "drive counts of the recall part (the first calibrates)")
	rCarts   = flag.Int("carts", 8, "cartridges of the recall part")
	rPicks   = flag.Int("picks", 40, "files recalled per run in the recall part")
	rReps    = flag.Int("reps", 3, "runs per drive count in the recall part")
	cpuProf  = flag.String("cpuprofile", "", "write a CPU profile of each timed migration to this file, suffixed .1, .2, …")
	runsOut  = flag.String("runs", "", "append each run of the tapesmall and gaps parts to this file as a JSON line")
	gapFiles = flag.Int("gap-files", 2000, "files on the cartridge in the gaps part (every fourth is recalled)")
	prefault = flag.Bool("prefault", false, "touch the cartridges' memory before each timed migration and free it as the drive goes (see touch)")
	rOut     = flag.String("out", "", "directory for the recall and mixed parts' traces and studies (default under --data)")
	goFile   = flag.String("go", "", "mixed part: after writing the prediction, wait until this file exists before the run; recall part: FILE.dN before the runs on N drives")
	logFile  = flag.String("log", "", "write the server's log (info) to this file")
)

func main() {
	flag.Parse()
	if *dataDir == "" {
		fmt.Fprintln(os.Stderr, "hsmbench: --data is required")
		os.Exit(2)
	}
	g, err := tape.LookupGeneration(*genName)
	if err != nil {
		fail(err)
	}
	fmt.Printf("# hsmbench %s, %s drives, time scale %s, native rate %.0f MB/s per drive, backhitch %v\n\n", time.Now().UTC().Format(time.RFC3339), g.Name, *scale, g.Rate/1e6, g.Backhitch)
	want := func(p string) bool {
		for _, q := range splitComma(*parts) {
			if q == p {
				return true
			}
		}
		return false
	}
	if want("large") || want("small") || want("scaling") {
		fmt.Println("| run | drives | files | bytes | wall s | MB/s | model bound MB/s | ratio | ratio without positioning |")
		fmt.Println("|---|---|---|---|---|---|---|---|---|")
	}
	if want("large") {
		// One rig for every size: one mount.
		r := newRig(g, 1)
		for _, n := range gibs() {
			row("1 GiB files", 1, n, r.migrate(n, 1<<30))
		}
		r.stop()
	}
	if want("small") {
		run("1 MiB files (aggregated)", g, 1, 2048, 1<<20)
	}
	if want("queue") {
		queue(*queueN)
	}
	if want("tapesmall") {
		tapeSmall(g)
	}
	if want("gaps") {
		gaps(g, *gapFiles, 1<<20)
	}
	if want("recall") {
		recall(g, counts("--recall-drives", *rDrives), *rCarts, *rPicks, *rReps, *rOut, *goFile)
	}
	if want("mixed") {
		mixed(g, *rOut, *goFile)
	}
	if want("scaling") {
		for _, n := range []int{1, 2, 4} {
			run(fmt.Sprintf("1 GiB files, %d drives", n), g, n, n*gibs()[0], 1<<30)
		}
	}
}

// run migrates files×size bytes on drives drives and prints a table row.
func run(name string, g tape.Generation, drives, files int, size int64) {
	row(name, drives, files, migrateOnce(g, drives, files, size))
}

// gibs is --gib's list.
func gibs() []int { return counts("--gib", *gib) }

// counts parses a flag's comma-separated list of positive counts.
func counts(name, list string) []int {
	var ns []int
	for _, f := range splitComma(list) {
		var n int
		if _, err := fmt.Sscan(f, &n); err != nil || n < 1 {
			fail(fmt.Errorf("%s %q: want positive counts like 1,2,4", name, list))
		}
		ns = append(ns, n)
	}
	return ns
}

// row prints one migration's table row.
func row(name string, drives, files int, m migration) {
	fmt.Printf("| %s | %d | %d | %d | %.1f | %.0f | %.0f | %.2f | %.2f |\n", name, drives, files, m.bytes, m.wall, m.rate()/1e6, m.bound/1e6, m.rate()/m.bound,
		float64(m.bytes)/(m.wall-m.positioning)/m.bound)
}

// migration is one timed migration: its bytes, wall seconds, the wall
// seconds of the modelled positioning per drive, and the library model's
// bound (B/s).
type migration struct {
	bytes                    int64
	wall, positioning, bound float64
}

func (m migration) rate() float64 { return float64(m.bytes) / m.wall }

// rig is a fresh server whose drives each have a cartridge mounted and
// positioned, for timed migrations one after another (mounts are not what
// is measured, and at real time they are most of a run's wall time).
type rig struct {
	g      tape.Generation
	drives int
	s      *server.Server
	c      *client.Client
	stop   func()
	runs   int // migrations so far, for names of their own
}

func newRig(g tape.Generation, drives int) *rig {
	ctx := context.Background()
	s, c, stop := start(func(cfg *config.Config) {
		cfg.Library = config.Library{Generation: g.Name, Drives: drives, Cartridges: drives + 2, TimeScale: *scale, Path: *tapeDir}
		cfg.HSM.MigrateDrives = drives
		cfg.Devices = nil
		for i := 0; i < 4; i++ {
			cfg.Devices = append(cfg.Devices, config.Device{ID: fmt.Sprintf("disk%d", i)})
		}
	})
	// Warm-up: one small file per drive, so every drive has a cartridge
	// mounted and positioned.
	putN(ctx, c, "warm", drives, 1<<20)
	if _, err := c.Migrate(ctx); err != nil {
		fail(err)
	}
	used := map[string]bool{}
	for _, ci := range s.Library.Cartridges() {
		used[ci.Volume] = ci.Drive != "" || ci.Used > 0
	}
	for _, d := range s.Library.Drives() {
		for _, ci := range s.Library.Cartridges() {
			if d.Volume != "" || used[ci.Volume] {
				continue
			}
			if err := s.Library.Mount(ctx, d.ID, ci.Volume); err != nil {
				fail(err)
			}
			used[ci.Volume] = true
			break
		}
	}
	return &rig{g: g, drives: drives, s: s, c: c, stop: stop}
}

// migrate writes files×size bytes and times their migration.
func (r *rig) migrate(files int, size int64) migration {
	ctx := context.Background()
	r.runs++
	putN(ctx, r.c, fmt.Sprintf("f%d-", r.runs), files, size)
	k := 1.0
	if f, ok := scaleFactor(*scale); ok {
		k = f
	}
	done := func() {}
	if *prefault {
		done = touch(int64(files)*size, float64(r.drives)*r.g.Rate*k)
	}
	before := r.s.Library.Stats()
	stopProf := profile()
	t0 := time.Now()
	res, err := r.c.Migrate(ctx)
	stopProf()
	done()
	if err != nil {
		fail(err)
	}
	wall := time.Since(t0).Seconds()
	st := r.s.Library.Stats()
	if want := int64(files) * size; res.Bytes != want {
		fail(fmt.Errorf("migrated %d bytes, want %d", res.Bytes, want))
	}
	return migration{bytes: res.Bytes, wall: wall, bound: float64(r.drives) * r.g.Rate * k,
		positioning: (st.Positioning - before.Positioning).Seconds() / k / float64(r.drives)}
}

// migrateOnce times one migration on a rig of its own.
func migrateOnce(g tape.Generation, drives, files int, size int64) migration {
	r := newRig(g, drives)
	defer r.stop()
	return r.migrate(files, size)
}

var profiles int

// keep appends one run to --runs, as a JSON line.
func keep(run map[string]any) {
	if *runsOut == "" {
		return
	}
	f, err := os.OpenFile(*runsOut, os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o644)
	if err != nil {
		fail(err)
	}
	defer f.Close()
	b, _ := json.Marshal(run)
	if _, err := f.Write(append(b, '\n')); err != nil {
		fail(err)
	}
}

// profile starts a CPU profile of the next timed step when --cpuprofile
// asks for one, and returns what stops it.
func profile() func() {
	if *cpuProf == "" {
		return func() {}
	}
	profiles++
	f, err := os.Create(fmt.Sprintf("%s.%d", *cpuProf, profiles))
	if err != nil {
		fail(err)
	}
	if err := pprof.StartCPUProfile(f); err != nil {
		fail(err)
	}
	return func() { pprof.StopCPUProfile(); f.Close() }
}

// touch writes n bytes to a file beside the cartridges and gives its
// memory back while the migration runs, at rate bytes a second and a
// little ahead of it, and returns what removes the rest. On a virtual
// machine whose host backs guest memory on first touch (and takes back
// what stays free a few seconds), new tmpfs pages cost the host's
// allocation, ~0.4 GB/s here against 3 GB/s warm: the stand-in for the
// tape, not the drive or Strata, would bound the run. Freed all at once,
// the pages a long migration reaches last have gone back to the host by
// then; freed as the drive goes, each is warm when the tape takes it.
func touch(n int64, rate float64) (done func()) {
	p := filepath.Join(*tapeDir, "prefault")
	f, err := os.Create(p)
	if err != nil {
		fail(err)
	}
	buf := make([]byte, 4<<20)
	for left := n; left > 0; left -= int64(len(buf)) {
		if _, err := f.Write(buf[:min(left, int64(len(buf)))]); err != nil {
			fail(err)
		}
	}
	stop, stopped := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(stopped)
		const step, lead = 64 << 20, 256 << 20 // freed a step at a time, this far ahead
		t0 := time.Now()
		for size := n; size > 0; {
			due := float64(n-size+step-lead) / rate
			select {
			case <-stop:
				return
			case <-time.After(time.Duration(due*float64(time.Second)) - time.Since(t0)):
			}
			size = max(0, size-step)
			f.Truncate(size)
		}
	}()
	return func() {
		close(stop)
		<-stopped
		f.Close()
		os.Remove(p)
	}
}

// putN writes n files of size bytes of pseudo-random data, 16 at a time.
func putN(ctx context.Context, c *client.Client, prefix string, n int, size int64) {
	var wg sync.WaitGroup
	sem := make(chan struct{}, 16)
	errs := make(chan error, n)
	for i := 0; i < n; i++ {
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer wg.Done()
			defer func() { <-sem }()
			if _, err := c.Put(ctx, fmt.Sprintf("/%s%06d", prefix, i), gen(uint64(i)), size, client.PutOptions{COS: "single", NoFixity: true}); err != nil {
				errs <- err
			}
		}()
	}
	wg.Wait()
	close(errs)
	if err := <-errs; err != nil {
		fail(err)
	}
}

// gen is a file's content: pseudo-random bytes that are a function of the
// seed and the offset, so any range can be read in any order.
type gen uint64

func (g gen) ReadAt(p []byte, off int64) (int, error) {
	for i := range p {
		x := uint64(g)*0x9e3779b97f4a7c15 + uint64(off+int64(i))/8*0xbf58476d1ce4e5b9
		x ^= x >> 31
		p[i] = byte(x >> (8 * ((off + int64(i)) % 8)))
	}
	return len(p), nil
}

func scaleFactor(s string) (float64, bool) {
	var k float64
	if _, err := fmt.Sscanf(s, "x%g", &k); err == nil && k >= 1 {
		return k, true
	}
	return 1, s == "real"
}

func splitComma(s string) []string {
	var out []string
	start := 0
	for i := 0; i <= len(s); i++ {
		if i == len(s) || s[i] == ',' {
			if i > start {
				out = append(out, s[start:i])
			}
			start = i + 1
		}
	}
	return out
}

func fail(err error) {
	fmt.Fprintln(os.Stderr, "hsmbench:", err)
	os.Exit(1)
}

// queue stages n files that are on tape only, 1,000 paths per request, with
// mount rules that hold the queue (nothing is recalled meanwhile), and
// reports the rate of staging and the time of one status query and one
// library listing with all n queued.
func queue(n int) {
	ctx := context.Background()
	_, c, stop := start(func(cfg *config.Config) {
		cfg.Library = config.Library{Generation: "LTO-9", Drives: 4, Cartridges: 8, TimeScale: "instant", Path: *tapeDir}
		cfg.HSM.RecallMinFiles, cfg.HSM.RecallMinBytes, cfg.HSM.RecallMaxAge = 1<<30, 1<<50, "1000h"
		cfg.Catalog.Sync = "normal"
	})
	defer stop()
	t0 := time.Now()
	paths := onTapeOnly(ctx, c, "q", n, 4096)
	setup := time.Since(t0)
	t1 := time.Now()
	for i := 0; i < n; i += 1000 {
		if _, err := c.Stage(ctx, paths[i:min(i+1000, n)], 0); err != nil {
			fail(err)
		}
	}
	stage := time.Since(t1)
	t2 := time.Now()
	st, err := c.StageStatus(ctx, paths[n-1])
	if err != nil || st.State != "queued" {
		fail(fmt.Errorf("status of the last staged file: %+v, %v", st, err))
	}
	status := time.Since(t2)
	t3 := time.Now()
	lib, err := c.Library(ctx)
	if err != nil {
		fail(err)
	}
	list := time.Since(t3)
	queued := 0
	for _, q := range lib.Queue {
		queued += q.Files
	}
	fmt.Printf("\n### Recall queue of %d files (4 KiB each, on tape only; setup %.0f s)\n\n", n, setup.Seconds())
	fmt.Println("| step | time | rate |")
	fmt.Println("|---|---|---|")
	fmt.Printf("| stage %d files, 1,000 paths per request | %.2f s | %.0f requests/s |\n", n, stage.Seconds(), float64(n)/stage.Seconds())
	fmt.Printf("| status of the last one (position %d of %d queued) | %.1f ms | |\n", st.Position, queued, status.Seconds()*1e3)
	fmt.Printf("| admin queue (library listing) | %.1f ms | |\n", list.Seconds()*1e3)
}

// onTapeOnly writes n files of size bytes, migrates them and purges their
// disk copies, and returns their paths.
func onTapeOnly(ctx context.Context, c *client.Client, prefix string, n int, size int64) []string {
	putN(ctx, c, prefix, n, size)
	if _, err := c.Migrate(ctx); err != nil {
		fail(err)
	}
	paths := make([]string, n)
	for i := range paths {
		paths[i] = fmt.Sprintf("/%s%06d", prefix, i)
	}
	for i := 0; i < n; i += 1000 {
		if _, err := c.Purge(ctx, paths[i:min(i+1000, n)]...); err != nil {
			fail(err)
		}
	}
	return paths
}

// start runs a server in-process on fresh directories, configured by edit,
// with the policies left to the benchmark, and a client for it.
func start(edit func(*config.Config)) (*server.Server, *client.Client, func()) {
	data := filepath.Join(*dataDir, "hsmbench")
	os.RemoveAll(data)
	os.RemoveAll(*tapeDir)
	cfg := config.Default()
	cfg.DataDir = data
	cfg.Listen, cfg.Mover.Listen = "127.0.0.1:0", "127.0.0.1:0"
	cfg.HSM.MigrateEvery, cfg.HSM.PurgeEvery, cfg.HSM.MigrateAfter = "1h", "1h", "1h"
	edit(&cfg)
	if err := cfg.Complete(); err != nil {
		fail(err)
	}
	log := slog.New(slog.DiscardHandler)
	if *logFile != "" {
		f, err := os.Create(*logFile)
		if err != nil {
			fail(err)
		}
		log = slog.New(slog.NewTextHandler(f, nil))
	}
	s, err := server.Start(context.Background(), cfg, log)
	if err != nil {
		fail(err)
	}
	c, err := client.New(s.URL())
	if err != nil {
		fail(err)
	}
	return s, c, func() {
		c.Close()
		s.Close()
		os.RemoveAll(data)
		os.RemoveAll(*tapeDir)
	}
}
