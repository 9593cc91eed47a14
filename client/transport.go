package client

import (
	"bufio"
	"bytes"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"sync"
	"syscall"
	"time"

	"github.com/strata-storage/strata/internal/api"
	"github.com/strata-storage/strata/internal/moverconn"
)

// transport is the control plane's HTTP/1.1 client: keep-alive
// connections to the one core, used synchronously by the calling goroutine
// (no reader and writer goroutines per connection, as http.Transport has:
// their hand-offs cost a third of a metadata round trip on a 2-core
// machine, 56k against 87k requests/s against the same server). Its
// messages are written and read by httpcodec.go.
//
// On its first connection it asks the core (/v1/local) for a Unix socket
// serving the same API; when the core runs on this host, every later
// connection uses it, as clients do with a local mover's socket.
type transport struct {
	addr    string
	tls     *tls.Config // nil: plain HTTP
	dialer  net.Dialer
	mu      sync.Mutex
	idle    []*pconn
	closed  bool
	tcpOnly bool
	socket  string // "" not asked yet; noSocket: none usable
	// unixOnly: the client was given the socket itself (unix:PATH), and
	// never uses TCP.
	unixOnly bool
	// When the core last said it had no socket for us: the next TCP dial
	// after reprobeAfter asks again, so a long-lived client finds the
	// socket of a core restarted with one.
	noSocketAt time.Time
}

const noSocket = "-"

// reprobeAfter is how long a "no socket" answer holds (a variable for tests).
var reprobeAfter = time.Minute

const maxIdleConns = 64

type pconn struct {
	c    net.Conn
	br   *bufio.Reader
	bw   *bufio.Writer
	idle time.Time // when it went back to the pool
}

// checkIdleAfter is how long a pooled connection may sit before a request
// that must not be sent twice first checks that the server has not closed
// it (a variable for tests).
var checkIdleAfter = time.Second

func newTransport(addr string) *transport {
	return &transport{addr: addr, dialer: moverconn.Dialer()}
}

// get returns a connection: a pooled one, or a new one. For a request
// that must not run twice (check), a connection that has sat idle a while
// is first checked for a close from the server, which can then never be
// mistaken for a failure after the request was sent.
func (t *transport) get(ctx context.Context, check bool) (*pconn, bool, error) {
	for {
		t.mu.Lock()
		n := len(t.idle)
		if n == 0 {
			t.mu.Unlock()
			break
		}
		pc := t.idle[n-1]
		t.idle = t.idle[:n-1]
		t.mu.Unlock()
		if check && time.Since(pc.idle) >= checkIdleAfter && closedByPeer(pc) {
			pc.c.Close()
			continue
		}
		return pc, true, nil
	}
	pc, err := t.dial(ctx)
	return pc, false, err
}

// closedByPeer reports whether an idle connection has been closed (or has
// unexpected bytes waiting): a peek that may not wait finds EOF or data
// instead of EAGAIN. (A read with a deadline already past would not even
// try: Go's poller answers it with a timeout before the system call.)
func closedByPeer(pc *pconn) bool {
	if pc.br.Buffered() > 0 {
		return true
	}
	sc, ok := pc.c.(syscall.Conn)
	if !ok {
		return false
	}
	rc, err := sc.SyscallConn()
	if err != nil {
		return false
	}
	closed := false
	rc.Read(func(fd uintptr) bool {
		var b [1]byte
		n, _, err := syscall.Recvfrom(int(fd), b[:], syscall.MSG_PEEK|syscall.MSG_DONTWAIT)
		closed = n > 0 || err == nil || !errors.Is(err, syscall.EAGAIN)
		return true // never wait
	})
	return closed
}

// idempotent requests may be sent again when a reused connection fails
// after they were written (net/http's rule): they change nothing, or
// nothing more the second time.
func idempotent(method string) bool {
	switch method {
	case http.MethodGet, http.MethodHead, http.MethodOptions, http.MethodTrace:
		return true
	}
	return false
}

func newPconn(c net.Conn) *pconn {
	return &pconn{c: c, br: bufio.NewReaderSize(c, 16<<10), bw: bufio.NewWriterSize(c, 16<<10)}
}

// dial connects to the core: through its Unix socket when one is known,
// else over TCP, asking for the socket the first time.
func (t *transport) dial(ctx context.Context) (*pconn, error) {
	t.mu.Lock()
	sock, tcpOnly := t.socket, t.tcpOnly
	if t.unixOnly {
		t.mu.Unlock()
		c, err := t.dialer.DialContext(ctx, "unix", sock)
		if err != nil {
			return nil, &dialError{err}
		}
		return newPconn(c), nil
	}
	if sock == noSocket && time.Since(t.noSocketAt) >= reprobeAfter {
		sock = ""
	}
	t.mu.Unlock()
	if !tcpOnly && sock != "" && sock != noSocket {
		if c, err := t.dialer.DialContext(ctx, "unix", sock); err == nil {
			return newPconn(c), nil
		}
		// Gone (the server restarted without it) or not ours to use: ask
		// again on the TCP connection below.
		t.setSocket("")
		sock = ""
	}
	c, err := t.dialer.DialContext(ctx, "tcp", t.addr)
	if err != nil {
		return nil, &dialError{err}
	}
	t.mu.Lock()
	cfg := t.tls
	t.mu.Unlock()
	if cfg != nil {
		if cfg.ServerName == "" {
			cfg = cfg.Clone()
			cfg.ServerName, _, _ = net.SplitHostPort(t.addr)
		}
		tc := tls.Client(c, cfg)
		if err := tc.HandshakeContext(ctx); err != nil {
			c.Close()
			return nil, fmt.Errorf("TLS with %s: %w", t.addr, err)
		}
		c = tc
	}
	pc := newPconn(c)
	if tcpOnly || sock != "" {
		return pc, nil
	}
	sock, err = t.probe(ctx, pc)
	if err != nil {
		pc.c.Close()
		return nil, err
	}
	if sock != noSocket {
		if uc, err := t.dialer.DialContext(ctx, "unix", sock); err == nil {
			pc.c.Close()
			pc = newPconn(uc)
		} else {
			sock = noSocket // e.g. no permission on it: TCP it is
		}
	}
	t.setSocket(sock)
	return pc, nil
}

