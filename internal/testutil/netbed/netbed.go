// Package netbed builds a test bed of hosts for multi-host tests and
// benchmarks: each host a Linux network namespace with one link to a
// shared bridge, its rate shaped with tc's token bucket filter in both
// directions, and processes started in it. Nothing leaves the bed: the
// bridge has no address in the machine's own namespace, so two beds (two
// test binaries at once) may even use the same addresses.
//
// It needs root, ip, tc and nsenter. Processes in a bed share the
// machine's file system, and so its Unix sockets: servers in a bed must
// have theirs off (or clients must not use them) for traffic to cross the
// shaped links. This kernel has no netem: Loss drops packets with
// nftables instead, and Proxy adds latency and resets in user space.
package netbed

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/strata-storage/strata/internal/testutil/cmdtest"
)

// RequireEnv, when set, turns a machine where the bed cannot be built
// into a test failure instead of a skip (scripts/test.sh sets it: CI runs
// as root).
const RequireEnv = "STRATA_REQUIRE_NETNS"

// beds numbers the beds of this process (names must be unique on the
// machine: the process id and this).
var beds atomic.Int64

// Bed is a set of hosts on one bridge.
type Bed struct {
	t      testing.TB
	id     string
	bridge string
	mu     sync.Mutex
	hosts  []*Host
	procs  []*Proc
}

// New builds an empty bed, removed (its processes killed, its namespaces
// and bridge deleted) when the test ends, whether it passed or not. It
// skips the test where namespaces cannot be made, unless RequireEnv is
// set.
func New(t testing.TB) *Bed {
	t.Helper()
	if err := usable(); err != nil {
		if os.Getenv(RequireEnv) == "" {
			t.Skipf("netbed: %v", err)
		}
		t.Fatalf("netbed: %v", err)
	}
	sweep()
	id := fmt.Sprintf("%d-%d", os.Getpid(), beds.Add(1))
	b := &Bed{t: t, id: id, bridge: "sb" + id}
	t.Cleanup(b.remove)
	b.must("ip", "link", "add", b.bridge, "type", "bridge")
	b.must("ip", "link", "set", b.bridge, "up")
	return b
}

func usable() error {
	if os.Geteuid() != 0 {
		return fmt.Errorf("needs root (network namespaces)")
	}
	for _, tool := range []string{"ip", "tc", "nsenter"} {
		if _, err := exec.LookPath(tool); err != nil {
			return fmt.Errorf("needs %s: %w", tool, err)
		}
	}
	return nil
}

// must runs a command that builds the bed and fails the test if it fails.
func (b *Bed) must(name string, args ...string) {
	b.t.Helper()
	if out, err := exec.Command(name, args...).CombinedOutput(); err != nil {
		b.t.Fatalf("netbed: %s %s: %v: %s", name, strings.Join(args, " "), err, bytes.TrimSpace(out))
	}
}

// Host is one host of the bed.
type Host struct {
	b    *Bed
	Name string
	IP   string // its address on the bed's bridge
	ns   string // the namespace's name
	peer string // its link's end on the bridge
}

// Host adds a host whose link to the bridge carries rate each way ("1gbit",
// "100mbit"; "" for an unshaped link, as fast as the machine copies).
func (b *Bed) Host(name, rate string) *Host {
	b.t.Helper()
	b.mu.Lock()
	n := len(b.hosts) + 1
	h := &Host{b: b, Name: name, IP: fmt.Sprintf("10.99.0.%d", n), ns: fmt.Sprintf("sn%s-%d", b.id, n), peer: fmt.Sprintf("sv%s-%d", b.id, n)}
	if len(h.peer) > 15 { // IFNAMSIZ
		b.t.Fatalf("netbed: link name %s too long", h.peer)
	}
	b.hosts = append(b.hosts, h)
	b.mu.Unlock()
	in := "eth0"
	b.must("ip", "netns", "add", h.ns)
	b.must("ip", "link", "add", h.peer, "type", "veth", "peer", "name", in, "netns", h.ns)
	b.must("ip", "link", "set", h.peer, "master", b.bridge)
	b.must("ip", "link", "set", h.peer, "up")
	b.must("ip", "-n", h.ns, "addr", "add", h.IP+"/24", "dev", in)
	b.must("ip", "-n", h.ns, "link", "set", in, "up")
	b.must("ip", "-n", h.ns, "link", "set", "lo", "up")
	if rate != "" {
		// Out of the host (its end of the link) and into it (the
		// bridge's end). The bucket holds 10 ms at the rate, and at
		// least a few of the 64 KiB segments the stack hands a veth.
		bps, err := parseRate(rate)
		if err != nil {
			b.t.Fatalf("netbed: %v", err)
		}
		burst := fmt.Sprint(max(bps/8/100, 256<<10))
		b.must("ip", "netns", "exec", h.ns, "tc", "qdisc", "add", "dev", in, "root", "tbf", "rate", rate, "burst", burst, "latency", "100ms")
		b.must("tc", "qdisc", "add", "dev", h.peer, "root", "tbf", "rate", rate, "burst", burst, "latency", "100ms")
	}
	return h
}

// parseRate reads tc's rates: a number with kbit, mbit or gbit.
func parseRate(s string) (int64, error) {
	for _, u := range []struct {
		suffix string
		mult   int64
	}{{"gbit", 1e9}, {"mbit", 1e6}, {"kbit", 1e3}} {
		if v, ok := strings.CutSuffix(s, u.suffix); ok {
			var n int64
			if _, err := fmt.Sscan(v, &n); err == nil && n > 0 {
				return n * u.mult, nil
			}
		}
	}
	return 0, fmt.Errorf("bad rate %q (want e.g. 100mbit, 1gbit)", s)
}

