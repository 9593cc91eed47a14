package sim

import (
	"fmt"
	"math"
	"strings"
	"testing"

	"github.com/strata-storage/strata/internal/tape"
)

// failStudy is 300 recalls of 1 GB files, all at once, from 10 LTO-9
// cartridges on two drives, with the extra [tape] lines.
func failStudy(t *testing.T, tapeLines string) *RecallResult {
	t.Helper()
	if !strings.Contains("\n"+tapeLines, "\ndrives =") {
		tapeLines = "drives = 2\n" + tapeLines
	}
	c, err := Parse([]byte(`
[tape]
generation = "LTO-9"
cartridges = 10
recall_min_files = 1
` + tapeLines + `
[workload]
op = "recall"
files = 300
file_size = "1GB"
`))
	if err != nil {
		t.Fatal(err)
	}
	return recallRun(t, c)
}

// A cartridge found unreadable at its mount sends its recalls to the next
// copy, as strata serve's recaller does; with no copy left they are lost.
// One bad mount is enough: the recalls queued for the cartridge later go
// to the copy directly.
func TestRecallBadCartridge(t *testing.T) {
	healthy := failStudy(t, "")
	one := failStudy(t, "bad_cartridges = 1")
	two := failStudy(t, "bad_cartridges = 1\ncopies = 2")
	t.Logf("healthy: %d files, mean %.0f s; one copy: %d lost; two copies: %d from the copy, mean %.0f s",
		healthy.Files, healthy.Mean, one.Lost, two.FromCopy, two.Mean)
	if healthy.Lost != 0 || healthy.BadMounts != 0 || healthy.Files != 300 {
		t.Fatalf("healthy: %+v", healthy)
	}
	if one.Lost == 0 || one.Files+one.Lost != 300 || one.BadMounts != 1 || one.FromCopy != 0 {
		t.Errorf("one copy: %d files, %d lost, %d bad mounts, %d from a copy", one.Files, one.Lost, one.BadMounts, one.FromCopy)
	}
	if two.Lost != 0 || two.Files != 300 || two.BadMounts != 1 || two.FromCopy != one.Lost {
		t.Errorf("two copies: %d files, %d lost, %d bad mounts, %d from the copy (the one-copy run lost %d)", two.Files, two.Lost, two.BadMounts, two.FromCopy, one.Lost)
	}
}

// A drive that fails is taken out of service and the others serve its
// recalls: two drives, one failing before the first request, recall
// exactly as one drive does.
func TestRecallDriveFails(t *testing.T) {
	one := failStudy(t, "drives = 1")
	failed := failStudy(t, "failed_drives = 1")
	if failed.DrivesFailed != 1 || failed.Files != 300 || failed.Mean != one.Mean || failed.Seconds != one.Seconds || failed.Mounts != one.Mounts {
		t.Errorf("one of two drives failed at the start: %+v\none drive: %+v", failed, one)
	}
	// failing mid-run (20 minutes in): every recall still completes, later than with two
	both := failStudy(t, "")
	mid := failStudy(t, fmt.Sprintf("failed_drives = 1\ndrive_fail_at = %q", "20m"))
	t.Logf("two drives: %.0f s; one failing at 20m: %.0f s; one drive: %.0f s", both.Seconds, mid.Seconds, one.Seconds)
	if mid.DrivesFailed != 1 || mid.Files != 300 || mid.Seconds <= both.Seconds || mid.Seconds >= one.Seconds {
		t.Errorf("a drive failing at 20m: %+v", mid)
	}
}

