// Package cluster runs Strata on several hosts of a netbed, for the
// multi-host tests (cmd/strata's TestCluster…) and benchmarks
// (bench/clusterbench): cores (two or more on a PostgreSQL catalog of its
// own host, all but the first standing by), movers each on a host with one
// device, and client hosts, every link shaped. The movers' Unix sockets are
// off and clients go by TCP (--tcp-only), so that all data crosses the
// bed's links; TLS is off (these runs are about hosts and links, and
// docs/PERFORMANCE.md measures TLS on its own).
package cluster

import (
	"bytes"
	"cmp"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/strata-storage/strata/internal/testutil/cmdtest"
	"github.com/strata-storage/strata/internal/testutil/netbed"
	"github.com/strata-storage/strata/internal/testutil/pgtest"
)

// Options shape a cluster.
type Options struct {
	Movers  int
	Clients int    // default 1
	Rate    string // every link's (netbed.Host)
	// Cores > 1 puts them on a PostgreSQL catalog of its own host.
	Cores int
	// Bandwidth caps each mover's device ("50MB/s"; "" for none).
	Bandwidth string
	// Latency, when set, puts a delaying proxy (netbed.Proxy, on a host of
	// its own with an unshaped link) in front of the first core and of
	// every mover: what clients reach them by, each way that long.
	Latency time.Duration
	// TapeServers > 0 puts the library's drives on that many tape
	// servers (one drive each, hosts of their own); 0 keeps them in the
	// core. Generation and TimeScale set the library's (default LTO-9,
	// instant).
	TapeServers           int
	Generation, TimeScale string
}

// Cluster is a running multi-host Strata.
type Cluster struct {
	t       testing.TB
	bin     string
	Bed     *netbed.Bed
	Dir     string
	Cores   []*Core
	Movers  []*Mover
	Tapes   []*TapeServer
	Clients []*netbed.Host
	// Proxies, with Options.Latency: Proxies[0] is the core's, then the
	// movers' in order.
	Proxies []*netbed.Proxy
	front   []string // the cores' addresses as clients reach them
	token   string
}

// Core is a `strata serve` on its host.
type Core struct {
	Host *netbed.Host
	Proc *netbed.Proc
	Conf string
	Data string
	bin  string
}

// Mover is a `strata mover` on its host, with one device.
type Mover struct {
	Host *netbed.Host
	Proc *netbed.Proc
	Conf string
	Dev  string // its device's directory
	bin  string
}

// TapeServer is a `strata tape-server` on its host, with one drive.
type TapeServer struct {
	Host *netbed.Host
	Proc *netbed.Proc
	Conf string
	bin  string
}

// Start starts (or starts again) the tape server.
func (s *TapeServer) Start() { s.Proc = s.Host.Start(s.bin, "tape-server", "--config", s.Conf) }

const plain = "[tls]\nenabled = \"off\"\ninsecure = true\n"

