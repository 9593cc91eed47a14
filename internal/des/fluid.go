package des

import "math"

// Resource is something with a bandwidth that flows share: a link
// direction, a switch port, a server's CPU or memory copy, a device's
// media. Its capacity may depend on how many flows cross it (CapN): a
// disk's throughput falls as interleaved streams grow.
type Resource struct {
	Name string
	Cap  float64 // bytes/s; 0 with CapN unset means unlimited
	// CapN, when set, gives the capacity with n flows active (n ≥ 1).
	CapN func(n int) float64

	id    int
	flows []*Flow // active flows crossing it, in start order
	// Busy integrates use over time: bytes served (for utilisation).
	Bytes float64
	// solver scratch
	left  float64
	users int
	mark  uint64
}

func (r *Resource) capacity() float64 {
	n := len(r.flows)
	if r.CapN != nil && n > 0 {
		return r.CapN(n)
	}
	if r.Cap <= 0 {
		return math.Inf(1)
	}
	return r.Cap
}

// Active is the number of flows crossing r now.
func (r *Resource) Active() int { return len(r.flows) }

// Flow moves Size bytes across every resource of Path at once (the fluid
// view of a pipelined transfer), at the max-min fair rate, never above
// Limit (0: no per-flow limit). Done runs when the last byte is through.
type Flow struct {
	Path  []*Resource
	Limit float64
	Size  int64
	Done  func()
	Kind  uint16 // for the fingerprint
	Obj   int32

	left   float64 // bytes still to move, as of last
	last   Time
	rate   float64
	ev     *Event
	active bool
	frozen bool
	mark   uint64
	pos    int // index in Fluid.flows
}

// Rate is the flow's current rate in bytes/s.
func (f *Flow) Rate() float64 { return f.rate }

// Fluid shares bandwidth among flows by weighted max-min (progressive
// filling), recomputed only when a flow starts or ends and only over the
// connected component of resources that change touches (SimGrid's
// selective update).
type Fluid struct {
	sim   *Sim
	flows []*Flow
	epoch uint64
	nres  int
	// scratch for one solve
	compF   []*Flow
	compR   []*Resource
	limited []*Flow
	// Solves counts recomputations (for benchmarks).
	Solves uint64
}

func newFluid(s *Sim) *Fluid { return &Fluid{sim: s} }

// NewResource registers a resource with a fixed capacity in bytes/s.
func (fl *Fluid) NewResource(name string, cap float64) *Resource {
	fl.nres++
	return &Resource{Name: name, Cap: cap, id: fl.nres}
}

// Start begins f now. A flow of size 0 completes at once (as an event, so
// callers see the same order either way).
func (fl *Fluid) Start(f *Flow) {
	f.left = float64(f.Size)
	f.last = fl.sim.now
	f.rate = 0
	f.active = true
	f.pos = len(fl.flows)
	fl.flows = append(fl.flows, f)
	for _, r := range f.Path {
		r.flows = append(r.flows, f)
	}
	fl.resolve(f)
}

// Abort stops f without running Done; what it had moved stays counted.
func (fl *Fluid) Abort(f *Flow) {
	if !f.active {
		return
	}
	fl.sim.Cancel(f.ev)
	fl.detach(f)
	fl.resolve(f)
}

func (fl *Fluid) detach(f *Flow) {
	fl.advance(f)
	f.active = false
	last := fl.flows[len(fl.flows)-1]
	fl.flows[f.pos] = last
	last.pos = f.pos
	fl.flows = fl.flows[:len(fl.flows)-1]
	for _, r := range f.Path {
		for i, g := range r.flows {
			if g == f {
				// keep start order: the solver's sums run in this order
				copy(r.flows[i:], r.flows[i+1:])
				r.flows[len(r.flows)-1] = nil
				r.flows = r.flows[:len(r.flows)-1]
				break
			}
		}
	}
}

// advance brings f's remaining bytes up to now at its current rate.
func (fl *Fluid) advance(f *Flow) {
	dt := fl.sim.now - f.last
	if dt > 0 && f.rate > 0 {
		moved := f.rate * float64(dt) / 1e9
		if moved > f.left {
			moved = f.left
		}
		f.left -= moved
		for _, r := range f.Path {
			r.Bytes += moved
		}
	}
	f.last = fl.sim.now
}