// Addr is host:port on this host.
func (h *Host) Addr(port int) string { return fmt.Sprintf("%s:%d", h.IP, port) }

// Command is a command to run on the host (not started).
func (h *Host) Command(name string, args ...string) *exec.Cmd {
	return exec.Command("nsenter", append([]string{"--net=/run/netns/" + h.ns, "--", name}, args...)...)
}

// NetnsPath is the host's network namespace, for callers that enter it
// themselves (nsenter --net=PATH).
func (h *Host) NetnsPath() string { return "/run/netns/" + h.ns }

// Down cuts the host's link (ip link set down on the bridge's end): its
// packets and those sent to it are lost, as when a cable is pulled.
func (h *Host) Down() { h.b.must("ip", "link", "set", h.peer, "down") }

// Up restores the link.
func (h *Host) Up() { h.b.must("ip", "link", "set", h.peer, "up") }

// Received is how many bytes the host's link has carried to it so far
// (what the bridge's end sent): tests check which host data went through.
func (h *Host) Received() int64 {
	b, err := os.ReadFile("/sys/class/net/" + h.peer + "/statistics/tx_bytes")
	if err != nil {
		h.b.t.Fatalf("netbed: %v", err)
	}
	n, err := strconv.ParseInt(strings.TrimSpace(string(b)), 10, 64)
	if err != nil {
		h.b.t.Fatalf("netbed: %s: %v", h.peer, err)
	}
	return n
}

// Proc is a process running on a host of the bed.
type Proc struct {
	Cmd  *exec.Cmd
	log  *cmdtest.Buffer
	done chan struct{}
	err  error
}

// Start starts name on the host; the bed stops it at the end.
func (h *Host) Start(name string, args ...string) *Proc {
	h.b.t.Helper()
	p := &Proc{Cmd: h.Command(name, args...), log: &cmdtest.Buffer{}, done: make(chan struct{})}
	p.Cmd.Stdout, p.Cmd.Stderr = p.log, p.log
	// Its own process group: a stop reaches what it started too.
	p.Cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	if err := p.Cmd.Start(); err != nil {
		h.b.t.Fatalf("netbed: start %s on %s: %v", name, h.Name, err)
	}
	go func() { p.err = p.Cmd.Wait(); close(p.done) }()
	h.b.mu.Lock()
	h.b.procs = append(h.b.procs, p)
	h.b.mu.Unlock()
	return p
}

// Log is what the process wrote so far.
func (p *Proc) Log() string { return p.log.String() }

// Running reports whether the process has not exited.
func (p *Proc) Running() bool {
	select {
	case <-p.done:
		return false
	default:
		return true
	}
}

// Wait waits for the process to exit and returns how it did.
func (p *Proc) Wait() error {
	<-p.done
	return p.err
}

// Kill9 kills the process at once (SIGKILL), as a crash would.
func (p *Proc) Kill9() {
	syscall.Kill(-p.Cmd.Process.Pid, syscall.SIGKILL)
	<-p.done
}

// Stop asks the process to stop (SIGTERM) and kills it after 10 s.
func (p *Proc) Stop() {
	if !p.Running() {
		return
	}
	syscall.Kill(-p.Cmd.Process.Pid, syscall.SIGTERM)
	select {
	case <-p.done:
	case <-time.After(10 * time.Second):
		p.Kill9()
	}
}

// Signal sends sig to the process (SIGSTOP to pause a server, SIGCONT to
// resume it).
func (p *Proc) Signal(sig syscall.Signal) { syscall.Kill(-p.Cmd.Process.Pid, sig) }

// sweep deletes the namespaces and bridges of beds whose process is gone
// (a test binary killed before its cleanup ran): names carry the pid.
func sweep() {
	dead := func(name, prefix string) bool {
		rest, ok := strings.CutPrefix(name, prefix)
		pid, _, found := strings.Cut(rest, "-")
		if !ok || !found {
			return false
		}
		n, err := strconv.Atoi(pid)
		return err == nil && n > 0 && syscall.Kill(n, 0) == syscall.ESRCH
	}
	if out, err := exec.Command("ip", "netns", "list").Output(); err == nil {
		for _, l := range strings.Split(string(out), "\n") {
			if f := strings.Fields(l); len(f) > 0 && dead(f[0], "sn") {
				exec.Command("ip", "netns", "del", f[0]).Run()
			}
		}
	}
	if out, err := exec.Command("ip", "-o", "link", "show", "type", "bridge").Output(); err == nil {
		for _, l := range strings.Split(string(out), "\n") {
			if f := strings.Fields(l); len(f) > 1 {
				if name := strings.TrimSuffix(f[1], ":"); dead(name, "sb") {
					exec.Command("ip", "link", "del", name).Run()
				}
			}
		}
	}
}

// remove stops every process and deletes the hosts and the bridge.
func (b *Bed) remove() {
	b.mu.Lock()
	procs, hosts := b.procs, b.hosts
	b.mu.Unlock()
	for _, p := range procs {
		p.Signal(syscall.SIGCONT) // a paused one must see its SIGTERM
		p.Stop()
	}
	for _, h := range hosts {
		exec.Command("ip", "netns", "del", h.ns).Run() // takes its veth pair along
	}
	exec.Command("ip", "link", "del", b.bridge).Run()
}
