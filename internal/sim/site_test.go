package sim

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/strata-storage/strata/internal/des"
)

// siteStudy is a day of a small site: 2 GB files at 0.5/s on a 3 GB/s
// disk tier, 4 LTO-9 drives (3 migrating), 10 % of the archive recalled
// per month, with the extra lines appended to [site], [tape] and
// [workload] in that order.
func siteStudy(t *testing.T, site, tapeLines, work string) *Result {
	t.Helper()
	if !strings.Contains(tapeLines, "migrate_drives") {
		tapeLines = "migrate_drives = 3\n" + tapeLines
	}
	c, err := Parse([]byte(`
[site]
arrays = 2
array_rate = "1.5GB/s"
` + site + `
[tape]
generation = "LTO-9"
drives = 4
cartridges = 40
` + tapeLines + `
[workload]
op = "site"
duration = "24h"
arrival_rate = 0.5
file_size = "2GB"
size_dist = "exponential"
streams = 4
recall_per_month = 0.1
` + work))
	if err != nil {
		t.Fatal(err)
	}
	return run(t, c)
}

// Every file that arrives reaches the disk tier and then tape, once; the
// migration drives deliver no more than their bound; recalls and
// migration share the drives without holding one twice.
func TestSiteConservation(t *testing.T) {
	r := siteStudy(t, "", "", "")
	x := r.Site
	t.Logf("%d files, %d bytes; to tape mean %.0f s; %d recalls; drives %.3f migrating, %.3f recalling; %d events",
		x.Files, x.Bytes, x.Migrate.Mean, x.Recall.Files, x.Migrating, x.Recalling, r.Events)
	if x.Files < 40000 || x.Files > 46000 || x.Migrate.Files != x.Files || x.Migrate.Bytes != x.Bytes {
		t.Errorf("%d files arrived (about 43,200 expected), %d migrated; %d bytes, %d migrated", x.Files, x.Migrate.Files, x.Bytes, x.Migrate.Bytes)
	}
	if x.Recall == nil || x.Recall.Files == 0 || x.Recall.Lost != 0 {
		t.Errorf("recalls: %+v", x.Recall)
	}
	if x.Migrating <= 0 || x.Recalling <= 0 || x.Migrating+x.Recalling > 1 {
		t.Errorf("drives %.3f migrating, %.3f recalling", x.Migrating, x.Recalling)
	}
	if x.Migrate.MBps > 3*400*1.0001 || x.BacklogPeak <= 0 || x.DiskBusy <= 0 || x.DiskBusy > 1 {
		t.Errorf("migration %.1f MB/s (3 drives: 1,200), backlog peak %d, disk %.3f busy", x.Migrate.MBps, x.BacklogPeak, x.DiskBusy)
	}
	if x.OfferedMBps < 0.9*r.Bound.MBps || x.OfferedMBps > 1.1*r.Bound.MBps || r.Bound.Binding != "λ·s" {
		t.Errorf("offered %.1f MB/s against a bound of %.1f (%s)", x.OfferedMBps, r.Bound.MBps, r.Bound.Binding)
	}
}

// Fewer migration drives than the ingest needs: the backlog on disk and
// the time to tape grow, which is what a site buys drives against.
func TestSiteDrivesBound(t *testing.T) {
	enough := siteStudy(t, "", "", "").Site
	short := siteStudy(t, "", "migrate_drives = 2", "").Site
	t.Logf("3 migration drives: backlog %d, to tape %.0f s; 2: %d, %.0f s", enough.BacklogPeak, enough.Migrate.Mean, short.BacklogPeak, short.Migrate.Mean)
	if short.BacklogPeak <= 2*enough.BacklogPeak || short.Migrate.Mean <= 2*enough.Migrate.Mean {
		t.Errorf("2 drives for 1 GB/s of ingest: backlog %d, to tape %.0f s; 3 drives: %d, %.0f s",
			short.BacklogPeak, short.Migrate.Mean, enough.BacklogPeak, enough.Migrate.Mean)
	}
}

