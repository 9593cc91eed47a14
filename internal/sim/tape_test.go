package sim

import (
	"bytes"
	"math"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/strata-storage/strata/internal/tape"
)

// recallStudy writes trace to a directory and returns a study replaying it
// with the extra [tape] lines.
func recallStudy(t *testing.T, tapeLines string, trace []RecallRequest) *Config {
	t.Helper()
	dir := t.TempDir()
	var b bytes.Buffer
	if err := WriteTrace(&b, trace); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "trace.csv"), b.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	src := "name = \"t\"\n[tape]\ngeneration = \"LTO-9\"\n" + tapeLines + "\n[workload]\nop = \"recall\"\ntrace = \"trace.csv\"\n"
	p := filepath.Join(dir, "study.toml")
	if err := os.WriteFile(p, []byte(src), 0o644); err != nil {
		t.Fatal(err)
	}
	s, err := LoadStudy(p)
	if err != nil {
		t.Fatal(err)
	}
	return s.Config
}

func recallRun(t *testing.T, c *Config) *RecallResult {
	t.Helper()
	r := run(t, c)
	if r.Recall == nil {
		t.Fatal("no recall result")
	}
	return r.Recall
}

// One file on an idle library costs exactly what package tape's model says:
// a robot exchange, a load, a locate from the label, streaming, and the
// server's time.
func TestRecallOneFileCostsTheModel(t *testing.T) {
	g := tape.Generations["LTO-9"]
	off, size := int64(5e12), int64(4e9)
	c := recallStudy(t, "drives = 1\nrecall_min_files = 1\noverhead_ms = 250", []RecallRequest{{Volume: "A", Offset: off, Size: size}})
	r := recallRun(t, c)
	want := g.Exchange + g.Load + g.LocateTime(tape.Position{}, g.PositionOf(off)) + g.TransferTime(size) + 250*time.Millisecond
	if got := time.Duration(r.Seconds * 1e9); (got - want).Abs() > time.Millisecond {
		t.Errorf("one recall took %v, the model says %v", got, want)
	}
	if r.Mounts != 1 || r.Locates != 1 || r.Files != 1 {
		t.Errorf("mounts %d locates %d files %d, want 1 1 1", r.Mounts, r.Locates, r.Files)
	}
}

// Requests for one cartridge are one mount, read in the scheduler's sweep
// whatever order they came in — out along the forward wraps, back along
// the reverse ones: 9e12 sits at the start of forward wrap 140, 1e12 at
// 460 m on reverse wrap 15, 5e12 at 230 m on reverse wrap 77 — and a
// second cartridge is a dismount (rewind, unload, exchange) and a mount on
// the same drive, once the drive has kept A for the recalls that might
// have followed (recall_linger).
func TestRecallBatchesPerCartridge(t *testing.T) {
	trace := []RecallRequest{
		{Volume: "A", Offset: 9e12, Size: 1e9},
		{Volume: "B", Offset: 1e12, Size: 1e9},
		{Volume: "A", Offset: 1e12, Size: 1e9},
		{Volume: "A", Offset: 5e12, Size: 1e9},
	}
	c := recallStudy(t, "drives = 1\nrecall_min_files = 1\nrecall_linger = \"5s\"", trace)
	r := recallRun(t, c)
	if r.Mounts != 2 || r.Locates != 4 {
		t.Errorf("mounts %d locates %d, want 2 and 4", r.Mounts, r.Locates)
	}
	g := tape.Generations["LTO-9"]
	p := g.PositionOf
	a := g.Exchange + g.Load + g.LocateTime(tape.Position{}, p(9e12)) + g.LocateTime(p(9e12+1e9), p(1e12)) + g.LocateTime(p(1e12+1e9), p(5e12)) + 3*g.TransferTime(1e9)
	b := 5*time.Second + g.RewindTime(p(5e12+1e9)) + g.Unload + g.Exchange + g.Exchange + g.Load + g.LocateTime(tape.Position{}, p(1e12)) + g.TransferTime(1e9)
	if got := time.Duration(r.Seconds * 1e9); (got - (a + b)).Abs() > time.Millisecond {
		t.Errorf("took %v, want %v (A in sweep order, then B)", got, a+b)
	}
}

