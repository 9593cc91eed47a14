package sim

import (
	"bytes"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/strata-storage/strata/internal/tape"
)

var update = flag.Bool("update", false, "rewrite the golden files in testdata")

// TestPresetsGolden runs the same migration and recall study on every
// drive preset and compares the figures with testdata/presets.golden, so a
// change to a preset's numbers or to the tape model shows up as a diff a
// reviewer reads (go test ./internal/sim -run TestPresetsGolden -update
// rewrites it).
func TestPresetsGolden(t *testing.T) {
	var out bytes.Buffer
	fmt.Fprintf(&out, "%-8s %12s %10s %8s | %10s %10s %8s %7s %8s\n", "preset", "migrate s", "MB/s", "mounts", "recall s", "mean wait", "p95", "mounts", "locates")
	for _, name := range tape.GenerationNames() {
		mig := migrateRun(t, fmt.Sprintf(twoDriveMigration, fmt.Sprintf("generation = %q", name)))
		s, err := ParseStudy([]byte(fmt.Sprintf(`[tape]
generation = %q
drives = 2
cartridges = 20
fill = 0.5
recall_max_age = "5m"
[workload]
op = "recall"
files = 60
file_size = "2GB"
arrival_rate = 0.1
spread = 6
`, name)))
		if err != nil {
			t.Fatal(err)
		}
		rec := run(t, s.Config).Recall
		if rec == nil {
			t.Fatalf("%s: no recall result", name)
		}
		fmt.Fprintf(&out, "%-8s %12.1f %10.1f %8d | %10.1f %10.1f %8.1f %7d %8d\n", name, mig.Seconds, mig.MBps, mig.Mounts,
			rec.Seconds, rec.Mean, rec.P95, rec.Mounts, rec.Locates)
	}
	golden := filepath.Join("testdata", "presets.golden")
	if *update {
		if err := os.WriteFile(golden, out.Bytes(), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(golden)
	if err != nil {
		t.Fatalf("%v (run with -update to create it)", err)
	}
	if !bytes.Equal(out.Bytes(), want) {
		t.Errorf("presets changed:\n--- got\n%s--- want (%s)\n%s", out.Bytes(), golden, want)
	}
}