// After a bad cartridge, recopy reads its files from the second copy (a
// whole cartridge, in byte order: one locate) and a second drive writes
// them to a new cartridge, trailing the reads: about the time a drive
// takes to stream the cartridge once, plus mounts, the last file and a
// flush. With one drive left after a failure the writer gives its drive
// to the reads when they lose theirs, and the recopy still completes.
func TestRecopy(t *testing.T) {
	g := tape.Generations["LTO-9"]
	for _, c := range []struct {
		name, tape string
		max        float64 // of the streaming time
	}{
		{"two drives", "", 1.05},
		{"three drives, one failing at 3h", "drives = 3\nfailed_drives = 1\ndrive_fail_at = \"3h\"", 1.05},
	} {
		r := failStudy(t, "bad_cartridges = 1\ncopies = 2\nrecopy = true\n"+c.tape)
		stream := float64(r.RecopyBytes) / g.Rate
		t.Logf("%s: recopy of %d bytes in %.0f s (streaming it %.0f s)", c.name, r.RecopyBytes, r.RecopySeconds, stream)
		if want := int64(0.9*float64(g.Capacity)) / 1e9 * 1e9; r.RecopyBytes != want {
			t.Errorf("%s: recopy of %d bytes, want the cartridge's %d", c.name, r.RecopyBytes, want)
		}
		if r.RecopySeconds < stream || r.RecopySeconds > stream*c.max || math.IsNaN(r.RecopySeconds) {
			t.Errorf("%s: recopy took %.0f s; streaming the cartridge takes %.0f", c.name, r.RecopySeconds, stream)
		}
		if r.Lost != 0 || r.Files != 300 {
			t.Errorf("%s: users %+v", c.name, r)
		}
	}
	// examples/sim/tape-failures.toml on two drives: the reading drive
	// fails six hours in, the writer gives its drive to the reads, and a
	// writer starts again for the rest once they are done
	st := load(t, "tape-failures.toml")
	r := sweepByKey(t, st, map[string]string{"tape.drives": "2"}).Recall
	three := sweepByKey(t, st, map[string]string{"tape.drives": "3"}).Recall
	stream := float64(r.RecopyBytes) / g.Rate
	t.Logf("tape-failures.toml: recopy in %.0f s on two drives, %.0f s on three (streaming %.0f s)", r.RecopySeconds, three.RecopySeconds, stream)
	if r.DrivesFailed != 1 || r.Lost != 0 || r.RecopySeconds < 1.2*three.RecopySeconds || r.RecopySeconds > 2.1*stream {
		t.Errorf("two drives, one failing under the recopy's reads: %+v", r)
	}
}

func TestTapeFailureErrors(t *testing.T) {
	for _, c := range []struct{ tape, want string }{
		{"bad_cartridges = 11", "tape.bad_cartridges"},
		{"failed_drives = 2", "tape.failed_drives"},
		{"failed_drives = 1\ndrive_fail_at = \"later\"", "tape.drive_fail_at"},
		{"recopy = true\nbad_cartridges = 1", "tape.copies"},
	} {
		_, err := Parse([]byte("[tape]\ndrives = 2\ncartridges = 10\n" + c.tape + "\n[workload]\nop = \"recall\"\n"))
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%q: %v, want an error naming %s", c.tape, err, c.want)
		}
	}
}

// A robot that fails mounts delays recalls as strata serve's recaller
// does (sched.RetryMount): a cartridge is held for 10 s, 20 s, 40 s …
// between rounds; after the last round its recalls go to the next copy,
// or are lost with none. A robot that never mounts loses everything on
// one copy, each cartridge given up after its five rounds, and serves
// nothing from the second either.
func TestRecallMountFailures(t *testing.T) {
	healthy := failStudy(t, "")
	flaky := failStudy(t, "mount_failures = 0.3")
	t.Logf("healthy: mean %.0f s, %d mounts; 30%% of mounts failing: mean %.0f s, %d mounts, %d failed, %d given up, %d lost",
		healthy.Mean, healthy.Mounts, flaky.Mean, flaky.Mounts, flaky.MountFailures, flaky.GaveUp, flaky.Lost)
	if flaky.MountFailures == 0 || flaky.Mean <= healthy.Mean || flaky.Files+flaky.Lost != 300 {
		t.Errorf("30%% of mounts failing: %d failures, mean %.0f s (healthy %.0f), %d files + %d lost", flaky.MountFailures, flaky.Mean, healthy.Mean, flaky.Files, flaky.Lost)
	}
	if again := failStudy(t, "mount_failures = 0.3"); again.MountFailures != flaky.MountFailures || again.Mean != flaky.Mean {
		t.Errorf("not deterministic: %d failures, mean %.3f s; then %d, %.3f s", flaky.MountFailures, flaky.Mean, again.MountFailures, again.Mean)
	}
	for _, copies := range []int{1, 2} {
		never := failStudy(t, fmt.Sprintf("mount_failures = 1\ncopies = %d", copies))
		// every cartridge of every copy: five rounds, given up
		if never.Lost != 300 || never.Mounts != 0 || never.GaveUp != 10*copies || never.MountFailures != 5*10*copies {
			t.Errorf("%d copies, no mount ever: %d lost, %d mounts, %d given up, %d failures", copies, never.Lost, never.Mounts, never.GaveUp, never.MountFailures)
		}
	}
	for _, bad := range []string{"mount_failures = 1.5", "mount_failures = -0.1", "mount_retry = \"soon\"", "mount_failures = 0.1\ncopies = 2\nbad_cartridges = 1\nrecopy = true"} {
		if _, err := Parse([]byte("[tape]\n" + bad + "\n[workload]\nop = \"recall\"\n")); err == nil {
			t.Errorf("%q accepted", bad)
		}
	}
}