// Drives share one robot: two mounts at once take two exchanges in turn.
func TestRecallRobotIsShared(t *testing.T) {
	g := tape.Generations["LTO-9"]
	trace := []RecallRequest{{Volume: "A", Offset: 0, Size: 0}, {Volume: "B", Offset: 0, Size: 0}}
	r := recallRun(t, recallStudy(t, "drives = 2\nrecall_min_files = 1", trace))
	want := 2*g.Exchange + g.Load + g.LocateStart
	if got := time.Duration(r.Max * 1e9); (got - want).Abs() > time.Millisecond {
		t.Errorf("second drive ready after %v, want %v", got, want)
	}
}

// The rules decide when a mount is worth it: below the file threshold a
// cartridge waits for the age limit (noticed half a poll late on average),
// and the recall_drives quota caps the drives in use.
func TestRecallRules(t *testing.T) {
	g := tape.Generations["LTO-9"]
	one := []RecallRequest{{Volume: "A", Offset: 0, Size: 0}}
	r := recallRun(t, recallStudy(t, "drives = 1\nrecall_min_files = 10\nrecall_max_age = \"5m\"\npoll = \"20s\"", one))
	want := 5*time.Minute + 10*time.Second + g.MountTime() + g.LocateStart
	if got := time.Duration(r.Seconds * 1e9); (got - want).Abs() > time.Millisecond {
		t.Errorf("held recall took %v, want %v", got, want)
	}
	var many []RecallRequest
	for _, v := range []string{"A", "B", "C", "D"} {
		many = append(many, RecallRequest{Volume: v, Offset: 1e12, Size: 1e9})
	}
	all := recallRun(t, recallStudy(t, "drives = 4\nrecall_min_files = 1", many))
	quota := recallRun(t, recallStudy(t, "drives = 4\nrecall_drives = 1\nrecall_min_files = 1", many))
	// one drive at a time, each on an empty drive (no dismounts): four
	// mounts, locates and reads in a row
	each := g.MountTime() + g.LocateTime(tape.Position{}, g.PositionOf(1e12)) + g.TransferTime(1e9)
	if got := time.Duration(quota.Seconds * 1e9); (got-4*each).Abs() > time.Millisecond || all.Seconds >= quota.Seconds/2 {
		t.Errorf("recall_drives = 1 took %v (want %v), 4 drives %.0f s", got, 4*each, all.Seconds)
	}
	if all.Mounts != 4 || quota.Mounts != 4 {
		t.Errorf("mounts %d and %d, want 4 each", all.Mounts, quota.Mounts)
	}
}

// A synthetic random-recall workload: more drives finish sooner, the
// bound names the drives, the same seed gives the same events, another
// seed other files.
func TestRecallSyntheticWorkload(t *testing.T) {
	src := `name = "random recalls"
[tape]
drives = 2
cartridges = 20
recall_min_files = 1
[workload]
op = "recall"
files = 200
file_size = "2GB"
arrival_rate = 0.01
`
	s, err := ParseStudy([]byte(src))
	if err != nil {
		t.Fatal(err)
	}
	r1 := run(t, s.Config)
	r2 := run(t, s.Config)
	if r1.Fingerprint != r2.Fingerprint || r1.Events != r2.Events {
		t.Errorf("same seed, fingerprints %s and %s", r1.Fingerprint, r2.Fingerprint)
	}
	other, err := Run(s.Config, 2)
	if err != nil || other.Fingerprint == r1.Fingerprint {
		t.Errorf("seed 2 gave the same run as seed 1 (%v)", err)
	}
	// 0.01 × 2 GB/s offered binds
	if r1.Bound.Binding != "λ·s" || r1.Bound.MBps != 20 || r1.MBps > r1.Bound.MBps*1.02 {
		t.Errorf("bound %+v, DES %.1f MB/s: want λ·s at 20 MB/s", r1.Bound, r1.MBps)
	}
	c4, err := s.With(map[string]string{"tape.drives": "4"})
	if err != nil {
		t.Fatal(err)
	}
	r4 := run(t, c4)
	if r4.Recall.Mean >= r1.Recall.Mean {
		t.Errorf("4 drives wait %.0f s on average, 2 drives %.0f s", r4.Recall.Mean, r1.Recall.Mean)
	}
	x := r1.Recall
	if sum := x.Mounting + x.Positioning + x.Transfer + x.Overhead + x.Idle; sum < 0.99 || sum > 1.01 {
		t.Errorf("drive time fractions add up to %.3f", sum)
	}
}

