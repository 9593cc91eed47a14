package sim

import (
	"fmt"
	"strings"
)

// Client groups and server classes. A study may describe several groups
// of clients ([[clients.group]]) and several classes of servers
// ([[servers.class]]): an SSD tier taking a site's ingest, HDD arrays its
// users read, the moves between them, all on one network at once. Each
// group is a study of its own as far as its hosts and workload go — the
// group's keys over [clients] and [workload], its class's over [servers]
// and [storage] — and the DES runs them together, so they meet where they
// share something: the switch, a class's servers and devices, a source
// class a copy reads while users read it too. A study without groups or
// classes is one group on one class, exactly as before.

// part is one client group as the DES builds it.
type part struct {
	name  string  // "" for a study without groups
	class int     // index of the class its files are on
	from  int     // a copy's source class; -1 otherwise
	c     *Config // the group alone: its clients, workload, class
	src   *Config // a copy's reads: its clients and workload on from
}

// serverClass is one class as the DES builds it.
type serverClass struct {
	name string  // "" for a study without classes
	c    *Config // the class's servers and storage
}

// grouped reports whether the study has groups or classes.
func (c *Config) grouped() bool {
	return len(c.Clients.Groups) > 0 || len(c.Servers.Classes) > 0
}

// fillGroups checks the groups and classes and derives each one's
// configuration (c.classes, c.parts); a study without them is one of
// each.
func (c *Config) fillGroups() error {
	if !c.grouped() {
		c.classes = []serverClass{{c: c}}
		c.parts = []part{{class: 0, from: -1, c: c}}
		return nil
	}
	switch c.Workload.Op {
	case "write", "read", "mixed":
	default:
		return fmt.Errorf("clients.group and servers.class are for stream workloads (write, read, mixed), not workload.op = %q", c.Workload.Op)
	}
	base := *c
	base.Clients.Groups, base.Servers.Classes = nil, nil
	base.Sweep, base.classes, base.parts = nil, nil, nil
	classes := c.Servers.Classes
	if len(classes) == 0 {
		classes = []ServerClass{{Storage: c.Storage}}
	}
	index := map[string]int{}
	for i, sc := range classes {
		if len(c.Servers.Classes) > 0 {
			if sc.Name == "" {
				return fmt.Errorf("servers.class %d: want a name", i+1)
			}
			if _, dup := index[sc.Name]; dup {
				return fmt.Errorf("servers.class %q: named twice", sc.Name)
			}
		}
		index[sc.Name] = i
		cc := base
		cc.Servers = c.Servers
		cc.Servers.Classes = nil
		if sc.Count > 0 {
			cc.Servers.Count = sc.Count
		}
		for _, f := range []struct{ dst, v *Rate }{{&cc.Servers.NIC, &sc.NIC}, {&cc.Servers.Copy, &sc.Copy}, {&cc.Servers.Channel, &sc.Channel}, {&cc.Servers.Duplex, &sc.Duplex}} {
			if *f.v != 0 {
				*f.dst = *f.v
			}
		}
		cc.Storage = sc.Storage
		if err := cc.fill(); err != nil {
			return fmt.Errorf("servers.class %q: %w", sc.Name, err)
		}
		c.classes = append(c.classes, serverClass{name: sc.Name, c: &cc})
	}
	groups := c.Clients.Groups
	if len(groups) == 0 {
		groups = []ClientGroup{{}}
	}
	seen := map[string]bool{}
	for i, g := range groups {
		if len(c.Clients.Groups) > 0 {
			if g.Name == "" {
				return fmt.Errorf("clients.group %d: want a name", i+1)
			}
			if seen[g.Name] {
				return fmt.Errorf("clients.group %q: named twice", g.Name)
			}
			seen[g.Name] = true
		}
		p, err := c.groupPart(g, index)
		if err != nil {
			return fmt.Errorf("clients.group %q: %w", g.Name, err)
		}
		c.parts = append(c.parts, p)
	}
	return nil
}

// groupPart derives one group's configuration: its class's servers and
// storage, the study's clients and workload with the group's keys over
// them.
func (c *Config) groupPart(g ClientGroup, index map[string]int) (part, error) {
	p := part{name: g.Name, from: -1}
	ci, ok := index[g.Class]
	if g.Class == "" {
		ci, ok = 0, true
	}
	if !ok {
		return p, fmt.Errorf("class %q: no servers.class has that name", g.Class)
	}
	p.class = ci
	gc := *c.classes[ci].c
	gc.Clients = c.Clients
	gc.Clients.Groups = nil
	if g.Count > 0 {
		gc.Clients.Count = g.Count
	}
	if g.NIC != 0 {
		gc.Clients.NIC = g.NIC
	}
	w := &gc.Workload
	*w = c.Workload
	if g.Op != "" {
		w.Op = g.Op
	}
	switch w.Op {
	case "write", "read", "mixed":
		if g.From != "" {
			return p, fmt.Errorf("from %q: only a copy (op = \"copy\") reads from another class", g.From)
		}
	case "copy":
		fi, ok := index[g.From]
		if !ok || g.From == "" {
			return p, fmt.Errorf("op = \"copy\" needs from, the servers.class it copies from (from %q)", g.From)
		}
		if fi == ci {
			return p, fmt.Errorf("from %q: a copy goes to another class", g.From)
		}
		p.from = fi
		// what the DES and the bound see of it at the target: writes
		w.Op = "write"

	default:
		return p, fmt.Errorf("op %q: want write, read, mixed or copy", w.Op)
	}
	for _, f := range []struct {
		dst *int
		v   int
	}{{&w.Streams, g.Streams}, {&w.Files, g.Files}, {&w.Stripe, g.Stripe}, {&w.Depth, g.Depth}} {
		if f.v < 0 {
			return p, fmt.Errorf("streams, files, stripe and depth: want ≥ 0")
		}
		if f.v > 0 {
			*f.dst = f.v
		}
	}
	if g.Record > 0 {
		w.Record = g.Record
	}
	if g.File > 0 {
		w.File = g.File
	}
	if g.Layout != "" {
		w.Layout = g.Layout
	}
	if err := gc.fill(); err != nil {
		return p, err
	}
	p.c = &gc
	if p.from >= 0 {
		src := *c.classes[p.from].c
		src.Clients, src.Workload = gc.Clients, gc.Workload
		src.Workload.Op = "read"
		p.src = &src
	}
	return p, nil
}

