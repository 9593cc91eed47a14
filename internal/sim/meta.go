package sim

import (
	"fmt"
	"math"
	"math/rand/v2"
	"slices"

	"github.com/strata-storage/strata/internal/api"
	"github.com/strata-storage/strata/internal/des"
)

// Metadata studies (workload.op = "create", "stat" or "remove") model
// Strata's catalog server as mdtest and corebench md drive it: each of N
// clients has one operation in flight at a time. An operation is client
// CPU, the round trip, server CPU, and for a create or a remove a place
// in a group commit: the catalog's one writer takes every operation
// waiting when it starts a group, spends commit_us of CPU on each,
// group_us of CPU and one sync (the WAL fsync) on the group, and those
// arriving meanwhile wait for the next group — so the more clients wait,
// the more one fsync and one group's CPU cover, which is why creates
// scale with clients although each waits for an fsync. CPU bursts queue
// for the server host's cores (the clients' too when they run there, as
// strata bench's do). Seed 002's N/c term is the cores over the CPU per
// operation; the writer's is 1/commit_us.
//
// Four mechanisms of the real server and client are optional terms, each
// off at zero: the client's batching of creates (window: at most that many
// requests in flight, the creates made meanwhile sent together in the
// next, each request costing client_request_us and server_request_us
// besides its operations' CPU — client/batch.go); the writer's wait for
// operations that have reached the server and are still on their way to
// it (linger_us — Store.Expecting); a process's going idle and being woken
// (park_us, wake_us), which is why an operation costs more CPU on an idle
// machine than on a busy one; and the bursts' variation (cpu_cv).
//
// Idle and woken: the clients are one process, the server another, each
// with as many threads to run its bursts as there are cores (Go's
// GOMAXPROCS). A thread whose burst ends with nothing more of its process
// waiting goes idle: it spends park_us of CPU on its core (the runtime
// looking for work, epoll and futex sleeps, the switch away), and a burst
// of its process arriving meanwhile takes that core at once, found by the
// looking. A burst arriving while its process has fewer bursts running or
// waiting than threads wakes a sleeping one (the runtime's wakep, a
// socket's wake-up) and pays wake_us of CPU first (the kernel's wake-up,
// mostly on another CPU: its interrupt, a halted virtual CPU's exit) —
// a hand-off inside the server (a request's call to the writer) too.
// Under load neither happens: each process's threads always have work. perf
// record -a of one client's stats over the Unix socket puts 12 µs of the
// client's 24 and 19 of the server's 33 in futex, epoll, the sockets'
// wake-ups and the runtime's scheduler, against 1–2 µs each at 8 clients;
// pinned to one CPU, the same stats cost the loaded CPU
// (docs/SIMULATION.md).

// CatalogConfig is a metadata study's catalog server ([catalog]);
// examples/sim/catalog.toml holds this machine's, calibrated.
type CatalogConfig struct {
	Cores int `toml:"cores"`
	// ClientsOnServer puts the clients' CPU on the server's cores.
	ClientsOnServer *bool `toml:"clients_on_server"`
	// CPU per operation, µs, of the server (the request and the lookup;
	// the writer's statements are commit_us) and of a client.
	ServerUS float64 `toml:"server_us"`
	ClientUS float64 `toml:"client_us"`
	// CPU per request, µs, of each side, besides its operations' (the
	// HTTP exchange, the caller's identity): what a batch of creates
	// shares.
	ServerRequestUS float64 `toml:"server_request_us"`
	ClientRequestUS float64 `toml:"client_request_us"`
	// Window is how many requests of creates the clients (one process,
	// as a put of many files or corebench md) keep in flight; the creates
	// made while it is full go together in the next. 0: each alone.
	Window int `toml:"window"`
	// RTTUS is the network's round trip beyond the CPU, µs.
	RTTUS float64 `toml:"rtt_us"`
	// The group commit: the writer's CPU per operation and per group
	// (the transaction, the WAL write, the fsync call), and the sync's
	// wait for the disk, µs.
	CommitUS float64 `toml:"commit_us"`
	GroupUS  float64 `toml:"group_us"`
	SyncUS   float64 `toml:"sync_us"`
	// LingerUS bounds the writer's wait, once it has an operation, for
	// those that reached the server and are still in its CPU.
	LingerUS float64 `toml:"linger_us"`
	// WakeUS is the CPU a burst of an idle process pays first; ParkUS
	// the CPU a process spends on its core going idle.
	WakeUS float64 `toml:"wake_us"`
	ParkUS float64 `toml:"park_us"`
	// CPUCV is the CPU bursts' coefficient of variation, 0 to 1: a burst
	// of mean d takes d·(1−cv) plus an exponential time of mean d·cv.
	// Bursts of exactly their mean keep clients in step forever (a
	// convoy no real server keeps: caches, preemption and interrupts
	// vary every operation's time).
	CPUCV float64 `toml:"cpu_cv"`
}