// The example's drives × batch rules sweep: longer age limits save mounts
// and cost waiting; more drives cut the wait.
func TestRecallRulesSweep(t *testing.T) {
	s := load(t, "recall-rules.toml")
	r := s.RunSweep(1, 0, nil)
	if r.Failed() > 0 {
		t.Fatalf("%d points failed", r.Failed())
	}
	get := func(drives, age string) *RecallResult {
		for _, p := range r.Points {
			if p.Set["tape.drives"] == drives && p.Set["tape.recall_max_age"] == age {
				return p.Result.Recall
			}
		}
		t.Fatalf("no point drives=%s age=%s", drives, age)
		return nil
	}
	short, long := get("8", "1s"), get("8", "1h")
	if long.Mounts >= short.Mounts/2 || long.Mean <= short.Mean {
		t.Errorf("8 drives: age 1s %d mounts %.0f s wait; age 1h %d mounts %.0f s wait", short.Mounts, short.Mean, long.Mounts, long.Mean)
	}
	if few, many := get("4", "1s"), get("8", "1s"); many.Mean >= few.Mean {
		t.Errorf("8 drives wait %.0f s, 4 drives %.0f s", many.Mean, few.Mean)
	}
}

// Bad tape studies fail with one line naming the key.
func TestTapeStudyErrors(t *testing.T) {
	for _, c := range []struct{ src, want string }{
		{"[workload]\nop = \"recall\"\n[tape]\ngeneration = \"LTO-11\"", "tape.generation"},
		{"[workload]\nop = \"recall\"\n[tape.drive]\nload = \"quick\"", "tape.drive.load"},
		{"[workload]\nop = \"recall\"\n[tape.drive]\navg_locate = \"3s\"", "avg_locate"},
		{"[workload]\nop = \"recall\"\n[tape]\nrecall_max_age = \"soon\"", "recall_max_age"},
		{"[workload]\nop = \"recall\"\n[tape]\nfill = 2.0", "tape.fill"},
		{"[workload]\nop = \"recall\"\nfiles = 100\nfile_size = \"1TB\"\n[tape]\ncartridges = 1\ncapacity = \"10TB\"", "hold only 9"},
		{"[workload]\nop = \"recall\"\ntrace = \"/nonexistent/trace.csv\"", "workload.trace"},
		{"[workload]\nop = \"migrate\"\nfile_size = \"1TB\"\n[tape]\ncapacity = \"100GB\"", "does not fit"},
		{"[workload]\nop = \"migrate\"\nfiles = 100\nfile_size = \"50GB\"\n[tape]\ncapacity = \"100GB\"\ncartridges = 2", "need more than"},
		{"[workload]\nop = \"migrate\"\n[tape]\nmigrate_every = \"0s\"", "migrate_every"},
		// the bytes fit the cartridges, the tape files do not (it panicked)
		{"[workload]\nop = \"migrate\"\nfiles = 19\nfile_size = \"1GB\"\n[tape]\ncapacity = \"10GB\"\ncartridges = 2\ndrives = 2\nmigrate_drives = 2\nmigrate_after = \"0s\"", "no cartridge had room"},
		{"[workload]\nop = \"migrate\"\n[tape]\nmigrate_drives = 0", "migrate_drives"},
	} {
		s, err := ParseStudy([]byte(c.src))
		if err == nil {
			_, err = Run(s.Config, 1)
		}
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%q: error %v, want it to mention %q", c.src, err, c.want)
		}
	}
}

func TestTraceRoundTrip(t *testing.T) {
	in := []RecallRequest{{Time: 0, Volume: "V1", Offset: 0, Size: 1}, {Time: 1.5, Volume: "V2", Offset: 1 << 40, Size: 1 << 30}}
	var b bytes.Buffer
	if err := WriteTrace(&b, in); err != nil {
		t.Fatal(err)
	}
	out, err := ReadTrace(&b)
	if err != nil {
		t.Fatal(err)
	}
	if len(out) != 2 || out[0] != in[0] || out[1] != in[1] {
		t.Errorf("round trip: %+v", out)
	}
	for _, bad := range []string{"", "time_s,volume,offset,size\n", "1,V,2\n", "x,V,0,1\n", "-1,V,0,1\n", "1,,0,1\n", "1,\"V\r\n\",0,1\n", "1,V,-5,1\n", "NaN,V,0,1\n"} {
		if _, err := ReadTrace(strings.NewReader(bad)); err == nil {
			t.Errorf("trace %q read without error", bad)
		}
	}
}