func (t *transport) setSocket(s string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.socket = s
	if s == noSocket {
		t.noSocketAt = time.Now()
	}
}

// probe asks the core on pc for its Unix socket and returns it, or
// noSocket when it has none this client can use (another host, an older
// server). pc stays usable unless probe fails.
func (t *transport) probe(ctx context.Context, pc *pconn) (sock string, err error) {
	stop := watch(ctx, pc)
	defer func() {
		if !stop() && err == nil {
			// ctx ended as the answer came: the connection's deadline
			// is (being) set, and pc cannot be used.
			sock, err = "", ctx.Err()
		}
	}()
	if err := (&request{method: http.MethodGet, uri: "/v1/local"}).write(pc.bw, t.addr); err != nil {
		return "", err
	}
	if err := pc.bw.Flush(); err != nil {
		return "", err
	}
	resp, err := readResponse(pc.br)
	if err != nil {
		return "", err
	}
	var l api.Local
	body, err := io.ReadAll(io.LimitReader(resp.body, 64<<10))
	switch {
	case err != nil:
	case resp.status == http.StatusOK:
		err = api.NewDecoder(bytes.NewReader(body)).Decode(&l)
	case bytes.HasPrefix(body, []byte(plainToTLS)):
		return "", errSpeaksTLS
	}
	if err != nil {
		return "", fmt.Errorf("ask for the local socket: %w", err)
	}
	if resp.close {
		return "", fmt.Errorf("ask for the local socket: server closed the connection")
	}
	if l.Socket == "" || l.Host == "" || l.Host != moverconn.HostID() {
		return noSocket, nil
	}
	return l.Socket, nil
}

func (t *transport) put(pc *pconn) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.closed || len(t.idle) >= maxIdleConns {
		pc.c.Close()
		return
	}
	pc.idle = time.Now()
	t.idle = append(t.idle, pc)
}

// CloseIdleConnections closes pooled connections (http.Client calls it).
func (t *transport) CloseIdleConnections() {
	t.mu.Lock()
	defer t.mu.Unlock()
	for _, pc := range t.idle {
		pc.c.Close()
	}
	t.idle = nil
}

// stale reports whether err means a pooled connection had been closed by
// the server (it restarted) before our request reached it.
func stale(err error) bool {
	return errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, syscall.ECONNRESET) || errors.Is(err, syscall.EPIPE)
}

// roundTrip makes request r and returns the reply, whose body the caller
// must close.
//
// A request that failed on a reused connection is sent again, once, on a
// new one only when it cannot have run: writing it failed (the server had
// closed the connection), or it is idempotent. A create or commit whose
// bytes all went out may have run before the server went away; sending it
// again could run it twice, so its error is returned instead.
func (t *transport) roundTrip(ctx context.Context, r *request) (*response, io.Closer, error) {
	if err := r.check(t.addr); err != nil {
		return nil, nil, err
	}
	safe := idempotent(r.method)
	for attempt := 0; ; attempt++ {
		pc, reused, err := t.get(ctx, !safe)
		if err != nil {
			return nil, nil, err
		}
		stop := watch(ctx, pc)
		err = r.write(pc.bw, t.addr)
		if err == nil {
			err = pc.bw.Flush()
		}
		written := err == nil
		var resp *response
		if err == nil {
			resp, err = readResponse(pc.br)
		}
		if err != nil {
			stop()
			pc.c.Close()
			// A connection from the pool that fails at once was closed by
			// a server that restarted.
			if reused && attempt == 0 && ctx.Err() == nil && stale(err) && (!written || safe) {
				continue
			}
			if ctx.Err() != nil {
				return nil, nil, ctx.Err()
			}
			return nil, nil, err
		}
		b := &body{r: resp.body, pc: pc, t: t, stop: stop, keep: !resp.close}
		resp.body = b
		return resp, b, nil
	}
}

// watch breaks pc when ctx ends, unblocking its I/O: its deadline is set
// in the past. stop reports whether it did not: once ctx has ended the
// deadline may be set at any moment, even after stop returns, so a
// connection whose stop returned false must be closed, never pooled (it
// would fail its next request with a timeout out of nowhere).
func watch(ctx context.Context, pc *pconn) (stop func() bool) {
	return context.AfterFunc(ctx, func() { pc.c.SetDeadline(time.Unix(1, 0)) })
}

// body returns its connection to the pool once the response is read whole.
type body struct {
	r    io.Reader
	pc   *pconn
	t    *transport
	stop func() bool
	keep bool
	eof  bool
	done bool
}

func (b *body) Read(p []byte) (int, error) {
	n, err := b.r.Read(p)
	if err == io.EOF {
		b.eof = true
	}
	return n, err
}

func (b *body) Close() error {
	if b.done {
		return nil
	}
	b.done = true
	watched := b.stop()
	if !b.eof {
		// Drain a little so the connection can be reused; give up on
		// anything large.
		if n, err := io.CopyN(io.Discard, b.r, 64<<10); err == io.EOF || (err == nil && n < 64<<10) {
			b.eof = true
		}
	}
	if b.eof && b.keep && watched {
		b.t.put(b.pc)
	} else {
		b.pc.c.Close()
	}
	return nil
}
