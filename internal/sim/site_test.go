package sim

import (
	"strings"
	"testing"
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
