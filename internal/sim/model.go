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
	res     []*des.Resource
	arrays  []*Array
}

// build lays out the topology and the streams.
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
	N, M := c.Clients.Count, c.Servers.Count
	w := c.Workload
	// each client: NIC out, NIC in (full duplex) and CPU (1/c bytes/s)
	type client struct {
		up, down, duplex, cpu *des.Resource
		rackUp, rackDown      *des.Resource
		sink                  *Sink
	}
	cls := make([]client, N)
	var rackUp, rackDown *des.Resource
	for i := range cls {
		cls[i].up = newRes(fmt.Sprintf("client%d.nic.out", i), float64(c.Clients.NIC))
		cls[i].down = newRes(fmt.Sprintf("client%d.nic.in", i), float64(c.Clients.NIC))
		cls[i].duplex = newRes(fmt.Sprintf("client%d.nic.duplex", i), float64(c.Clients.Duplex))
		if k := c.Network.RackSize; k > 0 {
			if i%k == 0 {
				rackUp = newRes(fmt.Sprintf("rack%d.uplink.out", i/k), float64(c.Network.RackUplink))
				rackDown = newRes(fmt.Sprintf("rack%d.uplink.in", i/k), float64(c.Network.RackUplink))
			}
			cls[i].rackUp, cls[i].rackDown = rackUp, rackDown
		}
		if disk := newRes(fmt.Sprintf("client%d.sink", i), float64(c.Clients.SinkRate)); disk != nil {
			// the host's dirty threshold, shared by its readers
			cls[i].sink = &Sink{Disk: disk, Dirty: int64(c.Clients.SinkDirty) / int64(max(1, w.Streams)),
				Copy: newRes(fmt.Sprintf("client%d.sink.copy", i), float64(c.Clients.SinkCopy))}
		}
		if c.Clients.CPUPerMB > 0 {
			cls[i].cpu = newRes(fmt.Sprintf("client%d.cpu", i), float64(c.Clients.CPUs)*1e6/(c.Clients.CPUPerMB/1e3))
		}
	}
	sw := newRes("switch", float64(c.Network.Switch))
	type server struct {
		up, down, duplex, copy, ch *des.Resource
		devs                       []Device
		links                      []*des.Resource
	}
	srv := make([]server, M)
	dp := c.diskParams()
	devID := int32(0)
	for j := range srv {
		var shared *des.Resource
		if cp := c.Storage.Curve; c.Storage.Kind == "curve" {
			shared = newRes(fmt.Sprintf("server%d.shared", j), cp.sharedRate(w.Op != "read"))
		}
		srv[j].up = newRes(fmt.Sprintf("server%d.nic.out", j), float64(c.Servers.NIC))
		srv[j].down = newRes(fmt.Sprintf("server%d.nic.in", j), float64(c.Servers.NIC))
		srv[j].duplex = newRes(fmt.Sprintf("server%d.nic.duplex", j), float64(c.Servers.Duplex))
		srv[j].copy = newRes(fmt.Sprintf("server%d.copy", j), float64(c.Servers.Copy))
		srv[j].ch = newRes(fmt.Sprintf("server%d.channel", j), float64(c.Servers.Channel))
		for k := 0; k < c.Storage.PerServer; k++ {
			devID++
			var d Device
			switch c.Storage.Kind {
			case "disk":
				d = NewDisk(s, devID, dp)
			case "raid5", "raid6", "declustered":
				a := NewArray(s, devID, c.Storage.Array, dp)
				m.arrays = append(m.arrays, a)
				d = a
			case "curve":
				cd := NewCurveDevice(s, devID, fmt.Sprintf("server%d.dev%d", j, k), *c.Storage.Curve, w.Op != "read", shared)
				m.res = append(m.res, cd.res)
				d = cd
			}
			srv[j].devs = append(srv[j].devs, d)
			srv[j].links = append(srv[j].links, newRes(fmt.Sprintf("server%d.dev%d.link", j, k), float64(c.Storage.Link)))
		}
	}
	path := func(ci, sj, k int, write bool) []*des.Resource {
		var p []*des.Resource
		add := func(r *des.Resource) {
			if r != nil {
				p = append(p, r)
			}
		}
		if write {
			add(cls[ci].cpu)
			add(cls[ci].up)
			add(cls[ci].rackUp)
			add(sw)
			add(srv[sj].down)
		} else {
			add(srv[sj].up)
			add(sw)
			add(cls[ci].rackDown)
			add(cls[ci].down)
			add(cls[ci].cpu)
		}
		add(cls[ci].duplex)
		add(srv[sj].duplex)
		add(srv[sj].copy)
		add(srv[sj].ch)
		add(srv[sj].links[k])
		return p
	}
	var limit float64
	if c.Clients.TCPWindow > 0 && c.Clients.Latency > 0 {
		limit = float64(c.Clients.TCPWindow) / (2 * c.Clients.Latency / 1e3)
	}
	total := N * w.Streams
	devs := M * c.Storage.PerServer
	// each device hands out space to the streams that use it, in order
	used := make([]int64, devs)
	span := int64(w.File) * int64(w.Files)
	for g := 0; g < total; g++ {
		ci := g % N
		write := w.Op == "write" || w.Op == "mixed" && g%2 == 0
		st := &Stream{ID: int32(g), Write: write, FileSize: int64(w.File), Files: w.Files, Record: int64(w.Record),
			Depth: w.Depth, Sync: w.Sync, Limit: limit}
		if w.Layout == "stripe" {
			st.Unit = int64(w.StripeUnit)
		}
		if limit == 0 {
			// a command's round trip; with a TCP window the path's delay
			// is in the window's cap on each flow instead
			st.Latency = des.Time(c.Clients.Latency * 1e6)
		}
		st.MaxOps = w.Requests
		if !write {
			st.Sink = cls[ci].sink
		}
		if w.Pattern == "random" {
			st.Random = s.Rand(uint64(g), 3)
		}
		var ds []int // global device indices
		switch {
		case w.OneDevice:
			ds = []int{0}
		case w.Layout == "stripe":
			// PVFS's and Strata's way: every request over k devices,
			// each stream's file on the next k devices (placement
			// balances by load: files overlap only when they must)
			k := w.Stripe
			if k <= 0 || k > devs {
				k = devs
			}
			// once the files have gone round the devices, the next
			// round starts one device further, so files striped unit
			// by unit do not all start on the same device
			start := g*k + g*k/devs
			for i := 0; i < k; i++ {
				d := (start + i) % devs
				// device d lives on server d mod M, so a stripe spreads
				// over servers before it doubles up on one
				ds = append(ds, d)
			}
		default:
			// CASTOR's way: whole files, spread round-robin over servers,
			// then over each server's devices
			ds = []int{g % devs}
		}
		for _, d := range ds {
			sj, k := d%M, d/M
			share := span / int64(len(ds))
			st.Targets = append(st.Targets, Target{Dev: srv[sj].devs[k], Path: path(ci, sj, k, write), Base: used[d]})
			// space for this stream's share, rounded up to 1 GiB so streams
			// do not share tracks
			used[d] += (share + (1<<30 - 1)) &^ (1<<30 - 1)
		}
		m.streams = append(m.streams, st)
	}
	return m, nil
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
	return r, nil
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
