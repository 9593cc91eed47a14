package sim

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/strata-storage/strata/internal/tape"
)

func migrateRun(t *testing.T, src string) *MigrateResult {
	t.Helper()
	s, err := ParseStudy([]byte(src))
	if err != nil {
		t.Fatal(err)
	}
	r := run(t, s.Config)
	if r.Migrate == nil {
		t.Fatal("no migration result")
	}
	return r.Migrate
}

// Files waiting when the policy first runs go out in one pass on one
// drive: a mount, streaming at the native rate, a flush every 16 GiB and
// one at the end, and a backhitch before each write that follows a flush
// — exactly package tape's figures.
func TestMigrateOnePassCostsTheModel(t *testing.T) {
	g := tape.Generations["LTO-9"]
	r := migrateRun(t, `[tape]
drives = 1
migrate_drives = 1
migrate_after = "0s"
migrate_every = "30s"
[workload]
op = "migrate"
files = 40
file_size = "1GB"
`)
	want := 30*time.Second + g.MountTime() + g.TransferTime(40e9) + 2*g.Backhitch
	if got := time.Duration(r.Seconds * 1e9); (got - want).Abs() > time.Millisecond {
		t.Errorf("one pass took %v, the model says %v", got, want)
	}
	if r.Passes != 1 || r.Mounts != 1 || r.Flushes != 3 || r.TapeFiles != 40 {
		t.Errorf("passes %d mounts %d flushes %d tape files %d, want 1 1 3 40", r.Passes, r.Mounts, r.Flushes, r.TapeFiles)
	}
}

// Small files are aggregated into tape files of about `aggregate` bytes;
// a full cartridge is flushed, dismounted and the next one mounted; every
// file waits at least migrate_after; two streams move the same data in
// about half the streaming time.
func TestMigrateAggregatesChangesCartridgesAndScales(t *testing.T) {
	src := `[tape]
drives = 2
cartridges = 10
capacity = "100GB"
migrate_drives = 1
migrate_after = "10m"
aggregate = "1GB"
flush_bytes = "16GiB"
[workload]
op = "migrate"
files = 2500
file_size = "100MB"
`
	one := migrateRun(t, src)
	if one.TapeFiles != 250 {
		t.Errorf("%d tape files from 2,500 files of 100 MB in 1 GB aggregates, want 250", one.TapeFiles)
	}
	if one.Cartridges != 3 || one.Mounts != 3 {
		t.Errorf("250 GB on 100 GB cartridges: %d cartridges, %d mounts, want 3 and 3", one.Cartridges, one.Mounts)
	}
	if one.Mean < 600 {
		t.Errorf("mean time to tape %.0f s, below migrate_after", one.Mean)
	}
	s, _ := ParseStudy([]byte(src))
	c, err := s.With(map[string]string{"tape.migrate_drives": "2"})
	if err != nil {
		t.Fatal(err)
	}
	r := run(t, c).Migrate
	if r.MBps < 1.7*one.MBps || r.MBps > 2.05*one.MBps {
		t.Errorf("two streams %.0f MB/s, one %.0f MB/s", r.MBps, one.MBps)
	}
}

// twoDriveMigration is 20 GB migrated at once on two drives; %s takes
// the drive's generation and figures.
const twoDriveMigration = `[tape]
drives = 2
migrate_drives = 2
migrate_after = "0s"
migrate_every = "30s"
%s
[workload]
op = "migrate"
files = 20
file_size = "1GB"
`

