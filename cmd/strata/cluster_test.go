package main_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/strata-storage/strata/internal/testutil/netbed"
	"github.com/strata-storage/strata/internal/testutil/pgtest"
)

// clusterBed is Strata on several hosts of a netbed: a core (or two, on a
// PostgreSQL catalog of its own host), movers each on a host with one
// device, and a client host, every link shaped. Unix sockets are off on
// the movers and the client goes by TCP (--tcp-only): all data crosses
// the bed's links. TLS is off: these tests are about hosts and links.
type clusterBed struct {
	t      *testing.T
	bed    *netbed.Bed
	dir    string
	cores  []*bedCore
	movers []*bedMover
	client *netbed.Host
	token  string
}

type bedCore struct {
	host *netbed.Host
	proc *netbed.Proc
	conf string
	data string
}

type bedMover struct {
	host *netbed.Host
	proc *netbed.Proc
	conf string
	dev  string // its device's directory
}

// bedOptions shape a clusterBed.
type bedOptions struct {
	movers int
	rate   string // every link's
	// cores > 1 puts them on a PostgreSQL catalog of its own host, all
	// but the first standing by.
	cores int
}

const bedPlain = "[tls]\nenabled = \"off\"\ninsecure = true\n"

func newClusterBed(t *testing.T, o bedOptions) *clusterBed {
	if testing.Short() {
		t.Skip("multi-host test bed: not under -short")
	}
	b := &clusterBed{t: t, bed: netbed.New(t), dir: t.TempDir()}
	catalog := ""
	if o.cores > 1 {
		db := b.bed.Host("db", o.rate)
		pg := pgtest.Serve(t, db.NetnsPath(), db.IP)
		catalog = fmt.Sprintf("[catalog]\ndriver = \"postgres\"\ndsn = %q\nstandby = true\n", pg.DSN)
	}
	secret := filepath.Join(b.dir, "secret")
	os.WriteFile(secret, []byte("0123456789abcdef0123456789abcdef\n"), 0o600)
	var cores []string
	for i := range max(o.cores, 1) {
		h := b.bed.Host(fmt.Sprintf("core%d", i), o.rate)
		c := &bedCore{host: h, conf: filepath.Join(b.dir, fmt.Sprintf("core%d.toml", i)), data: filepath.Join(b.dir, fmt.Sprintf("core%d", i))}
		conf := fmt.Sprintf(`listen = %q
data_dir = %q
secret_file = %q
reclaim_every = "200ms"
device = []
[mover]
id = "core%d"
listen = %q
socket = "off"
[library]
path = %q
time_scale = "instant"
drives = 2
cartridges = 4
[hsm]
recall_min_files = 1
%s%s`, h.Addr(7420), c.data, secret, i, h.Addr(7421), filepath.Join(b.dir, "tapes"), bedPlain, catalog)
		os.WriteFile(c.conf, []byte(conf), 0o644)
		cores = append(cores, "http://"+h.Addr(7420))
		b.cores = append(b.cores, c)
	}
	b.cores[0].start()
	b.waitServing(b.cores[0])
	for _, c := range b.cores[1:] {
		c.start()
		b.waitFor(func() bool { return strings.Contains(c.proc.Log(), "standing by") }, "a standby")
	}
	tok, err := exec.Command(bin, "--server", "unix:"+filepath.Join(b.cores[0].data, "strata.sock"), "token", "create", "--user", "root", "--ttl", "1h").Output()
	if err != nil {
		t.Fatalf("token: %v", err)
	}
	b.token = strings.TrimSpace(string(tok))
	for i := range o.movers {
		h := b.bed.Host(fmt.Sprintf("mover%d", i), o.rate)
		m := &bedMover{host: h, conf: filepath.Join(b.dir, fmt.Sprintf("mover%d.toml", i)), dev: filepath.Join(b.dir, fmt.Sprintf("m%d", i))}
		conf := fmt.Sprintf("data_dir = %q\nsecret_file = %q\n[mover]\nid = \"mover%d\"\nlisten = %q\nsocket = \"off\"\ncore = %q\n%s[[device]]\nid = \"m%d\"\npath = %q\n",
			filepath.Join(b.dir, fmt.Sprintf("mover%d.data", i)), secret, i, h.Addr(7430), strings.Join(cores, ","), bedPlain, i, m.dev)
		os.WriteFile(m.conf, []byte(conf), 0o644)
		m.start()
		b.movers = append(b.movers, m)
	}
	b.client = b.bed.Host("client", o.rate)
	b.waitFor(func() bool {
		out, _, _ := b.run("df")
		for i := range o.movers {
			if !strings.Contains(out, fmt.Sprintf(" m%d ", i)) || strings.Count(out, "online") < o.movers {
				return false
			}
		}
		return true
	}, "movers registered")
	return b
}

