package bench

import (
	"bytes"
	"context"
	"encoding/csv"
	"errors"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/strata-storage/strata/internal/testutil"
)

var ctx = context.Background()

// targets are the implementations every scenario must run on: a local
// directory and a real Strata server.
func targets(t *testing.T) map[string]string {
	s := testutil.Start(t, nil)
	return map[string]string{
		"posix":  "posix:" + t.TempDir(),
		"strata": "strata://" + strings.TrimPrefix(s.URL(), "http://"),
	}
}

// TestSuite runs every scenario at the tiny scale on both targets and
// checks that each did real work, verified its data, and that the report
// survives JSON, CSV and HTML.
func TestSuite(t *testing.T) {
	for name, spec := range targets(t) {
		t.Run(name, func(t *testing.T) {
			rep := runSuite(t, Config{Target: spec, Scale: "tiny", Workers: 2})
			if len(rep.Results) != len(Scenarios()) {
				t.Fatalf("%d results for %d scenarios", len(rep.Results), len(Scenarios()))
			}
			phases := 0
			for _, res := range rep.Results {
				if len(res.Phases) == 0 {
					t.Errorf("%s: no phases", res.Scenario)
				}
				var wrote, read int64
				stonewalled := false
				for _, ph := range res.Phases {
					phases++
					if ph.Skipped != "" {
						if name == "posix" {
							t.Errorf("%s/%s skipped on a file system: %s", res.Scenario, ph.Name, ph.Skipped)
						}
						continue
					}
					if ph.Ops == 0 || ph.Seconds <= 0 || ph.FirstDone <= 0 || ph.FirstDone > ph.Seconds+1e-9 || ph.Latency.Count != ph.Ops {
						t.Errorf("%s/%s: %d ops in %.6f s (first done %.6f), %d latencies", res.Scenario, ph.Name, ph.Ops, ph.Seconds, ph.FirstDone, ph.Latency.Count)
					}
					if ph.Latency.P50 > ph.Latency.P99 || ph.Latency.P99 > ph.Latency.Max {
						t.Errorf("%s/%s: percentiles out of order: %+v", res.Scenario, ph.Name, ph.Latency)
					}
					switch ph.Name {
					case "write":
						wrote = ph.Bytes
						stonewalled = ph.StonewallHit
					case "read":
						read = ph.Bytes
					}
				}
				// A write the deadline stopped wrote less than the whole
				// files; full duplex reads other, prefilled files in full
				// beside it (on a slow machine, under the race detector).
				if wrote != read && !stonewalled {
					t.Errorf("%s: read %d bytes, wrote %d: the read must replay the write", res.Scenario, read, wrote)
				}
			}
			if name == "strata" {
				for _, sc := range []string{"hpcs13", "hpcs14"} {
					if ph := phase(rep, sc, "randwrite 4KiB"); ph == nil || !strings.Contains(ph.Skipped, "written once") {
						t.Errorf("%s: in-place writes on Strata should be skipped with the reason, got %+v", sc, ph)
					}
				}
				if ph := phase(rep, "hpcs06", "write"); ph == nil || ph.Bytes == 0 {
					t.Errorf("hpcs06: the shared strided file was not written on Strata: %+v", ph)
				}
			}
			checkOutputs(t, rep, phases)
		})
	}
}

// runSuite runs every scenario and fails the test, with the table, if any
// failed.
func runSuite(t *testing.T, cfg Config) *Report {
	t.Helper()
	return runScenarios(t, cfg, Scenarios())
}

// runSuiteOf runs the named scenarios and fails the test on any failure.
func runSuiteOf(t *testing.T, cfg Config, names ...string) *Report {
	t.Helper()
	sc, err := Lookup(names)
	if err != nil {
		t.Fatal(err)
	}
	return runScenarios(t, cfg, sc)
}

func runScenarios(t *testing.T, cfg Config, sc []Scenario) *Report {
	t.Helper()
	rep, err := Execute(ctx, cfg, sc)
	if err != nil {
		t.Fatal(err)
	}
	if rep.Failures != 0 {
		var b strings.Builder
		rep.WriteTable(&b)
		t.Fatalf("%d failures:\n%s", rep.Failures, b.String())
	}
	return rep
}

func phase(rep *Report, scenario, name string) *Phase {
	for i := range rep.Results {
		if rep.Results[i].Scenario != scenario {
			continue
		}
		for j := range rep.Results[i].Phases {
			if rep.Results[i].Phases[j].Name == name {
				return &rep.Results[i].Phases[j]
			}
		}
	}
	return nil
}

