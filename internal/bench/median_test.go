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
