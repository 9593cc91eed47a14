package sim

import (
	"fmt"
	"math"
	"sort"

	"github.com/strata-storage/strata/internal/des"
)

// Result is one discrete-event run.
type Result struct {
	Name      string  `json:"name"`
	Seed      uint64  `json:"seed"`
	Op        string  `json:"op"`
	Streams   int     `json:"streams"`
	Bytes     int64   `json:"bytes"`
	Seconds   float64 `json:"simulated_seconds"`
	MBps      float64 `json:"mb_per_s"`       // aggregate: all bytes / (last end − first start)
	ReadMBps  float64 `json:"read_mb_per_s"`  // mixed: aggregate of the readers
	WriteMBps float64 `json:"write_mb_per_s"` // and of the writers
	// IOPS is requests completed per second, all streams.
	IOPS float64 `json:"ops_per_s"`
	// PerStream is each stream's own rate, MB/s, in stream order.
	PerStream   []float64 `json:"per_stream_mb_per_s"`
	Events      uint64    `json:"events"`
	Fingerprint string    `json:"fingerprint"`
	WallSeconds float64   `json:"wall_seconds,omitempty"`
	// Busiest is the resource that moved the most bytes relative to its
	// capacity: where the DES says the limit is.
	Busiest string      `json:"busiest,omitempty"`
	Bound   BoundResult `json:"bound"`
	// Rebuild is set when array members fail.
	Rebuild *RebuildResult `json:"rebuild,omitempty"`
	// Recall and Migrate are set for tape studies.
	Recall  *RecallResult  `json:"recall,omitempty"`
	Migrate *MigrateResult `json:"migrate,omitempty"`
	Site    *SiteResult    `json:"site,omitempty"`
	Meta    *MetaResult    `json:"metadata,omitempty"`
	// Groups is each client group's share, for a study with groups.
	Groups []GroupResult `json:"groups,omitempty"`
}

// RebuildResult is what users saw while arrays ran degraded, and how long
// the spares took.
type RebuildResult struct {
	Arrays   int     `json:"arrays"`
	Failed   int     `json:"failed_per_array"`
	FailedAt float64 `json:"failed_at_s"`
	// Seconds is from the failure until the last array's spares were
	// whole; 0 without a rebuild.
	Seconds float64 `json:"rebuild_s,omitempty"`
	// MemberMBps is each spare's rebuild rate: its bytes over Seconds.
	MemberMBps float64 `json:"rebuild_mb_per_s,omitempty"`
	// UserMBps is the users' aggregate from the failure until the
	// rebuild ended or the workload did, whichever was first (Window
	// seconds); 0 when the workload ended before the failure.
	UserMBps float64 `json:"user_mb_per_s"`
	Window   float64 `json:"window_s"`
	// HealthyMBps is the users' aggregate before the failure (0 when
	// it was at the start): the baseline from the same run.
	HealthyMBps float64 `json:"healthy_mb_per_s,omitempty"`
}

// model is a built simulation.
type model struct {
	sim     *des.Sim
	streams []*Stream
	group   []int // each stream's client group (index into parts)
	res     []*des.Resource
	arrays  []*Array
}

// client is one client host's resources on the data path.
type client struct {
	up, down, duplex, cpu *des.Resource
	rackUp, rackDown      *des.Resource
	sink                  *Sink
}

// server is one server's resources and its devices.
type server struct {
	up, down, duplex, copy, ch *des.Resource
	devs                       []Device
	links                      []*des.Resource
}