// MetaResult is what a metadata run reports.
type MetaResult struct {
	Ops    int64   `json:"ops"`
	PerS   float64 `json:"ops_per_s"`
	MeanUS float64 `json:"latency_mean_us"`
	Groups int64   `json:"groups,omitempty"`
	// Requests is how many requests carried the operations (fewer when
	// the clients batch); Wakes how many bursts woke an idle process.
	Requests int64   `json:"requests"`
	Wakes    int64   `json:"wakes,omitempty"`
	PerSync  float64 `json:"ops_per_group,omitempty"`
	// CoresBusy is the cores' utilisation; WriterBusy the writer's.
	CoresBusy  float64 `json:"cores_busy"`
	WriterBusy float64 `json:"writer_busy,omitempty"`
}

// fill sets the catalog's defaults.
func (cc *CatalogConfig) fill() error {
	if cc.Cores <= 0 {
		cc.Cores = 2
	}
	if cc.ClientsOnServer == nil {
		t := true
		cc.ClientsOnServer = &t
	}
	for _, v := range []struct {
		key string
		v   float64
	}{{"server_us", cc.ServerUS}, {"client_us", cc.ClientUS}, {"server_request_us", cc.ServerRequestUS}, {"client_request_us", cc.ClientRequestUS},
		{"rtt_us", cc.RTTUS}, {"commit_us", cc.CommitUS}, {"group_us", cc.GroupUS}, {"sync_us", cc.SyncUS},
		{"linger_us", cc.LingerUS}, {"wake_us", cc.WakeUS}, {"park_us", cc.ParkUS}} {
		if v.v < 0 || math.IsNaN(v.v) || math.IsInf(v.v, 0) {
			return fmt.Errorf("catalog.%s = %g: want a time ≥ 0 in µs", v.key, v.v)
		}
	}
	if cc.CPUCV < 0 || cc.CPUCV > 1 || math.IsNaN(cc.CPUCV) {
		return fmt.Errorf("catalog.cpu_cv = %g: want a coefficient of variation from 0 to 1", cc.CPUCV)
	}
	if cc.Window < 0 {
		return fmt.Errorf("catalog.window = %d: want a number of requests ≥ 0 (0: every create alone)", cc.Window)
	}
	return nil
}

type metaModel struct {
	sim    *des.Sim
	cc     CatalogConfig
	commit bool // the operation commits (create, remove)
	batch  bool // the clients batch it (creates, with a window)

	rng      *rand.Rand // the bursts' variation
	free     int        // idle cores
	cpuQueue []cpuBurst
	running  [2]int       // each process's bursts running
	queued   [2]int       // and waiting for a core
	parking  [2][]*parked // cores where each process's thread is going idle, the latest last
	coreBusy des.Time
	wakes    int64
	requests int64

	inflight   int        // requests of batched operations in flight
	queue      [][]func() // batches waiting for a request to end
	coming     int        // operations at the server, not yet at the writer
	waiting    []func()   // operations waiting for the next group
	writing    bool
	lingered   int64 // a linger's generation: a timer of an older one is stale
	lingerOn   bool
	groups     int64
	grouped    int64
	writerBusy des.Time

	ops     int64
	latency des.Time
	first   des.Time
	last    des.Time
}