func (fl *Fluid) finish(f *Flow) {
	f.ev = nil
	fl.detach(f)
	// Rounding may leave a sliver; the completion time was rounded up, so
	// the flow is through.
	for _, r := range f.Path {
		r.Bytes += f.left
	}
	f.left = 0
	fl.resolve(f)
	if f.Done != nil {
		f.Done()
	}
}

// resolve recomputes rates over the component of resources reachable from
// f's path through active flows.
func (fl *Fluid) resolve(seed *Flow) {
	fl.Solves++
	fl.epoch++
	ep := fl.epoch
	fl.compF = fl.compF[:0]
	fl.compR = fl.compR[:0]
	// breadth-first over resources and flows, in slice order (no maps)
	for _, r := range seed.Path {
		if r.mark != ep {
			r.mark = ep
			fl.compR = append(fl.compR, r)
		}
	}
	if seed.active && seed.mark != ep {
		seed.mark = ep
		fl.compF = append(fl.compF, seed)
	}
	for i := 0; i < len(fl.compR); i++ {
		for _, g := range fl.compR[i].flows {
			if g.mark == ep {
				continue
			}
			g.mark = ep
			fl.compF = append(fl.compF, g)
			for _, r := range g.Path {
				if r.mark != ep {
					r.mark = ep
					fl.compR = append(fl.compR, r)
				}
			}
		}
	}
	for _, g := range fl.compF {
		fl.advance(g)
		g.frozen = false
	}
	fl.limited = maxMin(fl.compF, fl.compR, fl.limited[:0])
	now := fl.sim.now
	for _, g := range fl.compF {
		var at Time = Forever
		if g.left <= 0 {
			at = now
		} else if g.rate > 0 {
			at = now + FromSeconds(g.left/g.rate)
		}
		switch {
		case at == Forever:
			fl.sim.Cancel(g.ev)
			g.ev = nil
		case g.ev != nil && g.ev.Pending():
			if g.ev.at != at {
				fl.sim.Move(g.ev, at)
			}
		default:
			g := g
			g.ev = fl.sim.Schedule(at, 0, g.Kind, g.Obj, func() { fl.finish(g) })
		}
	}
}

// SetCap changes r's capacity from now on (a disk tier losing an array's
// bandwidth to a rebuild): the flows crossing it move at their old rates
// until now and at new ones after.
func (fl *Fluid) SetCap(r *Resource, cap float64) {
	if len(r.flows) == 0 {
		r.Cap = cap
		return
	}
	// resolve advances every flow it reaches at its old rate first
	r.Cap = cap
	fl.resolve(r.flows[0])
}

// maxMin sets each flow's rate by progressive filling: repeatedly find the
// tightest constraint (a resource's remaining capacity shared equally by
// its unfrozen flows, or a flow's own limit), freeze the flows it binds at
// that rate, and take their rate from every resource they cross.
// limited is scratch space for the flows with a limit of their own, which
// every round looks at (few: most flows are bound by what they cross); it
// is returned for reuse.
func maxMin(flows []*Flow, res []*Resource, limited []*Flow) []*Flow {
	for _, r := range res {
		r.left = r.capacity()
		r.users = len(r.flows)
	}
	for _, f := range flows {
		if f.Limit > 0 {
			limited = append(limited, f)
		}
	}
	unfrozen := len(flows)
	for unfrozen > 0 {
		level := math.Inf(1)
		var bott *Resource
		for _, r := range res {
			if r.users > 0 {
				if s := r.left / float64(r.users); s < level {
					level, bott = s, r
				}
			}
		}
		var lim *Flow
		for _, f := range limited {
			if !f.frozen && f.Limit < level {
				level, lim, bott = f.Limit, f, nil
			}
		}
		if math.IsInf(level, 1) {
			// nothing constrains the rest: give them "infinite" speed,
			// i.e. finish at once
			for _, f := range flows {
				if !f.frozen {
					f.rate = math.MaxFloat64
					f.frozen = true
				}
			}
			return limited
		}
		if level < 0 {
			level = 0
		}
		freeze := func(f *Flow) {
			f.rate = level
			f.frozen = true
			unfrozen--
			for _, r := range f.Path {
				r.left -= level
				if r.left < 0 {
					r.left = 0
				}
				r.users--
			}
		}
		if lim != nil {
			freeze(lim)
			continue
		}
		for _, f := range bott.flows {
			if !f.frozen {
				freeze(f)
			}
		}
	}
	return limited
}
