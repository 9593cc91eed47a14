package sim

import (
	"fmt"
	"math"

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
// scale with clients although each waits for an fsync. CPU bursts queue for the server host's cores (the
// clients' too when they run there, as strata bench's do). Seed 002's
// N/c term is the cores over the CPU per operation; the writer's is
// 1/commit_us.

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
	// RTTUS is the network's round trip beyond the CPU, µs.
	RTTUS float64 `toml:"rtt_us"`
	// The group commit: the writer's CPU per operation and per group
	// (the transaction, the WAL write, the fsync call), and the sync's
	// wait for the disk, µs.
	CommitUS float64 `toml:"commit_us"`
	GroupUS  float64 `toml:"group_us"`
	SyncUS   float64 `toml:"sync_us"`
}

// MetaResult is what a metadata run reports.
type MetaResult struct {
	Ops     int64   `json:"ops"`
	PerS    float64 `json:"ops_per_s"`
	MeanUS  float64 `json:"latency_mean_us"`
	Groups  int64   `json:"groups,omitempty"`
	PerSync float64 `json:"ops_per_group,omitempty"`
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
	}{{"server_us", cc.ServerUS}, {"client_us", cc.ClientUS}, {"rtt_us", cc.RTTUS}, {"commit_us", cc.CommitUS}, {"group_us", cc.GroupUS}, {"sync_us", cc.SyncUS}} {
		if v.v < 0 || math.IsNaN(v.v) {
			return fmt.Errorf("catalog.%s = %g: want a time ≥ 0 in µs", v.key, v.v)
		}
	}
	return nil
}

type metaModel struct {
	sim    *des.Sim
	cc     CatalogConfig
	commit bool // the operation commits (create, remove)

	free     int // idle cores
	cpuQueue []cpuBurst
	coreBusy des.Time

	waiting    []func() // operations waiting for the next group
	writing    bool
	groups     int64
	grouped    int64
	writerBusy des.Time

	ops     int64
	latency des.Time
	first   des.Time
	last    des.Time
}

type cpuBurst struct {
	d    des.Time
	done func()
}

const (
	evMetaCPU uint16 = 110 + iota
	evMetaNet
	evMetaCommit
)

func us(v float64) des.Time { return des.FromSeconds(v / 1e6) }

func runMeta(c *Config, seed uint64) (*Result, error) {
	s := des.NewSim(seed)
	cc := c.Catalog
	m := &metaModel{sim: s, cc: cc, commit: c.Workload.Op != "stat", free: cc.Cores}
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
			m.clientCPU(func() {
				s.After(us(cc.RTTUS/2), evMetaNet, int32(k), func() {
					m.cpu(us(cc.ServerUS), func() {
						reply := func() {
							s.After(us(cc.RTTUS/2), evMetaNet, int32(k), func() {
								m.ops++
								m.latency += s.Now() - start
								op()
							})
						}
						if m.commit {
							m.join(reply)
							return
						}
						reply()
					})
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

// clientCPU runs a client's CPU for an operation: on the server's cores
// when the clients run there, else on the client's own.
func (m *metaModel) clientCPU(then func()) {
	d := us(m.cc.ClientUS)
	if *m.cc.ClientsOnServer {
		m.cpu(d, then)
		return
	}
	m.sim.After(d, evMetaCPU, 0, then)
}

// cpu runs a burst of d on the next free core (first come, first served).
func (m *metaModel) cpu(d des.Time, then func()) {
	if d <= 0 {
		then()
		return
	}
	m.cpuQueue = append(m.cpuQueue, cpuBurst{d, then})
	m.dispatch()
}

func (m *metaModel) dispatch() {
	for m.free > 0 && len(m.cpuQueue) > 0 {
		b := m.cpuQueue[0]
		m.cpuQueue = m.cpuQueue[1:]
		m.free--
		m.coreBusy += b.d
		m.sim.After(b.d, evMetaCPU, 0, func() {
			m.free++
			b.done()
			m.dispatch()
		})
	}
}

// join waits for the group commit that makes the operation durable.
func (m *metaModel) join(then func()) {
	m.waiting = append(m.waiting, then)
	m.write()
}

// write starts a group with every operation waiting, if the writer is
// free: group_us and commit_us each on a core (the writer's statements
// and the commit are CPU), then the sync's wait for the disk (no core).
func (m *metaModel) write() {
	if m.writing || len(m.waiting) == 0 {
		return
	}
	g := m.waiting
	m.waiting = nil
	m.writing = true
	m.groups++
	m.grouped += int64(len(g))
	start := m.sim.Now()
	m.cpu(us(m.cc.GroupUS+float64(len(g))*m.cc.CommitUS), func() {
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
	x := &MetaResult{Ops: m.ops}
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
	cpu := cc.ServerUS
	if *cc.ClientsOnServer {
		cpu += cc.ClientUS
	}
	if commit {
		cpu += cc.CommitUS
	}
	// terms are operations/s (BoundResult.Unit); add takes bytes/s
	if cpu > 0 {
		add("N/c", fmt.Sprintf("%d cores / %.0f µs of CPU per operation", cc.Cores, cpu), float64(cc.Cores)/cpu*1e6*1e6)
	}
	lat := cc.ClientUS + cc.RTTUS + cc.ServerUS
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