// build lays out the topology and the streams: each client group's hosts
// (the groups' in order), the switch, each server class's servers and
// devices, then each group's streams on its class.
func build(c *Config, seed uint64) (*model, error) {
	s := des.NewSim(seed)
	m := &model{sim: s}
	fl := s.Fluid
	newRes := func(name string, cap float64) *des.Resource {
		if cap <= 0 {
			return nil
		}
		r := fl.NewResource(name, cap)
		m.res = append(m.res, r)
		return r
	}
	prefix := func(name string) string {
		if name == "" {
			return ""
		}
		return name + "."
	}
	hosts := make([][]client, len(c.parts))
	for pi, p := range c.parts {
		hosts[pi] = m.clients(p.c, prefix(p.name), newRes)
	}
	sw := newRes("switch", float64(c.Network.Switch))
	classes := make([][]server, len(c.classes))
	devID := int32(0)
	for ci, sc := range c.classes {
		classes[ci] = m.servers(sc.c, prefix(sc.name), &devID, c.parts, ci, newRes)
	}
	used := make([][]int64, len(classes))
	for ci, srv := range classes {
		used[ci] = make([]int64, len(srv)*c.classes[ci].c.Storage.PerServer)
	}
	// each class places streams round robin across the groups that use
	// it, as placement by load does: a group starts where the one before
	// it on the class left off
	next := make([]int, len(classes))
	g := 0
	for pi, p := range c.parts {
		gc, cls := p.c, hosts[pi]
		w := gc.Workload
		var limit float64
		if gc.Clients.TCPWindow > 0 && gc.Clients.Latency > 0 {
			limit = float64(gc.Clients.TCPWindow) / (2 * gc.Clients.Latency / 1e3)
		}
		N := len(cls)
		for k := 0; k < N*w.Streams; k, g = k+1, g+1 {
			ci := k % N
			write := w.Op == "write" || w.Op == "mixed" && k%2 == 0
			st := &Stream{ID: int32(g), Write: write, FileSize: int64(w.File), Files: w.Files, Record: int64(w.Record),
				Depth: w.Depth, Sync: w.Sync, Limit: limit}
			if w.Layout == "stripe" {
				st.Unit = int64(w.StripeUnit)
			}
			if limit == 0 {
				// a command's round trip; with a TCP window the path's delay
				// is in the window's cap on each flow instead
				st.Latency = des.Time(gc.Clients.Latency * 1e6)
			}
			st.MaxOps = w.Requests
			if !write {
				st.Sink = cls[ci].sink
			}
			if w.Pattern == "random" {
				st.Random = s.Rand(uint64(g), 3)
			}
			st.Targets = place(gc, next[p.class]+k, cls[ci], classes[p.class], used[p.class], write, sw)
			if p.from >= 0 {
				st.Source = place(p.src, next[p.from]+k, cls[ci], classes[p.from], used[p.from], false, sw)
			}
			m.streams = append(m.streams, st)
			m.group = append(m.group, pi)
		}
		next[p.class] += N * w.Streams
		if p.from >= 0 {
			next[p.from] += N * w.Streams
		}
	}
	return m, nil
}

// clients makes a group's client hosts.
func (m *model) clients(c *Config, prefix string, newRes func(string, float64) *des.Resource) []client {
	w := c.Workload
	cls := make([]client, c.Clients.Count)
	var rackUp, rackDown *des.Resource
	for i := range cls {
		name := fmt.Sprintf("%sclient%d", prefix, i)
		cls[i].up = newRes(name+".nic.out", float64(c.Clients.NIC))
		cls[i].down = newRes(name+".nic.in", float64(c.Clients.NIC))
		cls[i].duplex = newRes(name+".nic.duplex", float64(c.Clients.Duplex))
		if k := c.Network.RackSize; k > 0 {
			// a group's clients fill racks of their own
			if i%k == 0 {
				rackUp = newRes(fmt.Sprintf("%srack%d.uplink.out", prefix, i/k), float64(c.Network.RackUplink))
				rackDown = newRes(fmt.Sprintf("%srack%d.uplink.in", prefix, i/k), float64(c.Network.RackUplink))
			}
			cls[i].rackUp, cls[i].rackDown = rackUp, rackDown
		}
		if disk := newRes(name+".sink", float64(c.Clients.SinkRate)); disk != nil {
			// the host's dirty threshold, shared by its readers
			cls[i].sink = &Sink{Disk: disk, Dirty: int64(c.Clients.SinkDirty) / int64(max(1, w.Streams)),
				Copy: newRes(name+".sink.copy", float64(c.Clients.SinkCopy))}
		}
		if c.Clients.CPUPerMB > 0 {
			cls[i].cpu = newRes(name+".cpu", float64(c.Clients.CPUs)*1e6/(c.Clients.CPUPerMB/1e3))
		}
	}
	return cls
}

