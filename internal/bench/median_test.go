package bench

import (
	"strings"
	"testing"
)

func TestMedian(t *testing.T) {
	report := func(sink string, write, read float64, readErr string) *Report {
		return &Report{Scale: "small", Target: TargetInfo{Kind: "strata", Devices: 4, Sink: sink}, Results: []Result{{
			Scenario: "scaling",
			Phases: []Phase{
				{Name: "write N=1 M=1", MiBps: write, OpsPerSec: write / 4},
				{Name: "read N=1 M=1", MiBps: read, OpsPerSec: read / 4, Error: readErr},
			},
		}}}
	}
	capped := func(r *Report) *Report { r.Target.DeviceBandwidth = 50e6; return r }
	rate := func(r *Report, phase string) float64 {
		for _, ph := range r.Results[0].Phases {
			if ph.Name == phase {
				return ph.MiBps
			}
		}
		t.Fatalf("no phase %q", phase)
		return 0
	}
	for _, tc := range []struct {
		name        string
		reps        []*Report
		write, read float64
		runs        int
		err         string
	}{
		{"one run is itself", []*Report{report("", 100, 200, "")}, 100, 200, 0, ""},
		{"odd: the middle", []*Report{report("", 120, 200, ""), report("", 90, 260, ""), report("", 100, 180, "")}, 100, 200, 3, ""},
		{"even: the mean of the middle two", []*Report{report("", 120, 200, ""), report("", 90, 260, "")}, 105, 230, 2, ""},
		{"a failed phase does not count", []*Report{report("", 120, 1, "refused"), report("", 90, 260, ""), report("", 100, 180, "")}, 100, 220, 3, ""},
		{"different sinks are different runs", []*Report{report("", 100, 200, ""), report("/tmp/s", 100, 200, "")}, 0, 0, 0, "different runs"},
		{"capped and uncapped devices are different runs", []*Report{report("", 100, 200, ""), capped(report("", 100, 200, ""))}, 0, 0, 0, "different runs"},
		{"none", nil, 0, 0, 0, "no reports"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m, err := Median(tc.reps)
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("err = %v, want %q", err, tc.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if w, r := rate(m, "write N=1 M=1"), rate(m, "read N=1 M=1"); w != tc.write || r != tc.read {
				t.Errorf("write, read = %g, %g; want %g, %g", w, r, tc.write, tc.read)
			}
			if m.Runs != tc.runs {
				t.Errorf("Runs = %d, want %d", m.Runs, tc.runs)
			}
			if m.Results[0].Phases[1].Failed() {
				t.Errorf("the median's read phase is a failed run's: %+v", m.Results[0].Phases[1])
			}
			if len(tc.reps) > 1 && rate(tc.reps[0], "write N=1 M=1") != 120 {
				t.Errorf("the first report was changed")
			}
		})
	}
}

// Each figure's median is over the phases that have it: a phase of stats
// holds another's catalog groups in one run and none in the next.
func TestMedianPhase(t *testing.T) {
	srv := func(v float64) *float64 { return &v }
	phs := []Phase{
		{OpsPerSec: 30, CPU: &PhaseCPU{Client: 3, Server: srv(30)}, Groups: &PhaseGroups{Groups: 10, OpsPerGroup: 2, USPerGroup: 200}},
		{OpsPerSec: 10, CPU: &PhaseCPU{Client: 1}},
		{OpsPerSec: 20, CPU: &PhaseCPU{Client: 2, Server: srv(10)}, Groups: &PhaseGroups{Groups: 20, OpsPerGroup: 4, USPerGroup: 100}},
	}
	m := MedianPhase(phs)
	if m.OpsPerSec != 20 || m.CPU.Client != 2 || *m.CPU.Server != 20 || m.Groups.Groups != 15 || m.Groups.OpsPerGroup != 3 || m.Groups.USPerGroup != 150 {
		t.Errorf("median %+v, CPU %+v (server %g), groups %+v", m, m.CPU, *m.CPU.Server, m.Groups)
	}
	if *phs[0].CPU.Server != 30 || phs[0].Groups.Groups != 10 {
		t.Errorf("the first phase was changed")
	}
}
