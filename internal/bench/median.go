package bench

import (
	"fmt"
	"math"
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
		a, b := &first.Target, &r.Target
		if b.Kind != a.Kind || b.Devices != a.Devices || b.DeviceBandwidth != a.DeviceBandwidth || b.Uncapped != a.Uncapped || b.Sink != a.Sink || r.Scale != first.Scale {
			return nil, fmt.Errorf("reports of different runs: %s (%d devices, %s, scale %s, sink %q) and %s (%d devices, %s, scale %s, sink %q)",
				a.Spec, a.Devices, capOf(a), first.Scale, a.Sink, b.Spec, b.Devices, capOf(b), r.Scale, b.Sink)
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
			// phs[0] is the first report's phase, or where that failed the
			// first run's that did not
			*ph = MedianPhase(phs)
		}
		out.Results[i] = res
	}
	return &out, nil
}

// MedianPhase is phases' first with its rates, both sides' CPU an
// operation and its catalog groups each replaced by the median over the
// phases that have the figure (a phase of stats may hold another's
// groups in one run and none in the next).
func MedianPhase(phases []Phase) Phase {
	m := phases[0]
	m.MiBps = medianOf(phases, func(p Phase) float64 { return p.MiBps })
	m.OpsPerSec = medianOf(phases, func(p Phase) float64 { return p.OpsPerSec })
	m.MiBpsFirstDone = medianOf(phases, func(p Phase) float64 { return p.MiBpsFirstDone })
	m.OpsPerSecFirstDone = medianOf(phases, func(p Phase) float64 { return p.OpsPerSecFirstDone })
	if m.CPU != nil {
		cpu := &PhaseCPU{Client: medianOf(phases, func(p Phase) float64 {
			if p.CPU == nil {
				return math.NaN()
			}
			return p.CPU.Client
		})}
		if m.CPU.Server != nil {
			server := medianOf(phases, func(p Phase) float64 {
				if p.CPU == nil || p.CPU.Server == nil {
					return math.NaN()
				}
				return *p.CPU.Server
			})
			cpu.Server = &server
		}
		m.CPU = cpu
	}
	if m.Groups != nil {
		groups := func(f func(*PhaseGroups) float64) float64 {
			return medianOf(phases, func(p Phase) float64 {
				if p.Groups == nil {
					return math.NaN()
				}
				return f(p.Groups)
			})
		}
		m.Groups = &PhaseGroups{
			Groups:      int64(groups(func(g *PhaseGroups) float64 { return float64(g.Groups) })),
			OpsPerGroup: groups(func(g *PhaseGroups) float64 { return g.OpsPerGroup }),
			USPerGroup:  groups(func(g *PhaseGroups) float64 { return g.USPerGroup }),
		}
	}
	return m
}

// medianOf is the median of f over phases, those giving NaN left out.
func medianOf(phases []Phase, f func(Phase) float64) float64 {
	var v []float64
	for _, p := range phases {
		if x := f(p); !math.IsNaN(x) {
			v = append(v, x)
		}
	}
	if len(v) == 0 {
		return math.NaN()
	}
	slices.Sort(v)
	if n := len(v); n%2 == 0 {
		return (v[n/2-1] + v[n/2]) / 2
	}
	return v[len(v)/2]
}

// capOf says what a report records of its devices' caps.
func capOf(t *TargetInfo) string {
	switch {
	case t.DeviceBandwidth > 0:
		return fmt.Sprintf("capped at %d B/s", t.DeviceBandwidth)
	case t.Uncapped:
		return "uncapped"
	}
	return "caps not recorded"
}