// Every figure of a drive can be set in a study: LTO-9 given all of
// LTO-1's figures in [tape.drive] migrates exactly as the LTO-1 preset,
// which streams at its 15 MB/s (CeMSS's drives, seed 000).
func TestDriveOverrides(t *testing.T) {
	study := twoDriveMigration
	g := tape.Generations["LTO-1"]
	preset := migrateRun(t, fmt.Sprintf(study, `generation = "LTO-1"`))
	over := migrateRun(t, fmt.Sprintf(study, fmt.Sprintf(`generation = "LTO-9"
[tape.drive]
rate = "%dB/s"
capacity = "%dB"
length_m = %g
wraps = %d
load = %q
unload = %q
avg_locate = %q
locate_start = %q
wrap_change = %q
backhitch = %q
exchange = %q`, int64(g.Rate), g.Capacity, g.Length, g.Wraps, g.Load, g.Unload, g.AvgLocate, g.LocateStart, g.WrapChange, g.Backhitch, g.Exchange)))
	if preset.Seconds != over.Seconds {
		t.Errorf("LTO-1 preset %v s, LTO-9 with LTO-1's figures %v s", preset.Seconds, over.Seconds)
	}
	// two drives at 15 MB/s: 20 GB take 667 s of streaming, plus a mount
	// and the flushes
	if stream := 20e9 / (2 * g.Rate); preset.Seconds < stream || preset.Seconds > stream+120 {
		t.Errorf("20 GB on two LTO-1 drives in %.0f s; streaming alone takes %.0f s", preset.Seconds, stream)
	}
}

// A file of at least stripe_min whose disk copy is striped goes to tape
// as strata serve writes it: its stripes dealt round to the streams, each
// part a tape file on a cartridge of its own, written at once — a 400 GB
// file on four drives in about a quarter of the time one drive takes. A
// smaller file, or one not striped on disk, is written whole.
func TestMigrateStripedOnTape(t *testing.T) {
	g := tape.Generations["LTO-9"]
	study := func(stripe int, stripeMin string) string {
		return fmt.Sprintf(`[tape]
drives = 4
cartridges = 8
migrate_drives = 4
migrate_after = "0s"
migrate_every = "30s"
stripe_min = %q
[workload]
op = "migrate"
files = 1
file_size = "400GB"
stripe = %d
`, stripeMin, stripe)
	}
	whole := migrateRun(t, study(1, "16GiB"))
	if whole.TapeFiles != 1 || whole.Cartridges != 1 {
		t.Fatalf("not striped on disk: %d tape files on %d cartridges, want 1 on 1", whole.TapeFiles, whole.Cartridges)
	}
	for _, tc := range []struct {
		stripe, parts int
		largest       int64 // bytes of the largest part
	}{{4, 4, 100e9}, {3, 3, 133333333333}, {6, 4, 133333333333}, {8, 4, 100e9}} {
		r := migrateRun(t, study(tc.stripe, "16GiB"))
		if r.TapeFiles != tc.parts || r.Cartridges != tc.parts || r.Files != 1 || r.Bytes != 400e9 {
			t.Errorf("stripe %d: %d tape files on %d cartridges (%d files, %d bytes), want %d on %d", tc.stripe, r.TapeFiles, r.Cartridges, r.Files, r.Bytes, tc.parts, tc.parts)
		}
		// the largest part streams after its drive's mount, which
		// waits for the robot's exchanges before it
		low := 30*time.Second + g.MountTime() + g.TransferTime(tc.largest)
		high := low + time.Duration(tc.parts)*g.Exchange + 2*g.Backhitch + 2*time.Second
		if got := time.Duration(r.Seconds * 1e9); got < low || got > high {
			t.Errorf("stripe %d: %v to tape, want %v … %v (whole: %.0f s)", tc.stripe, got, low, high, whole.Seconds)
		}
	}
	if r := migrateRun(t, study(4, "500GB")); r.TapeFiles != 1 {
		t.Errorf("a file below stripe_min: %d tape files, want 1", r.TapeFiles)
	}
}

// Files that fit the library in bytes but not cartridge by cartridge (two
// 6 GB files never share a 10 GB cartridge) end the study with one line
// that says so, not a hang or a silent shortfall.
func TestMigrateOutOfRoomSaysSo(t *testing.T) {
	s, err := ParseStudy([]byte(`[tape]
drives = 1
cartridges = 2
capacity = "10GB"
migrate_after = "0s"
[workload]
op = "migrate"
files = 3
file_size = "6GB"
`))
	if err != nil {
		t.Fatal(err)
	}
	_, err = Run(s.Config, 1)
	if err == nil || !strings.Contains(err.Error(), "no cartridge had room") {
		t.Fatalf("got %v, want the study to say no cartridge had room", err)
	}
}
