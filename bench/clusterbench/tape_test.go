package clusterbench

import (
	"crypto/rand"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/strata-storage/strata/internal/tape"
	"github.com/strata-storage/strata/internal/testutil/cluster"
)

// tapeCell is one migration measured.
type tapeCell struct {
	Mode      string  `json:"mode"` // "core": the drive in the core's process; "tape-server": on a host of its own
	Gen       string  `json:"generation"`
	MB        int     `json:"mb"`
	Drive     float64 `json:"drive_mb_s"`   // native rate
	Bound     float64 `json:"bound_mb_s"`   // the drive's own time for the job: the data at native rate and one synchronising flush
	Migrate   float64 `json:"migrate_mb_s"` // the strata migrate command, end to end
	Ratio     float64 `json:"migrate_per_drive"`
	OfBound   float64 `json:"migrate_per_bound"`
	CoreBytes int64   `json:"core_link_bytes"` // what the core's link carried to it during the migration
}

// TestTapeServer migrates TAPE_MB (default 2048) MiB, one file, on an
// emulated drive of each of TAPE_GEN (default LTO-7 LTO-9) in real time, the drive
// (a) in the core's process, the movers on another host, and (b) on a
// tape server's host; against the drive's native rate and against the
// drive's own time for the job (the data at native rate and the one
// synchronising flush that ends it, as the emulator models them). A
// small file is
// migrated first so that the measured migration finds its cartridge
// mounted. Cells go to TAPE_OUT as JSON lines.
func TestTapeServer(t *testing.T) {
	if bin == "" {
		t.Skip("a benchmark: bench/cluster.sh runs it (STRATA_BENCH_CLUSTER=1)")
	}
	mb, _ := strconv.Atoi(env("TAPE_MB", "2048"))
	out, err := os.Create(env("TAPE_OUT", filepath.Join(t.TempDir(), "tape.json")))
	if err != nil {
		t.Fatal(err)
	}
	defer out.Close()
	fmt.Printf("| drive | where | MiB | native MB/s | drive bound MB/s | migrate MB/s | ÷ native | ÷ bound | bytes to the core's host |\n|---|---|---|---|---|---|---|---|---|\n")
	for _, gen := range strings.Fields(env("TAPE_GEN", "LTO-7 LTO-9")) {
		g, err := tape.LookupGeneration(gen)
		if err != nil {
			t.Fatal(err)
		}
		for _, mode := range []string{"core", "tape-server"} {
			tapeCell1(t, out, g, mode, mb)
		}
	}
}

// tapeCell1 measures one cell and writes it to out.
func tapeCell1(t *testing.T, out *os.File, g tape.Generation, mode string, mb int) {
	gen := g.Name
	t.Run(gen+"/"+mode, func(t *testing.T) {
		o := cluster.Options{Movers: 1, Generation: gen, TimeScale: "real"}
		if mode == "tape-server" {
			o.TapeServers = 1
		}
		c := cluster.New(t, bin, o)
		for _, f := range []struct {
			name string
			size int
		}{{"warm", 1 << 20}, {"big", mb << 20}} {
			b := make([]byte, f.size)
			rand.Read(b)
			src := filepath.Join(c.Dir, f.name)
			if err := os.WriteFile(src, b, 0o644); err != nil {
				t.Fatal(err)
			}
			c.OK("put", "--stripes", "1", src, "/"+f.name)
			os.Remove(src)
		}
		c.OK("migrate", "/warm") // mounts a cartridge
		// An idle drive has backed up from the warm-up's synchronising
		// flush by the time a migration comes.
		time.Sleep(g.Backhitch)
		before := c.Cores[0].Host.Received()
		start := time.Now()
		c.OK("migrate", "/big")
		took := time.Since(start).Seconds()
		k := tapeCell{Mode: mode, Gen: gen, MB: mb, Drive: g.Rate / 1e6, Migrate: float64(mb<<20) / 1e6 / took,
			CoreBytes: c.Cores[0].Host.Received() - before}
		bytes := float64(mb << 20)
		k.Bound = bytes / 1e6 / (bytes / g.Rate)
		k.Ratio, k.OfBound = k.Migrate/k.Drive, k.Migrate/k.Bound
		fmt.Printf("| %s | %s | %d | %.0f | %.1f | %.1f | %.3f | %.3f | %d MB |\n", gen, mode, mb, k.Drive, k.Bound, k.Migrate, k.Ratio, k.OfBound, k.CoreBytes/1e6)
		line, _ := json.Marshal(k)
		fmt.Fprintln(out, string(line))
	})
}
