package main_test

import (
	"bufio"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/strata-storage/strata/internal/testutil/cmdtest"
)

// TestBench runs `strata bench` as a user would: list, a run against a
// directory and against the server with every output file, and the
// mistakes a user makes, each one line and a non-zero exit.
func TestBench(t *testing.T) {
	s := newServer(t, "")
	out := s.ok("bench", "list")
	for _, name := range []string{"hpcs01", "hpcs14", "cemss-char", "cemss-user", "iozone", "md-rates", "scaling"} {
		if !strings.Contains(out, name) {
			t.Fatalf("bench list lacks %s:\n%s", name, out)
		}
	}
	for _, target := range []string{"posix:" + t.TempDir(), "strata://" + s.addr} {
		dir := t.TempDir()
		js, csvf, html := filepath.Join(dir, "r.json"), filepath.Join(dir, "r.csv"), filepath.Join(dir, "r.html")
		out := s.ok("bench", "run", "hpcs01", "hpcs06", "md-rates", "--target", target, "--scale", "tiny", "--json", js, "--csv", csvf, "--html", html, "--charts", filepath.Join(dir, "charts"))
		if !strings.Contains(out, "hpcs06") || !strings.Contains(out, "3 scenarios") || !strings.Contains(out, "0 failed") {
			t.Fatalf("%s: table:\n%s", target, out)
		}
		b, err := os.ReadFile(js)
		if err != nil {
			t.Fatal(err)
		}
		var rep struct {
			Target  struct{ Kind string }
			Results []struct {
				Scenario string
				Phases   []struct {
					Name  string
					Bytes int64
					MiBps float64 `json:"mib_per_s"`
					CPU   *struct {
						Client float64
						Server *float64
					} `json:"cpu_us_per_op"`
					Groups *struct {
						Groups      int64
						OpsPerGroup float64 `json:"ops_per_group"`
					} `json:"catalog_groups"`
				}
			}
		}
		if err := json.Unmarshal(b, &rep); err != nil {
			t.Fatalf("%s: the JSON file is not one JSON document: %v", target, err)
		}
		if len(rep.Results) != 3 || rep.Results[0].Phases[0].MiBps <= 0 || rep.Results[0].Phases[0].Bytes != 16<<20 {
			t.Fatalf("%s: JSON %+v", target, rep)
		}
		// every phase's CPU an operation: the client's always, the
		// server's from a Strata core's /metrics
		for _, res := range rep.Results {
			for _, ph := range res.Phases {
				strata := strings.HasPrefix(target, "strata:")
				if c := ph.CPU; c == nil || c.Client <= 0 || (c.Server != nil) != strata || (strata && *c.Server <= 0 && strings.HasPrefix(ph.Name, "create")) {
					t.Errorf("%s: %s %s: CPU an operation %+v", target, res.Scenario, ph.Name, c)
				}
				// a core's creates commit in its catalog's groups
				if g := ph.Groups; strings.HasPrefix(ph.Name, "create") && strata && (g == nil || g.Groups <= 0 || g.OpsPerGroup < 1) || !strata && g != nil {
					t.Errorf("%s: %s %s: catalog groups %+v", target, res.Scenario, ph.Name, g)
				}
			}
		}
		if svgs, _ := filepath.Glob(filepath.Join(dir, "charts", "*latency*.svg")); len(svgs) != 2 {
			t.Fatalf("%s: latency charts %v", target, svgs)
		}
		for _, f := range []string{csvf, html} {
			if st, err := os.Stat(f); err != nil || st.Size() == 0 {
				t.Fatalf("%s: %v", f, err)
			}
		}
	}
	for _, bad := range [][]string{
		{"bench", "run", "hpcs01"},
		{"bench", "run", "nosuch", "--target", "posix:" + t.TempDir()},
		{"bench", "run", "hpcs01", "--target", "ftp://x"},
		{"bench", "run", "hpcs01", "--target", "strata://127.0.0.1:1"},
		{"bench", "run", "hpcs01", "--target", "posix:" + t.TempDir(), "--scale", "huge"},
		{"bench", "run", "hpcs01", "--target", "posix:" + t.TempDir(), "--verify", "maybe"},
	} {
		_, errs, code := s.run(bad...)
		if code == 0 || strings.Count(strings.TrimSpace(errs), "\n") != 0 || !strings.HasPrefix(errs, "strata: ") {
			t.Errorf("strata %s: exit %d, stderr %q", strings.Join(bad, " "), code, errs)
		}
	}
}

