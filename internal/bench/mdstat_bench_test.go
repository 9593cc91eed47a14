package bench

import (
	"context"
	"os"
	"testing"
	"time"
)

// BenchmarkStatPhase runs md-rates' stat phase (2 workers × 20,000 files)
// through the harness on the directory in STRATA_BENCH_DIR (default a
// temporary directory), for profiling the harness against mdbase.c:
//
//	STRATA_BENCH_DIR=/some/ext4/dir go test -run XXX -bench StatPhase -cpuprofile cpu.out ./internal/bench
func BenchmarkStatPhase(b *testing.B) {
	dir := os.Getenv("STRATA_BENCH_DIR")
	if dir == "" {
		dir = b.TempDir()
	}
	ctx := context.Background()
	t, err := openPosix(dir, Options{})
	if err != nil {
		b.Fatal(err)
	}
	r := newRun(ctx, Config{Workers: 2}, Scales["medium"], t, Env{}, "statphase")
	t.RemoveAll(ctx, r.root)
	if err := t.Mkdir(ctx, r.root); err != nil {
		b.Fatal(err)
	}
	defer t.RemoveAll(ctx, r.root)
	dirs, err := r.mdDirs(r.root, 2, false)
	if err != nil {
		b.Fatal(err)
	}
	lists := fileLists(dirs, r.S.Files)
	if ph := r.runPhase(r.mdPhase("create", lists, r.touchOp(nil))); ph.Error != "" {
		b.Fatal(ph.Error)
	}
	if d, err := time.ParseDuration(os.Getenv("STRATA_BENCH_SETTLE")); err == nil {
		time.Sleep(d) // let the file system finish what the creates left
	}
	b.ResetTimer()
	best := 0.0
	for i := 0; i < b.N; i++ {
		ph := r.runPhase(r.mdPhase("stat", lists, r.statOp))
		best = max(best, ph.OpsPerSec)
		if os.Getenv("STRATA_BENCH_V") != "" {
			b.Logf("stat %d: %.0f/s over %.1f ms", i, ph.OpsPerSec, ph.Seconds*1e3)
		}
	}
	b.ReportMetric(best, "best-stats/s")
}