// New starts a cluster of the strata binary bin and waits until every
// mover is registered. It skips under -short (and where netbed skips).
func New(t testing.TB, bin string, o Options) *Cluster {
	t.Helper()
	if testing.Short() {
		t.Skip("multi-host test bed: not under -short")
	}
	c := &Cluster{t: t, bin: bin, Bed: netbed.New(t), Dir: t.TempDir()}
	catalog := ""
	if o.Cores > 1 {
		db := c.Bed.Host("db", o.Rate)
		pg := pgtest.Serve(t, db.NetnsPath(), db.IP)
		catalog = fmt.Sprintf("[catalog]\ndriver = \"postgres\"\ndsn = %q\nstandby = true\n", pg.DSN)
	}
	secret := filepath.Join(c.Dir, "secret")
	if err := os.WriteFile(secret, []byte("0123456789abcdef0123456789abcdef\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	gen, scale := cmp.Or(o.Generation, "LTO-9"), cmp.Or(o.TimeScale, "instant")
	tapes := filepath.Join(c.Dir, "tapes")
	library := fmt.Sprintf("[library]\npath = %q\ngeneration = %q\ntime_scale = %q\ncartridges = 4\n", tapes, gen, scale)
	coreLibrary := library + "drives = 2\n"
	if o.TapeServers > 0 {
		coreLibrary = library + "remote = true\n"
	}
	var cores []string
	for i := range max(o.Cores, 1) {
		h := c.Bed.Host(fmt.Sprintf("core%d", i), o.Rate)
		k := &Core{Host: h, Conf: filepath.Join(c.Dir, fmt.Sprintf("core%d.toml", i)), Data: filepath.Join(c.Dir, fmt.Sprintf("core%d", i)), bin: bin}
		conf := fmt.Sprintf(`listen = %q
data_dir = %q
secret_file = %q
reclaim_every = "200ms"
device = []
[mover]
id = "core%d"
listen = %q
socket = "off"
%s[hsm]
recall_min_files = 1
%s%s`, h.Addr(7420), k.Data, secret, i, h.Addr(7421), coreLibrary, plain, catalog)
		c.write(k.Conf, conf)
		cores = append(cores, "http://"+h.Addr(7420))
		c.Cores = append(c.Cores, k)
	}
	var router *netbed.Host
	if o.Latency > 0 {
		router = c.Bed.Host("router", "")
		p := router.Proxy(7420, c.Cores[0].Host.Addr(7420), o.Latency)
		c.Proxies = append(c.Proxies, p)
		c.front = append(c.front, p.Addr)
	} else {
		for _, k := range c.Cores {
			c.front = append(c.front, k.Host.Addr(7420))
		}
	}
	c.Cores[0].Start()
	c.WaitFor(func() bool { return strings.Contains(c.Cores[0].Proc.Log(), "strata: serving") }, "the core to serve")
	for _, k := range c.Cores[1:] {
		k.Start()
		c.WaitFor(func() bool { return strings.Contains(k.Proc.Log(), "standing by") }, "a standby")
	}
	tok, err := exec.Command(bin, "--server", "unix:"+filepath.Join(c.Cores[0].Data, "strata.sock"), "token", "create", "--user", "root", "--ttl", "24h").Output()
	if err != nil {
		t.Fatalf("cluster: token: %v", err)
	}
	c.token = strings.TrimSpace(string(tok))
	bw := ""
	if o.Bandwidth != "" {
		bw = fmt.Sprintf("bandwidth = %q\n", o.Bandwidth)
	}
	for i := range o.Movers {
		h := c.Bed.Host(fmt.Sprintf("mover%d", i), o.Rate)
		m := &Mover{Host: h, Conf: filepath.Join(c.Dir, fmt.Sprintf("mover%d.toml", i)), Dev: filepath.Join(c.Dir, fmt.Sprintf("m%d", i)), bin: bin}
		adv := h.Addr(7430)
		if router != nil {
			p := router.Proxy(7430+i, adv, o.Latency)
			c.Proxies = append(c.Proxies, p)
			adv = p.Addr
		}
		c.write(m.Conf, fmt.Sprintf("data_dir = %q\nsecret_file = %q\n[mover]\nid = \"mover%d\"\nlisten = %q\nadvertise = %q\nsocket = \"off\"\ncore = %q\n%s[[device]]\nid = \"m%d\"\npath = %q\n%s",
			filepath.Join(c.Dir, fmt.Sprintf("mover%d.data", i)), secret, i, h.Addr(7430), adv, strings.Join(cores, ","), plain, i, m.Dev, bw))
		m.Start()
		c.Movers = append(c.Movers, m)
	}
	for i := range o.TapeServers {
		h := c.Bed.Host(fmt.Sprintf("tape%d", i), o.Rate)
		ts := &TapeServer{Host: h, Conf: filepath.Join(c.Dir, fmt.Sprintf("tape%d.toml", i)), bin: bin}
		c.write(ts.Conf, fmt.Sprintf("data_dir = %q\nsecret_file = %q\n[tape_server]\nid = \"tape%d\"\nlisten = %q\ncore = %q\ndrives = 1\n%s%s",
			filepath.Join(c.Dir, fmt.Sprintf("tape%d.data", i)), secret, i, h.Addr(7440), strings.Join(cores, ","), library, plain))
		ts.Start()
		c.Tapes = append(c.Tapes, ts)
	}
	for i := range max(o.Clients, 1) {
		c.Clients = append(c.Clients, c.Bed.Host(fmt.Sprintf("client%d", i), o.Rate))
	}
	c.WaitFor(func() bool {
		out, _, _ := c.Run(0, "df")
		return strings.Count(out, "online") >= o.Movers
	}, "the movers to register")
	for _, ts := range c.Tapes {
		c.WaitFor(func() bool { return strings.Contains(ts.Proc.Log(), "tape server registered") }, "the tape servers to register")
	}
	return c
}

func (c *Cluster) write(path, conf string) {
	if err := os.WriteFile(path, []byte(conf), 0o644); err != nil {
		c.t.Fatal(err)
	}
}

// Start starts (or starts again) the core.
func (k *Core) Start() { k.Proc = k.Host.Start(k.bin, "serve", "--config", k.Conf) }

// Start starts (or starts again) the mover.
func (m *Mover) Start() { m.Proc = m.Host.Start(m.bin, "mover", "--config", m.Conf) }

// Objects counts the objects on the mover's device.
func (m *Mover) Objects() int {
	got, _ := filepath.Glob(filepath.Join(m.Dev, "objects", "*", "*"))
	return len(got)
}

// WaitFor polls cond for up to 30 s and fails the test, with every
// process's log, if it never holds.
func (c *Cluster) WaitFor(cond func() bool, what string) {
	c.t.Helper()
	for i := 0; !cond(); i++ {
		if i == 600 {
			c.t.Fatalf("waited 30 s for %s\n%s", what, c.Logs())
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// Logs is the end of every process's output, for a failure's message.
func (c *Cluster) Logs() string {
	var sb strings.Builder
	for i, k := range c.Cores {
		if k.Proc != nil {
			fmt.Fprintf(&sb, "--- core%d:\n%s\n", i, tail(k.Proc.Log(), 2500))
		}
	}
	for i, m := range c.Movers {
		fmt.Fprintf(&sb, "--- mover%d:\n%s\n", i, tail(m.Proc.Log(), 1500))
	}
	for i, ts := range c.Tapes {
		fmt.Fprintf(&sb, "--- tape%d:\n%s\n", i, tail(ts.Proc.Log(), 1500))
	}
	return sb.String()
}

func tail(s string, n int) string { return s[max(0, len(s)-n):] }

// Command is the CLI on client host i against the cores (not started).
func (c *Cluster) Command(i int, args ...string) *exec.Cmd {
	cmd := c.Clients[i].Command(c.bin, append([]string{"--tcp-only"}, args...)...)
	cmd.Env = append(os.Environ(), "STRATA_SERVER="+strings.Join(c.front, ","), "STRATA_TOKEN="+c.token)
	return cmd
}

// Run runs the CLI on client host i: stdout, stderr, exit code.
func (c *Cluster) Run(i int, args ...string) (string, string, int) {
	return cmdtest.Run(c.t, c.Command(i, args...))
}

// OK runs the CLI on the first client host and fails the test if it fails.
func (c *Cluster) OK(args ...string) string {
	c.t.Helper()
	out, errs, code := c.Run(0, args...)
	if code != 0 {
		c.t.Fatalf("strata %s: exit %d: %s\n%s", strings.Join(args, " "), code, errs, c.Logs())
	}
	return out
}

// Check gets path and compares it with want.
func (c *Cluster) Check(path string, want []byte) {
	c.t.Helper()
	out := filepath.Join(c.Dir, "check.out")
	os.Remove(out)
	c.OK("get", path, out)
	if got, _ := os.ReadFile(out); !bytes.Equal(got, want) {
		c.t.Fatalf("%s: %d bytes back, want %d, or they differ", path, len(got), len(want))
	}
}

// Devices are the devices holding path's disk copy.
func (c *Cluster) Devices(path string) map[string]bool {
	c.t.Helper()
	var st struct {
		Layout struct{ Segments []struct{ Device string } }
	}
	if err := json.Unmarshal([]byte(c.OK("stat", "--json", path)), &st); err != nil {
		c.t.Fatal(err)
	}
	devs := map[string]bool{}
	for _, s := range st.Layout.Segments {
		devs[s.Device] = true
	}
	return devs
}