// servers makes a class's servers and their devices. A curve device's
// shared rate follows what the groups on the class do (reads only: the
// read rate).
func (m *model) servers(c *Config, prefix string, devID *int32, parts []part, class int, newRes func(string, float64) *des.Resource) []server {
	write := false
	for _, p := range parts {
		if p.class == class && p.c.Workload.Op != "read" {
			write = true
		}
	}
	srv := make([]server, c.Servers.Count)
	dp := c.diskParams()
	for j := range srv {
		name := fmt.Sprintf("%sserver%d", prefix, j)
		var shared *des.Resource
		if cp := c.Storage.Curve; c.Storage.Kind == "curve" {
			shared = newRes(name+".shared", cp.sharedRate(write))
		}
		srv[j].up = newRes(name+".nic.out", float64(c.Servers.NIC))
		srv[j].down = newRes(name+".nic.in", float64(c.Servers.NIC))
		srv[j].duplex = newRes(name+".nic.duplex", float64(c.Servers.Duplex))
		srv[j].copy = newRes(name+".copy", float64(c.Servers.Copy))
		srv[j].ch = newRes(name+".channel", float64(c.Servers.Channel))
		for k := 0; k < c.Storage.PerServer; k++ {
			*devID++
			var d Device
			switch c.Storage.Kind {
			case "disk":
				d = NewDisk(m.sim, *devID, dp)
			case "raid5", "raid6", "declustered":
				a := NewArray(m.sim, *devID, c.Storage.Array, dp)
				m.arrays = append(m.arrays, a)
				d = a
			case "curve":
				cd := NewCurveDevice(m.sim, *devID, fmt.Sprintf("%s.dev%d", name, k), *c.Storage.Curve, write, shared)
				m.res = append(m.res, cd.res)
				d = cd
			}
			srv[j].devs = append(srv[j].devs, d)
			srv[j].links = append(srv[j].links, newRes(fmt.Sprintf("%s.dev%d.link", name, k), float64(c.Storage.Link)))
		}
	}
	return srv
}

// place chooses the devices of the class's k-th stream and the network
// path to each: the layout's devices, with space for the stream's files
// handed out in order.
func place(c *Config, k int, cl client, srv []server, used []int64, write bool, sw *des.Resource) []Target {
	w := c.Workload
	M := len(srv)
	devs := len(used)
	var ds []int // the class's device indices
	switch {
	case w.OneDevice:
		ds = []int{0}
	case w.Layout == "stripe":
		// PVFS's and Strata's way: every request over k devices,
		// each stream's file on the next k devices (placement
		// balances by load: files overlap only when they must)
		n := w.Stripe
		if n <= 0 || n > devs {
			n = devs
		}
		// once the files have gone round the devices, the next
		// round starts one device further, so files striped unit
		// by unit do not all start on the same device
		start := k*n + k*n/devs
		for i := 0; i < n; i++ {
			// device d lives on server d mod M, so a stripe spreads
			// over servers before it doubles up on one
			ds = append(ds, (start+i)%devs)
		}
	default:
		// CASTOR's way: whole files, spread round-robin over servers,
		// then over each server's devices
		ds = []int{k % devs}
	}
	span := int64(w.File) * int64(w.Files)
	var ts []Target
	for _, d := range ds {
		sj, j := d%M, d/M
		share := span / int64(len(ds))
		ts = append(ts, Target{Dev: srv[sj].devs[j], Path: path(cl, srv[sj], j, write, sw), Base: used[d]})
		// space for this stream's share, rounded up to 1 GiB so streams
		// do not share tracks
		used[d] += (share + (1<<30 - 1)) &^ (1<<30 - 1)
	}
	return ts
}