// checkOutputs: the JSON is one document that reads back with no unknown
// field, the CSV has a row per phase, the HTML has its charts.
func checkOutputs(t *testing.T, rep *Report, phases int) {
	t.Helper()
	var js bytes.Buffer
	if err := rep.WriteJSON(&js); err != nil {
		t.Fatal(err)
	}
	back, err := ReadJSON(bytes.NewReader(js.Bytes()))
	if err != nil {
		t.Fatalf("JSON does not read back: %v", err)
	}
	if len(back.Results) != len(rep.Results) || back.Env.CPUs == 0 || back.Env.MemBytes == 0 || back.Target.Durability == "" || back.Version == "" && rep.Version != "" {
		t.Fatalf("JSON lost content: %+v", back.Env)
	}
	var cs bytes.Buffer
	if err := rep.WriteCSV(&cs); err != nil {
		t.Fatal(err)
	}
	rows, err := csv.NewReader(&cs).ReadAll()
	if err != nil || len(rows) != phases+1 {
		t.Fatalf("CSV: %d rows for %d phases, %v", len(rows), phases, err)
	}
	var h bytes.Buffer
	if err := rep.WriteHTML(&h); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"<svg", "throughput against I/O size", "scaling (write)", "latency percentiles", "hpcs14"} {
		if !strings.Contains(h.String(), want) {
			t.Errorf("HTML report lacks %q", want)
		}
	}
	var tb bytes.Buffer
	rep.WriteTable(&tb)
	if !strings.Contains(tb.String(), "0 failed") {
		t.Errorf("table: %s", tb.String())
	}
}

// corrupting flips one byte of everything it reads.
type corrupting struct{ Target }

type badReader struct{ Reader }

func (c corrupting) Open(ctx context.Context, p string) (Reader, error) {
	r, err := c.Target.Open(ctx, p)
	return badReader{r}, err
}

func (r badReader) ReadAt(p []byte, off int64) (int, error) {
	n, err := r.Reader.ReadAt(p, off)
	if n > 0 {
		p[n/2] ^= 0x40
	}
	return n, err
}

// TestVerifyCatchesBadData: a target that returns wrong bytes fails the
// run in both verification modes, and "off" does not look.
func TestVerifyCatchesBadData(t *testing.T) {
	for _, mode := range []string{"inline", "after", "off"} {
		t.Run(mode, func(t *testing.T) {
			pt, err := openPosix(t.TempDir(), Options{})
			if err != nil {
				t.Fatal(err)
			}
			sc, _ := Lookup([]string{"hpcs01", "hpcs08"})
			rep, err := execute(ctx, Config{Scale: "tiny", Workers: 2, Verify: mode}, Scales["tiny"], corrupting{pt}, sc)
			if err != nil {
				t.Fatal(err)
			}
			want := 2
			if mode == "off" {
				want = 0
			}
			if rep.Failures != want {
				t.Fatalf("%d failures, want %d", rep.Failures, want)
			}
			if mode != "off" {
				ph := phase(rep, "hpcs01", "read")
				if ph.VerifyErrors == 0 || !strings.Contains(ph.Error, "data check") {
					t.Fatalf("read phase: %+v", ph)
				}
			}
		})
	}
}

// TestStonewallWearOut: a deadline stops workers of different speeds;
// each then runs on to the largest count any reached, so all end equal.
func TestStonewallWearOut(t *testing.T) {
	r := &Run{ctx: ctx}
	counts := make([]int64, 3)
	ph := r.runPhase(PhaseSpec{Name: "w", Workers: 3, Deadline: 150 * time.Millisecond, Work: func(w *Worker) error {
		var i int64
		for ; w.More(i, 1e6); i++ {
			t0 := now()
			time.Sleep(time.Duration(w.ID+1) * 2 * time.Millisecond)
			w.Op(t0, 10)
		}
		w.Finish(i)
		counts[w.ID] = i
		return nil
	}})
	if !ph.StonewallHit || ph.Error != "" {
		t.Fatalf("phase %+v", ph)
	}
	if counts[0] != counts[1] || counts[1] != counts[2] || counts[0] < 20 {
		t.Fatalf("counts %v: wear-out should even them out at the fastest's count", counts)
	}
	if ph.Ops != 3*counts[0] || ph.Bytes != 30*counts[0] {
		t.Fatalf("%d ops, %d bytes for counts %v", ph.Ops, ph.Bytes, counts)
	}
}