// TestBenchProcesses drives workers in other processes: --procs starts
// them itself; --hosts uses a `strata bench worker` started by hand, which
// refuses a leader without its key.
func TestBenchProcesses(t *testing.T) {
	s := newServer(t, "")
	out := s.ok("bench", "run", "hpcs08", "md-rates", "--procs", "2", "--workers", "2", "--target", "posix:"+t.TempDir(), "--scale", "tiny")
	if !strings.Contains(out, "2 workers in 2 processes") || !strings.Contains(out, "0 failed") || !strings.Contains(out, "worker process on") {
		t.Fatalf("--procs 2:\n%s", out)
	}

	worker := exec.Command(bin, "bench", "worker", "--listen", "127.0.0.1:0", "--once", "--key", "sesame")
	stdout, err := worker.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := worker.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { worker.Process.Kill(); worker.Wait() })
	line, err := bufio.NewReader(stdout).ReadString('\n')
	addr, ok := strings.CutPrefix(strings.TrimSpace(line), "strata bench worker: listening on ")
	if err != nil || !ok {
		t.Fatalf("worker said %q, %v", line, err)
	}
	_, errs, code := s.run("bench", "run", "hpcs01", "--hosts", addr, "--key", "wrong", "--target", "posix:"+t.TempDir(), "--scale", "tiny")
	if code == 0 || !strings.Contains(errs, "wrong key") || strings.Count(strings.TrimSpace(errs), "\n") != 0 {
		t.Fatalf("wrong key: exit %d, %q", code, errs)
	}
	if err := worker.Wait(); err == nil {
		t.Fatal("a --once worker refused a leader and exited 0")
	}
	for _, bad := range [][]string{
		{"bench", "run", "hpcs01", "--target", "posix:" + t.TempDir(), "--procs", "0"},
		{"bench", "run", "hpcs01", "--target", "posix:" + t.TempDir(), "--hosts", "nohostport"},
	} {
		_, errs, code := s.run(bad...)
		if code == 0 || strings.Count(strings.TrimSpace(errs), "\n") != 0 || !strings.HasPrefix(errs, "strata: ") {
			t.Errorf("strata %s: exit %d, stderr %q", strings.Join(bad, " "), code, errs)
		}
	}
}

func TestSim(t *testing.T) {
	ex := func(name string) string { return filepath.Join("..", "..", "examples", "sim", name) }
	run := func(args ...string) (string, string, int) { return cmdtest.Run(t, exec.Command(bin, args...)) }
	out, errs, code := run("sim", "bound", ex("seed002-case3.toml"))
	if code != 0 || !strings.Contains(out, "bound by M·I") {
		t.Fatalf("bound: %d %s %s", code, out, errs)
	}
	dir := t.TempDir()
	js := filepath.Join(dir, "run.json")
	out, errs, code = run("sim", "run", ex("seed002-case4.toml"), "--seed", "7", "--json", js)
	if code != 0 || !strings.Contains(out, "fingerprint") {
		t.Fatalf("run: %d %s %s", code, out, errs)
	}
	var r struct {
		MBps        float64 `json:"mb_per_s"`
		Fingerprint string
		Seed        uint64
		Bound       struct {
			MBps    float64 `json:"mb_per_s"`
			Binding string  `json:"binding_term"`
		}
	}
	b, err := os.ReadFile(js)
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(b, &r); err != nil || r.Seed != 7 || r.Bound.Binding != "M·I" || r.MBps <= 0 {
		t.Fatalf("json %v: %s", err, b)
	}
	svg, csvf := filepath.Join(dir, "s.svg"), filepath.Join(dir, "s.csv")
	out, errs, code = run("sim", "sweep", ex("alice-disks.toml"), "--svg", svg, "--csv", csvf, "--workers", "2")
	if code != 0 || !strings.Contains(out, "12 points") {
		t.Fatalf("sweep: %d %s %s", code, out, errs)
	}
	for _, f := range []string{svg, csvf} {
		if st, err := os.Stat(f); err != nil || st.Size() == 0 {
			t.Fatalf("%s: %v", f, err)
		}
	}
	// a recall trace measured on Strata, replayed from another directory:
	// the trace path is relative to the study
	out, errs, code = run("sim", "run", filepath.Join("..", "..", "docs", "sim", "recall-run1", "recall-d2-r1.toml"))
	if code != 0 || !strings.Contains(out, "40 files") || !strings.Contains(out, "8 mounts, 38 locates") {
		t.Fatalf("recall run: %d %s %s", code, out, errs)
	}
	// several runs of one calibration, and of one kind of repeat, count
	// by their medians; runs of different servers do not mix
	cal := func(set, f string) string { return filepath.Join("..", "..", "docs", "sim", set, f) }
	out, errs, code = run("sim", "calibrate", cal("client-uncapped", "client-cal.json"), cal("client-uncapped", "client-repeat.json"),
		"--sink", cal("client-uncapped", "client-sink.toml"),
		"--against", cal("client-uncapped", "client-repeat.json"), "--against", cal("client-uncapped", "client-cal.json"),
		"--against", cal("client-uncapped", "client-measured.json"))
	if code != 0 || !strings.Contains(out, "points fitted, medians of 2 runs") || strings.Count(out, "medians of 2 runs, reads into memory") != 1 ||
		!strings.Contains(out, "127.0.0.1:7460, reads into local files") {
		t.Fatalf("calibrate from medians: %d %s %s", code, out, errs)
	}
	_, errs, code = run("sim", "calibrate", cal("client-uncapped", "client-cal.json"), cal("client-8x25MB", "client-cal.json"))
	if code == 0 || !strings.Contains(errs, "reports of different runs") || strings.Count(strings.TrimSpace(errs), "\n") != 0 {
		t.Fatalf("calibrate from different servers: %d %s", code, errs)
	}
	out, errs, code = run("sim", "sweep", ex("migrate-alice.toml"), "--set", "tape.migrate_drives=4", "--set", "workload.files=200")
	if code == 0 || !strings.Contains(errs, "no [sweep]") {
		t.Fatalf("a sweep whose only key was set: %d %s %s", code, out, errs)
	}
	out, errs, code = run("sim", "run", ex("migrate-alice.toml"), "--set", "tape.migrate_drives=4", "--set", "workload.files=200")
	if code != 0 || !strings.Contains(out, "time to tape") {
		t.Fatalf("migrate run: %d %s %s", code, out, errs)
	}
	// bad input: one line, non-zero
	bad := filepath.Join(dir, "bad.toml")
	os.WriteFile(bad, []byte("[workload]\nop = \"sideways\"\n"), 0o644)
	for _, args := range [][]string{{"sim", "run", bad}, {"sim", "bound", filepath.Join(dir, "missing.toml")}, {"sim", "sweep", ex("seed002-case1.toml")}, {"sim", "calibrate", bad}} {
		_, errs, code := run(args...)
		if code == 0 || strings.Count(strings.TrimSpace(errs), "\n") != 0 || !strings.HasPrefix(errs, "strata: ") {
			t.Errorf("%v: exit %d, stderr %q", args, code, errs)
		}
	}
}