// GroupResult is one client group's share of a run.
type GroupResult struct {
	Name    string  `json:"name"`
	Class   string  `json:"class"`
	From    string  `json:"from,omitempty"`
	Op      string  `json:"op"`
	Streams int     `json:"streams"`
	Bytes   int64   `json:"bytes"`
	MBps    float64 `json:"mb_per_s"` // its bytes over its first start to last end
	// Alone is the group's bound as if it ran by itself.
	Alone        float64 `json:"alone_mb_per_s"`
	AloneBinding string  `json:"alone_binding_term"`
}

// groupsBound is a study with groups: each group's own bound (its
// clients, its layout on its class), each class's servers and devices
// all in use (for the groups that share them), and the switch: S is the
// switch or the sum over classes of the least of the class and its
// groups' bounds, whichever is less. A copy counts at its target class
// (its reads are bounded within the group's own bound). A group's bound
// alone counts the switch too, and no seeks: groups whose streams share
// disks or arrays make them seek between the streams, which the DES
// does and the bound does not.
func (c *Config) groupsBound() BoundResult {
	b := BoundResult{Op: c.Workload.Op}
	perClass := make([]float64, len(c.classes))
	users := make([]int, len(c.classes))
	first := make([]int, len(c.classes)) // each class's first term
	var switchLoad float64
	for _, p := range c.parts {
		s := p.bound()
		perClass[p.class] += s.MBps
		users[p.class]++
		ways := 1.0
		if p.from >= 0 {
			ways = 2
		}
		switchLoad += ways * s.MBps
		b.Terms = append(b.Terms, Term{Name: p.name, What: fmt.Sprintf("group %s alone (%s): %s", p.name, p.op(), s.Binding), MBps: s.MBps})
	}
	total := 0.0
	for i, sc := range c.classes {
		first[i] = len(b.Terms)
		cap := sc.capacity(c.parts, i)
		if users[i] > 1 && cap > 0 {
			b.Terms = append(b.Terms, Term{Name: "class " + sc.name, What: fmt.Sprintf("class %s, every server and device in use: %s", sc.name, mbps(cap*1e6)), MBps: round3(cap)})
		}
		if users[i] > 1 && cap > 0 && cap < perClass[i] {
			b.Terms[first[i]].Binding = true
			total += cap
			continue
		}
		total += perClass[i]
		for j, p := range c.parts {
			if p.class == i {
				b.Terms[j].Binding = true
			}
		}
	}
	if sw := float64(c.Network.Switch) / 1e6; sw > 0 {
		// every byte crosses the switch at least once (a copy's twice)
		b.Terms = append(b.Terms, Term{Name: "switch", What: fmt.Sprintf("switch backplane %s; alone the groups would cross it with %.5g MB/s", mbps(sw*1e6), switchLoad), MBps: round3(sw)})
		if sw < total {
			for i := range b.Terms {
				b.Terms[i].Binding = false
			}
			b.Terms[len(b.Terms)-1].Binding = true
			total = sw
		}
	}
	var names []string
	for _, t := range b.Terms {
		if t.Binding {
			names = append(names, t.Name)
		}
	}
	b.MBps, b.Binding = round3(total), strings.Join(names, " + ")
	return b
}

// bound is a group's bound as if alone; a copy's is the least of its
// reads from the source class and its writes to the target.
func (p part) bound() BoundResult {
	s := Bound(p.c)
	if p.from >= 0 {
		if r := Bound(p.src); r.MBps < s.MBps {
			r.Binding = "reading: " + r.Binding
			return r
		}
	}
	return s
}

// op is the group's operation as the study names it.
func (p part) op() string {
	if p.from >= 0 {
		return "copy"
	}
	return p.c.Workload.Op
}

// capacity is a class's servers and devices, all in use, for the groups
// on it: the least of its server and device terms, MB/s.
func (sc serverClass) capacity(parts []part, i int) float64 {
	cc := *sc.c
	ops := map[string]bool{}
	for _, p := range parts {
		if p.class == i {
			ops[p.c.Workload.Op] = true
		}
	}
	cc.Workload.Op = "mixed"
	if len(ops) == 1 {
		for op := range ops {
			cc.Workload.Op = op
		}
	}
	// every device in use: enough streams, striped over all, no client
	// limits
	cc.Clients = ClientConfig{Count: cc.Servers.Count * cc.Storage.PerServer, CPUs: 1}
	cc.Network = NetworkConfig{}
	cc.Workload.Streams, cc.Workload.Layout, cc.Workload.Stripe, cc.Workload.OneDevice = 1, "distribute", 0, false
	return Bound(&cc).MBps
}