// An array rebuilding takes its share of the disk tier: data taking in
// the window waits longer to reach disk than without the rebuild, and the
// rest of the day is untouched.
func TestSiteArrayRebuild(t *testing.T) {
	users := "read_rate = \"1.2GB/s\"" // the tier is nearly full without the rebuild
	base := siteStudy(t, "", "", users).Site
	r := siteStudy(t, "rebuild_at = \"6h\"\nrebuild_for = \"6h\"\nrebuild_share = 0.2", "", users).Site
	t.Logf("ingest wait mean %.2f s; with a rebuild %.2f s overall, %.2f s in its window", base.IngestMean, r.IngestMean, r.RebuildMean)
	if r.RebuildMean <= 2*base.IngestMean || r.IngestMean <= base.IngestMean || r.Files != base.Files {
		t.Errorf("rebuild: wait %.2f s in the window, %.2f overall; without %.2f", r.RebuildMean, r.IngestMean, base.IngestMean)
	}
}

func TestSiteErrors(t *testing.T) {
	for _, c := range []struct{ toml, want string }{
		{"[workload]\nop = \"site\"\narrival_rate = 1", "workload.duration"},
		{"[workload]\nop = \"site\"\nduration = \"1h\"", "workload.arrival_rate"},
		{"[workload]\nop = \"site\"\nduration = \"1h\"\narrival_rate = 1\ningest_on = \"2h\"", "workload.ingest_off"},
		{"[workload]\nop = \"site\"\nduration = \"1h\"\narrival_rate = 1\nrecall_per_month = 2", "recall_per_month"},
		{"[workload]\nsize_dist = \"pareto\"", "workload.size_dist"},
		{"[workload]\nop = \"site\"\narrivals = \"in.csv\"\narrival_rate = 1", "workload.arrivals"},
		{"[workload]\nop = \"site\"\nduration = \"1h\"\narrival_rate = 1\ntrace = \"r.csv\"\nrecall_per_month = 0.1", "workload.trace"},
		{"[tape]\ncapacity = \"1TB\"\n[tape.written]\nA = \"2TB\"", "tape.written"},
		{"[tape]\ncartridges = 1\n[tape.written]\nA = \"1GB\"\nB = \"1GB\"", "tape.written"},
		{"[tape]\ndrive_poll = \"often\"", "tape.drive_poll"},
		{"[site]\narrays = 2", "site.array_rate"},
		{"[site]\nrebuild_at = \"1h\"", "site.arrays"},
		{"[site]\narrays = 2\narray_rate = \"1GB/s\"\nrebuild_at = \"1h\"\nrebuild_for = \"1h\"\nrebuild_share = 2", "site.rebuild_share"},
	} {
		_, err := Parse([]byte(c.toml))
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%q: %v, want an error naming %s", c.toml, err, c.want)
		}
	}
}