// A site calibrates strata sim's catalog from strata bench alone: md-rates
// at 1, a few and many workers against its server, then calibrate-catalog
// writes a study that sweeps.
func TestSimCalibrateCatalog(t *testing.T) {
	s := newServer(t, "")
	dir := t.TempDir()
	var reports []string
	for _, w := range []string{"1", "4", "32"} {
		js := filepath.Join(dir, "md-"+w+".json")
		s.ok("bench", "run", "md-rates", "--target", "strata://"+s.addr, "--scale", "tiny", "--workers", w, "--json", js)
		reports = append(reports, js)
	}
	study := filepath.Join(dir, "catalog.toml")
	out := s.ok(append([]string{"sim", "calibrate-catalog", "--out", study}, reports...)...)
	for _, want := range []string{"catalog fitted from strata bench md-rates at [1 4 32] workers", "wake_us", "group_us", "client_us"} {
		if !strings.Contains(out, want) {
			t.Fatalf("calibrate-catalog lacks %q:\n%s", want, out)
		}
	}
	if out := s.ok("sim", "sweep", study, "--set", "workload.files=100"); !strings.Contains(out, "7 points") {
		t.Fatalf("the fitted study's sweep:\n%s", out)
	}
	// predicted beside a run at a worker count the fit did not use, and
	// one it did (twice: their median)
	js := filepath.Join(dir, "md-2.json")
	s.ok("bench", "run", "md-rates", "--target", "strata://"+s.addr, "--scale", "tiny", "--workers", "2", "--json", js)
	out = s.ok(append([]string{"sim", "calibrate-catalog", "--against", js, "--against", reports[1], "--against", reports[1]}, reports...)...)
	for _, want := range []string{"predicted (this fit) against measured", "\n        2  ", "\n        4  ", "3 predictions at worker counts the fit did not use: median |error|"} {
		if !strings.Contains(out, want) {
			t.Fatalf("calibrate-catalog --against lacks %q:\n%s", want, out)
		}
	}
	// md-rates at too few worker counts: one line, non-zero
	for _, args := range [][]string{
		{"sim", "calibrate-catalog", reports[0], reports[1], reports[1]},
		{"sim", "calibrate-catalog", reports[0]},
		{"sim", "calibrate-catalog", "--against", study, reports[0], reports[1], reports[2]},
	} {
		_, errs, code := s.run(args...)
		if code == 0 || strings.Count(strings.TrimSpace(errs), "\n") != 0 || !strings.HasPrefix(errs, "strata: ") {
			t.Errorf("strata %s: exit %d, stderr %q", strings.Join(args, " "), code, errs)
		}
	}
}
