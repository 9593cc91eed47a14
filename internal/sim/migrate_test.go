package sim

import (
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
// one at the end — exactly package tape's figures.
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
	want := 30*time.Second + g.MountTime() + g.TransferTime(40e9) + 3*g.Flush
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