// replayStudy writes a site study replaying arrivals and recalls (either
// may be nil) to a directory and loads it. tapeLines go to [tape].
func replayStudy(t *testing.T, arr []Arrival, reqs []RecallRequest, tapeLines string) *Config {
	t.Helper()
	dir := t.TempDir()
	var work strings.Builder
	if arr != nil {
		var b bytes.Buffer
		if err := WriteArrivals(&b, arr); err != nil {
			t.Fatal(err)
		}
		os.WriteFile(filepath.Join(dir, "in.csv"), b.Bytes(), 0o644)
		work.WriteString("arrivals = \"in.csv\"\n")
	}
	if reqs != nil {
		var b bytes.Buffer
		if err := WriteTrace(&b, reqs); err != nil {
			t.Fatal(err)
		}
		os.WriteFile(filepath.Join(dir, "recalls.csv"), b.Bytes(), 0o644)
		work.WriteString("trace = \"recalls.csv\"\n")
	}
	if !strings.Contains(tapeLines, "drives =") {
		tapeLines = "drives = 1\n" + tapeLines
	}
	if !strings.Contains(tapeLines, "cartridges =") {
		tapeLines = "cartridges = 3\n" + tapeLines
	}
	study := `name = "replay"
[tape]
generation = "LTO-9"
capacity = "1TB"
buffer_rate = "2GB/s"
migrate_every = "60s"
migrate_after = "0s"
aggregate = "1GB"
recall_max_age = "30s"
recall_min_files = 1000
` + tapeLines + `
[tape.written]
FULL01 = "1TB"
[workload]
op = "site"
streams = 2
` + work.String()
	p := filepath.Join(dir, "study.toml")
	os.WriteFile(p, []byte(study), 0o644)
	c, err := Load(p)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// A replayed site: every file of the arrivals trace reaches disk and tape
// with its own size, migration never writes the full cartridge, and the
// traced recalls read it — sharing the one drive with migration, so they
// wait longer with the ingest than alone, and the writers, polling for
// the drive, wait longer the slower they poll.
func TestSiteReplay(t *testing.T) {
	var arr []Arrival
	var bytes int64
	for i := range 40 {
		a := Arrival{Time: float64(5 * i), Size: int64(1+i%3) << 30}
		arr, bytes = append(arr, a), bytes+a.Size
	}
	reqs := []RecallRequest{{Time: 0, Volume: "FULL01", Offset: 400 << 30, Size: 1 << 30}, {Time: 5, Volume: "FULL01", Offset: 100 << 30, Size: 1 << 30},
		{Time: 130, Volume: "FULL01", Offset: 900 << 30, Size: 2 << 30}}
	both := run(t, replayStudy(t, arr, reqs, "")).Site
	t.Logf("%d files, to tape mean %.0f s max %.0f; recalls mean %.0f s; drive %.3f migrating, %.3f recalling", both.Files, both.Migrate.Mean, both.Migrate.Max, both.Recall.Mean, both.Migrating, both.Recalling)
	if both.Files != len(arr) || both.Bytes != bytes || both.Migrate.Files != len(arr) || both.Migrate.Bytes != bytes {
		t.Errorf("replayed %d files, %d bytes (migrated %d, %d); want %d, %d", both.Files, both.Bytes, both.Migrate.Files, both.Migrate.Bytes, len(arr), bytes)
	}
	if both.Recall == nil || both.Recall.Files != len(reqs) || both.Recall.Mounts == 0 || both.Migrate.Cartridges != 1 {
		t.Errorf("recalls %+v; migration wrote %d cartridges, want 1 (FULL01 has no room)", both.Recall, both.Migrate.Cartridges)
	}
	// alone: one small file, arriving once the recalls are done
	alone := run(t, replayStudy(t, []Arrival{{Time: 2000, Size: 1 << 20}}, reqs, "")).Site
	if alone.Files != 1 || alone.Recall.Files != len(reqs) || both.Recall.Mean <= alone.Recall.Mean {
		t.Errorf("recalls without ingest: %d files arrived, %d recalled, mean wait %.0f s; with ingest %.0f s", alone.Files, alone.Recall.Files, alone.Recall.Mean, both.Recall.Mean)
	}
	slow := run(t, replayStudy(t, arr, reqs, `drive_poll = "20s"`)).Site
	if slow.Migrate.Mean <= both.Migrate.Mean {
		t.Errorf("writers polling every 20 s: to tape mean %.0f s, every 100 ms %.0f s", slow.Migrate.Mean, both.Migrate.Mean)
	}
}

// A pass whose only cartridge with room is in a recall's drive writes
// nothing and leaves its files to the next tick's pass, which writes them
// once the recall has let the cartridge go: here the one cartridge with room,
// V00000, holds the first file, whose recall runs while the second file's
// pass wants to append to it.
func TestSiteRetriesWhatAStuckPassTook(t *testing.T) {
	arr := []Arrival{{Time: 0, Size: 4 << 30}, {Time: 70, Size: 1 << 30}}
	reqs := []RecallRequest{{Time: 80, Volume: "V00000", Offset: 0, Size: 4 << 30}}
	const lines = "drives = 2\ncartridges = 2\nmigrate_drives = 1"
	alone := run(t, replayStudy(t, arr, nil, lines)).Site
	both := run(t, replayStudy(t, arr, reqs, lines)).Site
	t.Logf("passes alone %d, with the recall %d; to tape max %.0f s, %.0f s", alone.Migrate.Passes, both.Migrate.Passes, alone.Migrate.Max, both.Migrate.Max)
	for _, r := range []*SiteResult{alone, both} {
		if r.Migrate.Files != len(arr) || r.Migrate.Cartridges != 1 {
			t.Fatalf("%d of %d files migrated to %d cartridges, want all to V00000", r.Migrate.Files, len(arr), r.Migrate.Cartridges)
		}
	}
	if both.Recall == nil || both.Recall.Files != 1 {
		t.Fatalf("recalls %+v", both.Recall)
	}
	if both.Migrate.Passes <= alone.Migrate.Passes || both.Migrate.Max <= alone.Migrate.Max {
		t.Errorf("no pass was stuck behind the recall: %d passes (alone %d), to tape max %.0f s (alone %.0f s)",
			both.Migrate.Passes, alone.Migrate.Passes, both.Migrate.Max, alone.Migrate.Max)
	}
	// A stuck pass ends core's loop of passes with its error: the next
	// comes with the next tick, not at once.
	if both.Migrate.Passes >= alone.Migrate.Passes+maxChained {
		t.Errorf("%d passes (alone %d): stuck passes ran one after another", both.Migrate.Passes, alone.Migrate.Passes)
	}
}

// Migration writes the cartridge in the drive while it has room, else the
// fullest with room, as core's pickVolume does.
func TestMigrationPicksTheFullest(t *testing.T) {
	c, err := Parse([]byte(`
[tape]
capacity = "100GiB"
cartridges = 5
[tape.written]
A = "10GiB"
B = "60GiB"
C = "99GiB"
[workload]
op = "migrate"
files = 1
file_size = "1GB"
`))
	if err != nil {
		t.Fatal(err)
	}
	m := newMigModel(des.NewSim(1), c)
	var names []string
	for _, ct := range m.carts {
		names = append(names, fmt.Sprintf("%s:%d", ct.name, ct.end>>30))
	}
	if got := strings.Join(names, " "); got != "A:10 B:60 C:99 V00000:0 V00001:0" {
		t.Fatalf("cartridges %s", got)
	}
	for _, tc := range []struct {
		need int64
		want string
	}{{1 << 30, "C"}, {2 << 30, "B"}, {40 << 30, "B"}, {41 << 30, "A"}, {91 << 30, "V00000"}, {101 << 30, ""}} {
		got := ""
		if ct := m.pick(tc.need, nil); ct != nil {
			got = ct.name
		}
		if got != tc.want {
			t.Errorf("a tape file of %d GiB goes to %q, want %q", tc.need>>30, got, tc.want)
		}
	}
}

func FuzzReadArrivals(f *testing.F) {
	f.Add("time_s,size\n0,100\n2.5,5\n")
	f.Add("1,3\n0,4\n")
	f.Fuzz(func(t *testing.T, s string) {
		arr, err := ReadArrivals(strings.NewReader(s))
		if err != nil {
			return
		}
		var b bytes.Buffer
		if err := WriteArrivals(&b, arr); err != nil {
			t.Fatal(err)
		}
		again, err := ReadArrivals(&b)
		if err != nil || !slices.Equal(again, arr) {
			t.Fatalf("re-read: %v, %v became %v", err, arr, again)
		}
	})
}

// Striped on tape, a site's large files reach it sooner, and each recall
// of one is a request a part: more recall requests than recalled files
// would make alone, every one of them served.
func TestSiteStripedOnTape(t *testing.T) {
	whole := siteStudy(t, "", "stripe_min = \"4GB\"", "").Site
	striped := siteStudy(t, "", "stripe_min = \"4GB\"", "stripe = 3").Site
	t.Logf("to tape mean %.0f s whole, %.0f s striped; recall requests %d, %d; tape files %d, %d",
		whole.Migrate.Mean, striped.Migrate.Mean, whole.Recall.Files, striped.Recall.Files, whole.Migrate.TapeFiles, striped.Migrate.TapeFiles)
	if striped.Migrate.Files != striped.Files || striped.Migrate.TapeFiles <= whole.Migrate.TapeFiles {
		t.Errorf("striped: %d of %d files migrated in %d tape files (whole: %d)", striped.Migrate.Files, striped.Files, striped.Migrate.TapeFiles, whole.Migrate.TapeFiles)
	}
	if striped.Recall == nil || striped.Recall.Lost != 0 || striped.Recall.Files <= whole.Recall.Files {
		t.Errorf("recall requests: striped %+v, whole %d", striped.Recall, whole.Recall.Files)
	}
}