// FuzzReadTrace: any input is a trace or an error, and a trace read back
// after writing is the same trace.
func FuzzReadTrace(f *testing.F) {
	f.Add("time_s,volume,offset,size\n0,V1,0,100\n2.5,V2,1000,5\n")
	f.Add("1,\"a,b\",3,4\n")
	f.Fuzz(func(t *testing.T, s string) {
		reqs, err := ReadTrace(strings.NewReader(s))
		if err != nil {
			return
		}
		var b bytes.Buffer
		if err := WriteTrace(&b, reqs); err != nil {
			t.Fatal(err)
		}
		again, err := ReadTrace(&b)
		if err != nil || len(again) != len(reqs) {
			t.Fatalf("re-read: %v (%d of %d)", err, len(again), len(reqs))
		}
		for i := range reqs {
			if again[i] != reqs[i] {
				t.Fatalf("row %d: %+v became %+v", i, reqs[i], again[i])
			}
		}
	})
}

// The tape validation's traces (docs/sim/recall-run* and recall-predicted,
// measured on Strata with the emulated library) replay to the predictions
// published beside them: a model change that moves them must come with a
// new validation run.
func TestRecallValidationReplays(t *testing.T) {
	for runDir, table := range map[string]string{
		"recall-run1":      "validation-recall-run1.txt",
		"recall-run2":      "validation-recall-run2.txt",
		"recall-predicted": "recall-predicted/validation.txt", // each predicted run's study as committed before it ran
	} {
		b, err := os.ReadFile("../../docs/sim/" + table)
		if err != nil {
			t.Fatal(err)
		}
		rows := 0
		for _, line := range strings.Split(string(b), "\n") {
			f := strings.Split(line, "|")
			if len(f) != 13 || (strings.TrimSpace(f[3]) != "calibrate" && strings.TrimSpace(f[3]) != "predict") {
				continue
			}
			cell := func(i int) string { return strings.TrimSpace(f[i]) }
			name := filepath.Join("../../docs/sim", runDir, "recall-d"+cell(1)+"-r"+cell(2)+".toml")
			s, err := LoadStudy(name)
			if err != nil {
				t.Fatal(err)
			}
			r := recallRun(t, s.Config)
			var makespan, mean float64
			fmtSscan(t, cell(7), &makespan)
			fmtSscan(t, cell(10), &mean)
			mounts := strings.TrimSpace(strings.Split(cell(4), "/")[1])
			locates := strings.TrimSpace(strings.Split(cell(5), "/")[1])
			if math.Abs(r.Seconds-makespan) > 1 || math.Abs(r.Mean-mean) > 1 || strconv.Itoa(r.Mounts) != mounts || strconv.Itoa(r.Locates) != locates {
				t.Errorf("%s: makespan %.0f mean %.0f mounts %d locates %d; published %s %s %s %s", name, r.Seconds, r.Mean, r.Mounts, r.Locates, cell(7), cell(10), mounts, locates)
			}
			rows++
		}
		if rows != 9 {
			t.Errorf("%s: %d validation rows replayed, want 9", runDir, rows)
		}
	}
}

func fmtSscan(t *testing.T, s string, v *float64) {
	t.Helper()
	x, err := strconv.ParseFloat(s, 64)
	if err != nil {
		t.Fatalf("%q: %v", s, err)
	}
	*v = x
}

// Seed 000's LTO-1 library: every point of the example migrates the
// terabyte below its bound (drives × 15 MB/s) and above 0.85 of it.
func TestCeMSSLTO1(t *testing.T) {
	s := load(t, "cemss-lto1.toml")
	for _, n := range []string{"10", "20", "40"} {
		r := sweepByKey(t, s, map[string]string{"tape.migrate_drives": n})
		if r.Bytes != 1000e9 || r.MBps > r.Bound.MBps*1.0001 || r.MBps < 0.85*r.Bound.MBps {
			t.Errorf("%s drives: %d bytes at %.1f MB/s against a bound of %.1f", n, r.Bytes, r.MBps, r.Bound.MBps)
		}
	}
}
