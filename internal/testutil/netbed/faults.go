package netbed

import (
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"runtime"
	"sync"
	"time"

	"golang.org/x/sys/unix"
)

// Loss drops percent of the packets the host sends and of those it
// receives, at random (nftables' numgen in its namespace; this kernel has
// no netem). TCP resends them: transfers slow down, nothing is lost.
func (h *Host) Loss(percent int) {
	h.b.t.Helper()
	if _, err := exec.LookPath("nft"); err != nil {
		h.b.t.Fatalf("netbed: Loss needs nft (apt-get install nftables): %v", err)
	}
	h.b.must("ip", "netns", "exec", h.ns, "nft", "add", "table", "inet", "netbed")
	for _, hook := range []string{"input", "output"} {
		h.b.must("ip", "netns", "exec", h.ns, "nft", "add", "chain", "inet", "netbed", hook, fmt.Sprintf("{ type filter hook %s priority 0; }", hook))
		h.b.must("ip", "netns", "exec", h.ns, "nft", "add", "rule", "inet", "netbed", hook, "numgen", "random", "mod", "100", "<", fmt.Sprint(percent), "drop")
	}
}

// inNetns runs fn on an OS thread that has entered the host's network
// namespace: sockets fn makes (listeners, connections) belong to the host,
// and keep working from any thread afterwards.
func (h *Host) inNetns(fn func() error) error {
	runtime.LockOSThread()
	orig, err := os.Open("/proc/thread-self/ns/net")
	if err != nil {
		runtime.UnlockOSThread()
		return err
	}
	defer orig.Close()
	ns, err := os.Open(h.NetnsPath())
	if err != nil {
		runtime.UnlockOSThread()
		return err
	}
	defer ns.Close()
	if err := unix.Setns(int(ns.Fd()), unix.CLONE_NEWNET); err != nil {
		runtime.UnlockOSThread()
		return fmt.Errorf("setns: %w", err)
	}
	ferr := fn()
	if err := unix.Setns(int(orig.Fd()), unix.CLONE_NEWNET); err != nil {
		// The thread stays locked, and ends with its goroutine: no
		// other goroutine may run in the wrong namespace.
		return errors.Join(ferr, fmt.Errorf("setns back: %w", err))
	}
	runtime.UnlockOSThread()
	return ferr
}

// Proxy is a TCP proxy on a host of the bed that delays everything it
// forwards, each way: a path with latency, which this kernel cannot add
// (no netem). Clients connect to its address instead of the target's.
type Proxy struct {
	Addr  string // host:port clients connect to
	ln    net.Listener
	mu    sync.Mutex
	conns []net.Conn
	cut   bool
}

// Proxy starts a proxy listening on port of the host and forwarding to
// target (dialed from the host), every byte delayed by delay each way; the
// bed stops it at the end.
func (h *Host) Proxy(port int, target string, delay time.Duration) *Proxy {
	h.b.t.Helper()
	p := &Proxy{Addr: h.Addr(port)}
	if err := h.inNetns(func() (err error) { p.ln, err = net.Listen("tcp", p.Addr); return err }); err != nil {
		h.b.t.Fatalf("netbed: proxy on %s: %v", p.Addr, err)
	}
	h.b.t.Cleanup(p.Close)
	go func() {
		for {
			c, err := p.ln.Accept()
			if err != nil {
				return
			}
			go p.forward(h, c, target, delay)
		}
	}()
	return p
}

func (p *Proxy) forward(h *Host, c net.Conn, target string, delay time.Duration) {
	var up net.Conn
	err := h.inNetns(func() (err error) { up, err = net.DialTimeout("tcp", target, 5*time.Second); return err })
	if err != nil || !p.track(c, up) {
		c.Close()
		if up != nil {
			up.Close()
		}
		return
	}
	go delayed(up, c, delay)
	delayed(c, up, delay)
}

// track records a connection pair so that Reset can cut it; false if the
// proxy is cut already.
func (p *Proxy) track(cs ...net.Conn) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.cut {
		return false
	}
	p.conns = append(p.conns, cs...)
	return true
}

// delayed copies src to dst, each chunk written delay after it was read
// (the chunks keep their order and the stream its rate), and closes dst's
// writing side at the end.
func delayed(dst, src net.Conn, delay time.Duration) {
	type chunk struct {
		b  []byte
		at time.Time
	}
	q := make(chan chunk, 1024)
	go func() {
		defer close(q)
		for {
			b := make([]byte, 64<<10)
			n, err := src.Read(b)
			if n > 0 {
				q <- chunk{b[:n], time.Now().Add(delay)}
			}
			if err != nil {
				return
			}
		}
	}()
	for ch := range q {
		time.Sleep(time.Until(ch.at))
		if _, err := dst.Write(ch.b); err != nil {
			src.Close()
			for range q {
			}
			return
		}
	}
	if tc, ok := dst.(*net.TCPConn); ok {
		tc.CloseWrite()
	} else {
		dst.Close()
	}
}

// Reset cuts every connection through the proxy (as a peer's RST would)
// and, with refuse, refuses new ones until Restore.
func (p *Proxy) Reset(refuse bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, c := range p.conns {
		if tc, ok := c.(*net.TCPConn); ok {
			tc.SetLinger(0) // an RST, not a FIN
		}
		c.Close()
	}
	p.conns, p.cut = nil, refuse
}

// Restore lets connections through again after Reset(true).
func (p *Proxy) Restore() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.cut = false
}

// Close stops the proxy and its connections.
func (p *Proxy) Close() {
	p.ln.Close()
	p.Reset(true)
}