type cpuBurst struct {
	p    int // the process: clientProc or serverProc
	d    des.Time
	done func()
}

// The processes whose bursts share the cores.
const (
	clientProc = iota
	serverProc
)

// parked is a core where a process's thread goes idle until end, unless a
// burst of the process takes it first (taken).
type parked struct {
	start, end des.Time
	taken      bool
}

const (
	evMetaCPU uint16 = 110 + iota
	evMetaNet
	evMetaCommit
	evMetaLinger
	evMetaPark
)

func us(v float64) des.Time { return des.FromSeconds(v / 1e6) }

func runMeta(c *Config, seed uint64) (*Result, error) {
	s := des.NewSim(seed)
	cc := c.Catalog
	m := &metaModel{sim: s, cc: cc, commit: c.Workload.Op != "stat", batch: c.Workload.Op == "create" && cc.Window > 0, rng: s.Rand(0, 110)}
	m.free = cc.Cores
	clients := c.Clients.Count * c.Workload.Streams
	per := c.Workload.Files
	for k := 0; k < clients; k++ {
		left := per
		var op func()
		op = func() {
			if left == 0 {
				m.last = max(m.last, s.Now())
				return
			}
			left--
			start := s.Now()
			m.clientCPU(us(cc.ClientUS), func() {
				m.send(func() {
					m.ops++
					m.latency += s.Now() - start
					op()
				})
			})
		}
		op()
	}
	s.LimitEvents(2e9)
	if _, err := s.Run(des.Forever); err != nil {
		return nil, fmt.Errorf("sim: %s: %w", c.Name, err)
	}
	if want := int64(clients) * int64(per); m.ops != want {
		return nil, fmt.Errorf("sim: %s: %d of %d operations completed: a model deadlock", c.Name, m.ops, want)
	}
	return m.result(c, seed), nil
}

// send has an operation made: in a request of its own, or, batched, in
// the next request the window lets go (client/batch.go's batcher).
func (m *metaModel) send(done func()) {
	if !m.batch {
		m.request([]func(){done})
		return
	}
	if m.inflight < m.cc.Window {
		m.inflight++
		m.request([]func(){done})
		return
	}
	if n := len(m.queue); n == 0 || len(m.queue[n-1]) >= api.MaxBatch {
		m.queue = append(m.queue, nil)
	}
	m.queue[len(m.queue)-1] = append(m.queue[len(m.queue)-1], done)
}

// request carries ops to the server and back: the client's request CPU,
// half the round trip, the server's CPU for the request, then each
// operation's on a burst of its own (the core runs a batch's calls side by
// side) and the group commits of those that commit, the other half; a
// batched request ending lets the next waiting batch go.
func (m *metaModel) request(ops []func()) {
	cc, s, n := m.cc, m.sim, len(ops)
	m.requests++
	m.clientCPU(us(cc.ClientRequestUS), func() {
		s.After(us(cc.RTTUS/2), evMetaNet, 0, func() {
			left := n
			reply := func() {
				if left--; left > 0 {
					return
				}
				s.After(us(cc.RTTUS/2), evMetaNet, 0, func() {
					for _, f := range ops {
						f()
					}
					if m.batch {
						m.inflight--
						if len(m.queue) > 0 {
							next := m.queue[0]
							m.queue = m.queue[1:]
							m.inflight++
							m.request(next)
						}
					}
				})
			}
			m.cpu(serverProc, us(cc.ServerRequestUS), func() {
				if m.commit { // announced once the request is read (core/batch.go)
					m.coming += n
				}
				for range n {
					m.cpu(serverProc, us(cc.ServerUS), func() {
						if !m.commit {
							reply()
							return
						}
						m.coming--
						m.waiting = append(m.waiting, reply)
						m.write()
					})
				}
			})
		})
	})
}