// TestFirstDone: with one quick and one slow worker, "first done" is the
// quick one's end with what both had done by then, and the phase lasts
// until the slow one ends.
func TestFirstDone(t *testing.T) {
	r := &Run{ctx: ctx}
	ph := r.runPhase(PhaseSpec{Name: "p", Workers: 2, Work: func(w *Worker) error {
		for range 10 {
			t0 := now()
			time.Sleep(time.Duration(1+9*w.ID) * time.Millisecond)
			w.Op(t0, 1)
		}
		return nil
	}})
	if ph.Ops != 20 || ph.OpsFirstDone < 10 || ph.OpsFirstDone >= 20 {
		t.Fatalf("ops %d, at first done %d", ph.Ops, ph.OpsFirstDone)
	}
	if !(ph.FirstDone < ph.Seconds/2) || ph.Seconds < 0.09 {
		t.Fatalf("first done %.3f s, last %.3f s", ph.FirstDone, ph.Seconds)
	}
	if ph.OpsPerSecFirstDone <= ph.OpsPerSec {
		t.Fatalf("the stonewall rate (%.0f/s) should exceed the last-done rate (%.0f/s) here", ph.OpsPerSecFirstDone, ph.OpsPerSec)
	}
}

// TestSetupBeforeTheClock: every worker's Setup has run, its read buffer
// ready with every page touched, before any worker works, and the phase's
// clock does not count it (a slow setup leaves a quick phase quick).
func TestSetupBeforeTheClock(t *testing.T) {
	r := &Run{ctx: ctx}
	var setups atomic.Int32
	const n = 3 << 20
	ph := r.runPhase(PhaseSpec{Name: "p", Workers: 3,
		Setup: func(w *Worker) {
			time.Sleep(200 * time.Millisecond)
			readBuffer(n)(w)
			setups.Add(1)
		},
		Work: func(w *Worker) error {
			if got := setups.Load(); got != 3 {
				return fmt.Errorf("worker %d works after %d of 3 setups", w.ID, got)
			}
			if len(w.buf) != n || w.buf[0] != 0xa5 || w.buf[n-4096] != 0xa5 {
				return fmt.Errorf("worker %d: buffer of %d bytes, pages not touched", w.ID, len(w.buf))
			}
			w.Op(now(), 1)
			return nil
		}})
	if ph.Error != "" || ph.Ops != 3 {
		t.Fatalf("phase: %q, %d ops", ph.Error, ph.Ops)
	}
	if ph.Seconds >= 0.2 {
		t.Fatalf("the phase counted its setup: %.3f s", ph.Seconds)
	}
}

// TestWorkerError: one worker's failure stops the others and is reported.
func TestWorkerError(t *testing.T) {
	r := &Run{ctx: ctx}
	ph := r.runPhase(PhaseSpec{Name: "p", Workers: 2, Deadline: time.Hour, Work: func(w *Worker) error {
		if w.ID == 1 {
			return errors.New("disk on fire")
		}
		var i int64
		for ; w.More(i, 1e9) && w.Ctx().Err() == nil; i++ {
			time.Sleep(time.Millisecond)
		}
		return w.Ctx().Err()
	}})
	if !strings.Contains(ph.Error, "disk on fire") {
		t.Fatalf("error %q", ph.Error)
	}
}

func TestPattern(t *testing.T) {
	p := newPattern()
	a := append([]byte(nil), p.at(7, 12345, 4096)...)
	p.reserve(8 << 20) // growth keeps every slice the same
	if !bytes.Equal(a, p.at(7, 12345, 4096)) || !p.check(7, 12345, a) {
		t.Fatal("pattern changed when it grew")
	}
	if p.check(8, 12345, a) || p.check(7, 12345+4096, a) {
		t.Fatal("another file or offset has the same bytes")
	}
	for _, n := range []int{1 << 19, 3 << 20, 5<<20 + 77} { // growth in several steps keeps the period
		p.reserve(n)
		d := p.data
		for i := patternPeriod; i < len(d); i += 4093 {
			if d[i] != d[i-patternPeriod] {
				t.Fatalf("after growing to %d: byte %d differs from one period before", len(d), i)
			}
		}
	}
	long := p.at(3, 0, 3<<20)
	if !bytes.Equal(long[:1<<20], p.at(3, 0, 1<<20)) || !bytes.Equal(long[2<<20:], p.at(3, 2<<20, 1<<20)) {
		t.Fatal("a long record is not the concatenation of short ones")
	}
}