// path is the resources a stream's bytes cross between a client and a
// server's device j, in the direction they flow.
func path(cl client, sv server, j int, write bool, sw *des.Resource) []*des.Resource {
	var p []*des.Resource
	add := func(r *des.Resource) {
		if r != nil {
			p = append(p, r)
		}
	}
	if write {
		add(cl.cpu)
		add(cl.up)
		add(cl.rackUp)
		add(sw)
		add(sv.down)
	} else {
		add(sv.up)
		add(sw)
		add(cl.rackDown)
		add(cl.down)
		add(cl.cpu)
	}
	add(cl.duplex)
	add(sv.duplex)
	add(sv.copy)
	add(sv.ch)
	add(sv.links[j])
	return p
}

// Run simulates the study once.
func Run(c *Config, seed uint64) (*Result, error) {
	switch c.Workload.Op {
	case "recall":
		return runRecall(c, seed)
	case "migrate":
		return runMigrate(c, seed)
	case "site":
		return runSite(c, seed)
	case "create", "stat", "remove":
		return runMeta(c, seed)
	}
	m, err := build(c, seed)
	if err != nil {
		return nil, err
	}
	s := m.sim
	for _, st := range m.streams {
		st.Run(s)
	}
	rw := m.watchRebuild(c)
	// a guard, not a limit a real study reaches: 2e9 events is minutes
	s.LimitEvents(2e9)
	if _, err := s.Run(des.Forever); err != nil {
		return nil, fmt.Errorf("sim: %s: %w", c.Name, err)
	}
	r := &Result{Name: c.Name, Seed: seed, Op: c.Workload.Op, Streams: len(m.streams), Events: s.Events(), Fingerprint: fmt.Sprintf("%016x", s.Fingerprint())}
	var first, last des.Time = des.Forever, 0
	var rb, wb, ops int64
	var rfirst, rlast, wfirst, wlast des.Time = des.Forever, 0, des.Forever, 0
	for _, st := range m.streams {
		if st.active {
			return nil, fmt.Errorf("sim: %s: stream %d did not finish (%d of %d bytes): a model deadlock", c.Name, st.ID, st.Bytes, st.FileSize*int64(st.Files))
		}
		r.Bytes += st.Bytes
		ops += st.Ops
		first, last = min(first, st.Start), max(last, st.End)
		r.PerStream = append(r.PerStream, round3(st.Rate()/1e6))
		if st.Write {
			wb += st.Bytes
			wfirst, wlast = min(wfirst, st.Start), max(wlast, st.End)
		} else {
			rb += st.Bytes
			rfirst, rlast = min(rfirst, st.Start), max(rlast, st.End)
		}
	}
	r.Seconds = (last - first).Seconds()
	if r.Seconds > 0 {
		r.MBps = round3(float64(r.Bytes) / r.Seconds / 1e6)
		r.IOPS = round3(float64(ops) / r.Seconds)
	}
	if d := (wlast - wfirst).Seconds(); wb > 0 && d > 0 {
		r.WriteMBps = round3(float64(wb) / d / 1e6)
	}
	if d := (rlast - rfirst).Seconds(); rb > 0 && d > 0 {
		r.ReadMBps = round3(float64(rb) / d / 1e6)
	}
	// the busiest fluid resource, by share of its capacity used
	best := 0.0
	for _, res := range m.res {
		if res.Cap <= 0 || r.Seconds <= 0 {
			continue
		}
		if u := res.Bytes / (res.Cap * r.Seconds); u > best+1e-9 {
			best, r.Busiest = u, fmt.Sprintf("%s (%.0f%% busy)", res.Name, math.Min(u, 1)*100)
		}
	}
	r.Bound = Bound(c)
	r.Rebuild = rw.result(r.Bytes, first, last)
	r.Groups = m.groupResults(c)
	if len(r.Groups) > 0 {
		r.Op = "groups"
	}
	return r, nil
}