// clientCPU runs a client's CPU for an operation: on the server's cores
// when the clients run there, else on the client's own (where only its
// wake-up is modelled, as time).
func (m *metaModel) clientCPU(d des.Time, then func()) {
	if *m.cc.ClientsOnServer {
		m.cpu(clientProc, d, then)
		return
	}
	if d <= 0 {
		then()
		return
	}
	if m.running[clientProc] < m.cc.Cores {
		d += us(m.cc.WakeUS)
		m.wakes++
	}
	m.running[clientProc]++
	m.sim.After(d, evMetaCPU, 0, func() {
		m.running[clientProc]--
		then()
	})
}

// cpu runs a burst of d of process p: on the core where a thread of p is
// going idle, if there is one (the latest); else, after wake_us if p has a
// thread asleep to wake (fewer of its bursts running or waiting than it
// has threads to run them: GOMAXPROCS, the cores), on the next free core,
// first come, first served.
func (m *metaModel) cpu(p int, d des.Time, then func()) {
	if d <= 0 {
		then()
		return
	}
	if cv := m.cc.CPUCV; cv > 0 {
		d = des.Time(float64(d)*(1-cv) + m.rng.ExpFloat64()*float64(d)*cv)
	}
	b := cpuBurst{p, d, then}
	if n := len(m.parking[p]); n > 0 {
		k := m.parking[p][n-1]
		m.parking[p] = m.parking[p][:n-1]
		k.taken = true
		m.coreBusy += m.sim.Now() - k.start
		m.run(b)
		return
	}
	if m.running[p]+m.queued[p] < m.cc.Cores && m.cc.WakeUS > 0 {
		b.d += us(m.cc.WakeUS)
		m.wakes++
	}
	m.queued[p]++
	m.cpuQueue = append(m.cpuQueue, b)
	m.dispatch()
}

// dispatch starts queued bursts on free cores.
func (m *metaModel) dispatch() {
	for m.free > 0 && len(m.cpuQueue) > 0 {
		b := m.cpuQueue[0]
		m.cpuQueue = m.cpuQueue[1:]
		m.queued[b.p]--
		m.free--
		m.run(b)
	}
}

// run runs b on a core it holds. When it ends, the thread runs the next
// waiting burst of its process on the same core; with none, it holds the
// core for park_us going idle.
func (m *metaModel) run(b cpuBurst) {
	m.running[b.p]++
	m.coreBusy += b.d
	m.sim.After(b.d, evMetaCPU, 0, func() {
		m.running[b.p]--
		b.done()
		switch i := slices.IndexFunc(m.cpuQueue, func(x cpuBurst) bool { return x.p == b.p }); {
		case i >= 0:
			next := m.cpuQueue[i]
			m.cpuQueue = slices.Delete(m.cpuQueue, i, i+1)
			m.queued[b.p]--
			m.run(next)
		case m.cc.ParkUS > 0:
			m.park(b.p)
		default:
			m.free++
		}
		m.dispatch()
	})
}

// park holds a core while process p goes idle, for park_us unless a burst
// of p takes it first.
func (m *metaModel) park(p int) {
	k := &parked{start: m.sim.Now(), end: m.sim.Now() + us(m.cc.ParkUS)}
	m.parking[p] = append(m.parking[p], k)
	m.sim.After(k.end-k.start, evMetaPark, 0, func() {
		if k.taken {
			return
		}
		m.parking[p] = slices.DeleteFunc(m.parking[p], func(x *parked) bool { return x == k })
		m.coreBusy += k.end - k.start
		m.free++
		m.dispatch()
	})
}

// write starts a group with every operation waiting, if the writer is
// free: group_us and commit_us each on a core (the writer's statements
// and the commit are CPU), then the sync's wait for the disk (no core).
// With linger_us it first waits for the operations still in the server's
// CPU, as long as some are and for at most linger_us.
func (m *metaModel) write() {
	if m.writing || len(m.waiting) == 0 {
		return
	}
	if m.cc.LingerUS > 0 && m.coming > 0 {
		if !m.lingerOn {
			m.lingerOn = true
			m.lingered++
			gen := m.lingered
			m.sim.After(us(m.cc.LingerUS), evMetaLinger, 0, func() {
				if m.lingerOn && m.lingered == gen {
					m.group()
				}
			})
		}
		return
	}
	m.group()
}