func (c *bedCore) start() {
	c.proc = c.host.Start(bin, "serve", "--config", c.conf)
}

func (m *bedMover) start() {
	m.proc = m.host.Start(bin, "mover", "--config", m.conf)
}

// objects counts the objects on the mover's device.
func (m *bedMover) objects() int {
	got, _ := filepath.Glob(filepath.Join(m.dev, "objects", "*", "*"))
	return len(got)
}

func (b *clusterBed) waitFor(cond func() bool, what string) {
	b.t.Helper()
	for i := 0; !cond(); i++ {
		if i == 600 {
			b.t.Fatalf("waited 30 s for %s\n%s", what, b.logs())
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func (b *clusterBed) waitServing(c *bedCore) {
	b.t.Helper()
	b.waitFor(func() bool { return strings.Contains(c.proc.Log(), "strata: serving") }, "the core to serve")
}

// logs is every process's output, for a failure's message.
func (b *clusterBed) logs() string {
	var sb strings.Builder
	for i, c := range b.cores {
		if c.proc != nil {
			fmt.Fprintf(&sb, "--- core%d:\n%s\n", i, tail(c.proc.Log(), 2500))
		}
	}
	for i, m := range b.movers {
		fmt.Fprintf(&sb, "--- mover%d:\n%s\n", i, tail(m.proc.Log(), 1500))
	}
	return sb.String()
}

func tail(s string, n int) string { return s[max(0, len(s)-n):] }

// run runs the CLI on the client host against the cores.
func (b *clusterBed) run(args ...string) (string, string, int) {
	var cores []string
	for _, c := range b.cores {
		cores = append(cores, c.host.Addr(7420))
	}
	cmd := b.client.Command(bin, append([]string{"--tcp-only"}, args...)...)
	cmd.Env = append(os.Environ(), "STRATA_SERVER="+strings.Join(cores, ","), "STRATA_TOKEN="+b.token)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	err := cmd.Run()
	code := 0
	if ee, ok := err.(*exec.ExitError); ok {
		code = ee.ExitCode()
	} else if err != nil {
		b.t.Fatal(err)
	}
	return out.String(), errb.String(), code
}

func (b *clusterBed) ok(args ...string) string {
	b.t.Helper()
	out, errs, code := b.run(args...)
	if code != 0 {
		b.t.Fatalf("strata %s: exit %d: %s\n%s", strings.Join(args, " "), code, errs, b.logs())
	}
	return out
}

// check gets path and compares it with want.
func (b *clusterBed) check(path string, want []byte) {
	b.t.Helper()
	out := filepath.Join(b.dir, "check.out")
	os.Remove(out)
	b.ok("get", path, out)
	if got, _ := os.ReadFile(out); !bytes.Equal(got, want) {
		b.t.Fatalf("%s: %d bytes back, want %d, or they differ", path, len(got), len(want))
	}
}

// devices are the devices holding path's disk copy.
func (b *clusterBed) devices(path string) map[string]bool {
	var st struct {
		Layout struct{ Segments []struct{ Device string } }
	}
	json.Unmarshal([]byte(b.ok("stat", "--json", path)), &st)
	devs := map[string]bool{}
	for _, s := range st.Layout.Segments {
		devs[s.Device] = true
	}
	return devs
}

// A file striped over four mover hosts: each holds one stripe, it reads
// back byte for byte over the links, and it goes to tape and comes back
// (migration and recall between the movers and the core's library).
func TestClusterStriping(t *testing.T) {
	b := newClusterBed(t, bedOptions{movers: 4, rate: "1gbit"})
	src := filepath.Join(b.dir, "wide")
	data := writeRandom(t, src, 24<<20+7)
	b.ok("put", "--stripes", "4", src, "/wide")
	if devs := b.devices("/wide"); len(devs) != 4 {
		t.Fatalf("stripes on %v, want all four movers", devs)
	}
	for i, m := range b.movers {
		if n := m.objects(); n != 1 {
			t.Fatalf("mover%d holds %d objects, want 1", i, n)
		}
	}
	b.check("/wide", data)
	b.ok("migrate", "/wide")
	b.ok("purge", "/wide")
	b.check("/wide", data)
}

// Mover hosts failing under clients: a mover killed in the middle of a
// put leaves nothing half-visible (the put fails with one line or
// completes), and its space comes back once it returns; a mover host cut
// off the network during a get of a file with a tape copy makes the get
// recall the file to the movers that remain instead of failing.
func TestClusterMoverFaults(t *testing.T) {
	b := newClusterBed(t, bedOptions{movers: 4, rate: "1gbit"})
	src := filepath.Join(b.dir, "big")
	data := writeRandom(t, src, 96<<20)
	victim := b.movers[1]
	done := make(chan struct{})
	go func() {
		defer close(done)
		b.waitFor(func() bool { return victim.objects() > 0 }, "the put to reach mover1")
		time.Sleep(100 * time.Millisecond)
		victim.proc.Kill9()
	}()
	_, errs, code := b.run("put", "--stripes", "4", src, "/big")
	<-done
	t.Logf("the put across mover1's kill: exit %d %s", code, strings.TrimSpace(errs))
	if code == 0 {
		b.check("/big", data) // it finished before the kill
	} else {
		if strings.Count(strings.TrimSpace(errs), "\n") > 0 {
			t.Fatalf("a failed put said more than one line: %q", errs)
		}
		if _, _, code := b.run("stat", "/big"); code == 0 {
			t.Fatal("a put that failed is visible")
		}
	}
	victim.start()
	b.waitFor(func() bool { out, _, _ := b.run("df"); return strings.Count(out, "online") == 4 }, "mover1 back")
	// What the failed put left on each mover is reclaimed; a put that
	// completed keeps one object per mover.
	want := 0
	if code == 0 {
		want = 1
	}
	b.waitFor(func() bool {
		for _, m := range b.movers {
			if m.objects() != want {
				return false
			}
		}
		return true
	}, "the failed put's objects to be reclaimed")

	// A file on disk and tape, one stripe on each mover (four stripe
	// units and a byte); mover2's host drops off the network.
	src = filepath.Join(b.dir, "kept")
	data = writeRandom(t, src, 16<<20+1)
	b.ok("put", "--stripes", "4", src, "/kept")
	b.ok("migrate", "/kept")
	cut := b.movers[2]
	cut.host.Down()
	b.check("/kept", data)
	if devs := b.devices("/kept"); devs["m2"] {
		t.Fatalf("after the recall the file is still on %v, with the unreachable m2", devs)
	}
	cut.host.Up()
}

// Fail-over over a network: two cores on a PostgreSQL catalog on its own
// host. The active core's host drops off the network; the database ends
// its session (keepalive), the standby takes over, movers register with
// it, and clients naming both cores go on. The cut-off core, unable to
// confirm its hold on the catalog, stops by itself; brought back, it
// stands by.
func TestClusterFailover(t *testing.T) {
	b := newClusterBed(t, bedOptions{movers: 2, rate: "1gbit", cores: 2})
	src := filepath.Join(b.dir, "f")
	data := writeRandom(t, src, 9<<20)
	b.ok("put", src, "/f")
	b.ok("migrate", "/f")
	b.check("/f", data)

	active, standby := b.cores[0], b.cores[1]
	cut := time.Now()
	active.host.Down()
	b.check("/f", data) // the client retries across the cores by itself
	t.Logf("link cut at %s; first get after it %v; the standby: %s", cut.UTC().Format("15:04:05.000"), time.Since(cut).Round(100*time.Millisecond), standbyLine(standby.proc.Log(), "taking over:"))
	if !strings.Contains(standby.proc.Log(), "taking over:") {
		t.Fatalf("the standby did not take over:\n%s", b.logs())
	}
	src2 := filepath.Join(b.dir, "g")
	data2 := writeRandom(t, src2, 3<<20)
	b.ok("put", src2, "/g")
	b.check("/g", data2)
	if err := active.proc.Wait(); err == nil || !strings.Contains(active.proc.Log(), "strata: lost the catalog") {
		t.Fatalf("the cut-off core: %v\n%s", err, active.proc.Log())
	}
	active.host.Up()
	active.start()
	b.waitFor(func() bool { return strings.Contains(active.proc.Log(), "standing by") }, "the old core to stand by")
	b.check("/g", data2)
}

// standbyLine is the line of log holding what, for a test's log.
func standbyLine(log, what string) string {
	for _, l := range strings.Split(log, "\n") {
		if strings.Contains(l, what) {
			return l
		}
	}
	return ""
}