// groupResults is each client group's share of the run; nil for a study
// without groups.
func (m *model) groupResults(c *Config) []GroupResult {
	if len(c.Clients.Groups) == 0 {
		return nil
	}
	out := make([]GroupResult, len(c.parts))
	first := make([]des.Time, len(c.parts))
	last := make([]des.Time, len(c.parts))
	for i, p := range c.parts {
		b := p.bound()
		out[i] = GroupResult{Name: p.name, Class: c.classes[p.class].name, Op: p.op(), Alone: b.MBps, AloneBinding: b.Binding}
		if p.from >= 0 {
			out[i].From = c.classes[p.from].name
		}
		first[i] = des.Forever
	}
	for k, st := range m.streams {
		i := m.group[k]
		out[i].Streams++
		out[i].Bytes += st.Bytes
		first[i], last[i] = min(first[i], st.Start), max(last[i], st.End)
	}
	for i := range out {
		if d := (last[i] - first[i]).Seconds(); d > 0 {
			out[i].MBps = round3(float64(out[i].Bytes) / d / 1e6)
		}
	}
	return out
}

// rebuildWatch counts the users' bytes from the arrays' failure to their
// rebuild.
type rebuildWatch struct {
	c          *Config
	arrays     []*Array
	at         des.Time // failure
	bytes0     int64    // users' bytes by then
	done       des.Time // every spare whole; 0 before
	bytes1     int64
	rebuilding int
}

func (m *model) watchRebuild(c *Config) *rebuildWatch {
	a := c.Storage.Array
	if len(m.arrays) == 0 || a.Failed == 0 {
		return nil
	}
	w := &rebuildWatch{c: c, arrays: m.arrays, at: a.failAt, rebuilding: len(m.arrays)}
	userBytes := func() int64 {
		var n int64
		for _, st := range m.streams {
			n += st.Bytes
		}
		return n
	}
	m.sim.Schedule(a.failAt, 1, evRebuild, -1, func() { w.bytes0 = userBytes() })
	for _, ar := range m.arrays {
		ar.OnRebuilt = func() {
			if w.rebuilding--; w.rebuilding == 0 {
				w.done, w.bytes1 = m.sim.Now(), userBytes()
			}
		}
	}
	return w
}

// result is the rebuild's summary, given the users' bytes and the
// workload's end.
func (w *rebuildWatch) result(total int64, start, end des.Time) *RebuildResult {
	if w == nil {
		return nil
	}
	a := w.c.Storage.Array
	r := &RebuildResult{Arrays: len(w.arrays), Failed: a.Failed, FailedAt: w.at.Seconds()}
	t1, b1 := end, total
	if w.done > 0 {
		r.Seconds = round3((w.done - w.at).Seconds())
		ext := float64(a.RebuildExtent)
		if ext <= 0 {
			ext = float64(w.c.diskParams().Capacity)
		}
		if r.Seconds > 0 {
			r.MemberMBps = round3(ext / r.Seconds / 1e6)
		}
		if w.done < end {
			t1, b1 = w.done, w.bytes1
		}
	}
	if d := (t1 - w.at).Seconds(); d > 0 {
		r.Window = round3(d)
		r.UserMBps = round3(float64(b1-w.bytes0) / d / 1e6)
	}
	if d := (min(w.at, end) - start).Seconds(); d > 0 {
		r.HealthyMBps = round3(float64(w.bytes0) / d / 1e6)
	}
	return r
}

func round3(v float64) float64 { return math.Round(v*1000) / 1000 }

func sortStrings(s []string) { sort.Strings(s) }
