package bench

import (
	"fmt"
	"slices"
)

// Median makes several reports of one run (the same scenarios against the
// same kind of target, each on a fresh server, taken in turns) into one:
// the first report with every phase's rate — MiB/s, ops/s and their
// first-done figures — replaced by the median over the reports that have
// that phase without failure. On a shared machine one run of a phase
// lasting a second moves by 10–20 % from the next; the median of a few
// is what a calibration can fit and a prediction be held to.
func Median(reps []*Report) (*Report, error) {
	if len(reps) == 0 {
		return nil, fmt.Errorf("no reports")
	}
	if len(reps) == 1 {
		return reps[0], nil
	}
	first := reps[0]
	for _, r := range reps[1:] {
		if r.Target.Kind != first.Target.Kind || r.Target.Devices != first.Target.Devices || r.Target.Sink != first.Target.Sink || r.Scale != first.Scale {
			return nil, fmt.Errorf("reports of different runs: %s (%d devices, scale %s, sink %q) and %s (%d devices, scale %s, sink %q)",
				first.Target.Spec, first.Target.Devices, first.Scale, first.Target.Sink, r.Target.Spec, r.Target.Devices, r.Scale, r.Target.Sink)
		}
	}
	type key struct{ scenario, phase string }
	all := map[key][]Phase{}
	for _, r := range reps {
		for _, res := range r.Results {
			for _, ph := range res.Phases {
				if !ph.Failed() && ph.Skipped == "" {
					k := key{res.Scenario, ph.Name}
					all[k] = append(all[k], ph)
				}
			}
		}
	}
	out := *first
	out.Runs = len(reps)
	out.Results = make([]Result, len(first.Results))
	for i, res := range first.Results {
		res.Phases = slices.Clone(res.Phases)
		for j := range res.Phases {
			ph := &res.Phases[j]
			phs := all[key{res.Scenario, ph.Name}]
			if len(phs) == 0 {
				continue
			}
			if ph.Failed() || ph.Skipped != "" {
				*ph = phs[0] // the first report's failed: take a run that did not
			}
			ph.MiBps = medianOf(phs, func(p Phase) float64 { return p.MiBps })
			ph.OpsPerSec = medianOf(phs, func(p Phase) float64 { return p.OpsPerSec })
			ph.MiBpsFirstDone = medianOf(phs, func(p Phase) float64 { return p.MiBpsFirstDone })
			ph.OpsPerSecFirstDone = medianOf(phs, func(p Phase) float64 { return p.OpsPerSecFirstDone })
		}
		out.Results[i] = res
	}
	return &out, nil
}

func medianOf(phs []Phase, f func(Phase) float64) float64 {
	v := make([]float64, len(phs))
	for i, p := range phs {
		v[i] = f(p)
	}
	slices.Sort(v)
	if n := len(v); n%2 == 0 {
		return (v[n/2-1] + v[n/2]) / 2
	}
	return v[len(v)/2]
}