func (m *metaModel) group() {
	m.lingerOn = false
	g := m.waiting
	m.waiting = nil
	m.writing = true
	m.groups++
	m.grouped += int64(len(g))
	start := m.sim.Now()
	m.cpu(serverProc, us(m.cc.GroupUS+float64(len(g))*m.cc.CommitUS), func() {
		m.sim.After(us(m.cc.SyncUS), evMetaCommit, 0, func() {
			m.writing = false
			m.writerBusy += m.sim.Now() - start
			for _, f := range g {
				f()
			}
			m.write()
		})
	})
}

func (m *metaModel) result(c *Config, seed uint64) *Result {
	s := m.sim
	x := &MetaResult{Ops: m.ops, Requests: m.requests, Wakes: m.wakes}
	span := (m.last - m.first).Seconds()
	if span > 0 {
		x.PerS = round3(float64(m.ops) / span)
		x.CoresBusy = round3(math.Min(1, m.coreBusy.Seconds()/(span*float64(m.cc.Cores))))
		x.WriterBusy = round3(math.Min(1, m.writerBusy.Seconds()/span))
	}
	if m.ops > 0 {
		x.MeanUS = round3(float64(m.latency) / float64(m.ops) / 1e3)
	}
	if m.groups > 0 {
		x.Groups = m.groups
		x.PerSync = round3(float64(m.grouped) / float64(m.groups))
	}
	return &Result{Name: c.Name, Seed: seed, Op: c.Workload.Op, Streams: c.Clients.Count * c.Workload.Streams, Seconds: round3(span), IOPS: x.PerS,
		Events: s.Events(), Fingerprint: fmt.Sprintf("%016x", s.Fingerprint()), Meta: x, Bound: Bound(c)}
}

// metaBound is the analytic side: the cores over the CPU an operation
// takes (seed 002's N/c), the clients over an operation's unloaded
// latency (each has one in flight), and for commits the writer, whose
// groups grow with the load until commit_us per operation is all it
// costs.
func (c *Config) metaBound(add func(name, what string, v float64)) {
	cc := c.Catalog
	n := float64(c.Clients.Count * c.Workload.Streams)
	commit := c.Workload.Op != "stat"
	// A request's CPU is shared by the most operations one may carry:
	// with w requests in flight holding one each, the rest in one batch.
	per := 1.0
	if c.Workload.Op == "create" && cc.Window > 0 {
		per = math.Max(1, math.Min(api.MaxBatch, n-float64(cc.Window)+1))
	}
	cpu := cc.ServerUS + cc.ServerRequestUS/per
	if *cc.ClientsOnServer {
		cpu += cc.ClientUS + cc.ClientRequestUS/per
	}
	if commit {
		cpu += cc.CommitUS
	}
	// terms are operations/s (BoundResult.Unit); add takes bytes/s
	if cpu > 0 {
		add("N/c", fmt.Sprintf("%d cores / %.0f µs of CPU per operation", cc.Cores, cpu), float64(cc.Cores)/cpu*1e6*1e6)
	}
	lat := cc.ClientUS + cc.ClientRequestUS + cc.RTTUS + cc.ServerUS + cc.ServerRequestUS
	if commit {
		lat += cc.SyncUS + cc.GroupUS + cc.CommitUS
		if cc.CommitUS > 0 {
			add("writer", fmt.Sprintf("one writer at %.0f µs per operation", cc.CommitUS), 1/cc.CommitUS*1e6*1e6)
		}
	}
	if lat > 0 {
		add("N/latency", fmt.Sprintf("%.0f clients, one operation of %.0f µs in flight each", n, lat), n/lat*1e6*1e6)
	}
}