func FuzzParseSize(f *testing.F) {
	for _, s := range []string{"4k", "1MiB", "160m", "2G", "0", "", "-1", "1x", "99999999999999999999t"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		v, err := ParseSize(s)
		if err == nil && v < 0 {
			t.Fatalf("ParseSize(%q) = %d", s, v)
		}
	})
}

func TestParseSize(t *testing.T) {
	for in, want := range map[string]int64{"4096": 4096, "4k": 4096, "4KiB": 4096, "1m": 1 << 20, "160MiB": 160 << 20, "2g": 2 << 30} {
		if got, err := ParseSize(in); err != nil || got != want {
			t.Errorf("ParseSize(%q) = %d, %v; want %d", in, got, err, want)
		}
	}
	for _, bad := range []string{"", "k", "-4k", "4q", "1.5m"} {
		if _, err := ParseSize(bad); err == nil {
			t.Errorf("ParseSize(%q) accepted", bad)
		}
	}
}

// TestStonewallWithReaders: in a phase of writers and readers at once (as
// hpcs03 runs), writers stopped by the deadline wait at the stonewall for
// the phase's workers to stop; readers, which never take part in the
// wear-out, count as stopped when they return. (They did not, and a
// writer slow enough to meet the deadline waited for ever.)
func TestStonewallWithReaders(t *testing.T) {
	r := &Run{ctx: ctx}
	done := make(chan []Phase, 1)
	go func() {
		done <- r.runRoles(PhaseSpec{Name: "duplex", Workers: 4, Deadline: 50 * time.Millisecond,
			Role: func(id int) string {
				if id < 2 {
					return "write"
				}
				return "read"
			},
			Work: func(w *Worker) error {
				if w.ID >= 2 { // a reader: a few steps, no More
					for range 3 {
						w.Op(now(), 1)
					}
					return nil
				}
				var i int64
				for ; w.More(i, 1e6); i++ {
					t0 := now()
					time.Sleep(2 * time.Millisecond)
					w.Op(t0, 1)
				}
				w.Finish(i)
				return nil
			}})
	}()
	select {
	case phs := <-done:
		if len(phs) == 0 || !phs[0].StonewallHit || phs[0].Error != "" {
			t.Fatalf("phases %+v", phs)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("the writers stonewalled beside readers never finished")
	}
}

// A core's CPU comes from its /metrics page: the counter named, unlabelled,
// as Prometheus's text format writes it; anything else is an error, never
// a number made up.
func TestMetricSeconds(t *testing.T) {
	page := "# HELP process_cpu_seconds_total Total user and system CPU time spent in seconds.\n" +
		"# TYPE process_cpu_seconds_total counter\nprocess_cpu_seconds_total 1.25\n" +
		"strata_process_cpu_seconds_total_other 9\nstrata_process_cpu_seconds_total 1.234567\n"
	for _, c := range []struct {
		page, name string
		want       time.Duration
		ok         bool
	}{
		{page, "strata_process_cpu_seconds_total", 1234567 * time.Microsecond, true},
		{page, "process_cpu_seconds_total", 1250 * time.Millisecond, true},
		{page, "go_goroutines", 0, false},
		{"process_cpu_seconds_total NaN\n", "process_cpu_seconds_total", 0, false},
		{"process_cpu_seconds_total -1\n", "process_cpu_seconds_total", 0, false},
		{"process_cpu_seconds_total 2e-3", "process_cpu_seconds_total", 2 * time.Millisecond, true},
	} {
		got, err := metricSeconds([]byte(c.page), c.name)
		if (err == nil) != c.ok || got != c.want {
			t.Errorf("%s in %q: %v, %v; want %v (ok %v)", c.name, c.page, got, err, c.want, c.ok)
		}
	}
}

func FuzzMetricSeconds(f *testing.F) {
	f.Add([]byte("process_cpu_seconds_total 1.5\n"))
	f.Add([]byte("process_cpu_seconds_total +Inf\nprocess_cpu_seconds_total 2"))
	f.Fuzz(func(t *testing.T, page []byte) {
		if d, err := metricSeconds(page, "process_cpu_seconds_total"); err == nil && d < 0 {
			t.Fatalf("%q: negative %v", page, d)
		}
	})
}
