// Package httpserve serves the control API's http.Handler over HTTP/1.1
// keep-alive connections, doing less per request than net/http.Server.
//
// Why not net/http's server: a control request (a create, a stat) costs
// the core ~55 µs of CPU on a 2-core machine, and net/http.Server spends
// ~5 µs of that on work a JSON API with small bodies does not need — above
// all a goroutine started after every request to watch the connection for
// a client that goes away (an extra read syscall, a deadline set and reset,
// two goroutine hand-offs). Here one goroutine per connection reads a
// request with net/http's own parser (http.ReadRequest), runs the handler
// into a buffer, and writes the response with its Content-Length in one
// write. The connection is watched only when a request has run for
// watchAfter: the requests that wait (a stage that waits for its recall, a
// repack, a migration run) still see their context cancelled when the
// client disconnects.
//
// It carries what net/http.Server has that a server facing the network
// needs: MaxHeaderBytes (431 past 1 MiB: the header is read through a
// limit, never into memory whole), HeaderTimeout (a slow header is cut
// off), IdleTimeout (idle keep-alive connections are closed by a sweeper,
// not a deadline per request), MaxBody (413), and one thing it does not:
// MaxConnsPerHost, a cap on connections from one remote address. TLS is
// the listener's (tls.NewListener): a *tls.Conn is a net.Conn like any
// other here, except that a request in plain HTTP to it is answered 400
// with net/http's words, which the client turns into advice.
//
// Measured with those limits on, against net/http.Server with the same
// ones (BenchmarkServer: 8 clients as Strata's, a stat-sized reply, loopback
// TCP, six runs taking turns): 57.4–61.3k requests/s against 51.2–56.6k,
// 1.04–1.16× (median 1.08). That, and not the bundled figures that first
// justified it, is why the control API keeps its own server.
//
// What it does not do, because the control API does not need it: HTTP/2,
// streaming responses (a handler's output is buffered whole; the largest
// is a directory page), trailers, hijacking.
package httpserve

import (
	"bufio"
	"bytes"
	"context"
	"crypto/tls"
	"errors"
	"io"
	"log/slog"
	"net"
	"net/http"
	"runtime/debug"
	"strconv"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
)

// Server serves one handler on any number of listeners.
type Server struct {
	Handler http.Handler
	// HeaderTimeout bounds how long a started request may take to send
	// its header (default 10 s): a client that stalls mid-header (a
	// slowloris) is cut off.
	HeaderTimeout time.Duration
	// IdleTimeout closes a keep-alive connection that has sent nothing
	// for this long (default 5 min): idle connections cannot pile up.
	IdleTimeout time.Duration
	// MaxHeaderBytes bounds a request's line and header (default 1 MiB,
	// as net/http): a larger one gets 431 and the connection closes.
	MaxHeaderBytes int
	// MaxConnsPerHost bounds the connections open at once from one
	// remote IP address (default 512; TCP only): a flood from one host
	// is closed at accept and everyone else is still served.
	MaxConnsPerHost int
	// MaxBody bounds a request body (default 8 MiB).
	MaxBody int64
	Log     *slog.Logger
	// ConnContext, if set, derives the context of every request on a new
	// connection (as net/http.Server's does): the caller's identity on a
	// Unix socket, or by a TLS client certificate, is a property of the
	// connection. It runs on the connection's own goroutine (it may wait
	// for a TLS handshake), before its first request is read.
	ConnContext func(ctx context.Context, c net.Conn) context.Context

	mu       sync.Mutex
	lns      map[net.Listener]struct{}
	conns    map[*conn]struct{}
	perHost  map[string]int // open TCP connections by remote IP
	sweeping bool           // the idle sweeper runs
	closing  bool
	wg       sync.WaitGroup
	shutdown chan struct{} // closed when Shutdown starts
}

var (
	// watchAfter is how long a request runs before its connection is
	// watched for the client going away (a variable for tests).
	watchAfter = 50 * time.Millisecond
)

// ErrServerClosed is returned by Serve after Shutdown.
var ErrServerClosed = http.ErrServerClosed

func (s *Server) init() {
	if s.lns == nil {
		s.lns = map[net.Listener]struct{}{}
		s.conns = map[*conn]struct{}{}
		s.perHost = map[string]int{}
		s.shutdown = make(chan struct{})
	}
}

// Serve accepts connections on ln until Shutdown, and returns
// ErrServerClosed then.
func (s *Server) Serve(ln net.Listener) error {
	s.mu.Lock()
	s.init()
	if s.closing {
		s.mu.Unlock()
		ln.Close()
		return ErrServerClosed
	}
	s.lns[ln] = struct{}{}
	s.mu.Unlock()
	var backoff time.Duration
	for {
		nc, err := ln.Accept()
		if err != nil {
			s.mu.Lock()
			closing := s.closing
			s.mu.Unlock()
			if closing {
				return ErrServerClosed
			}
			var ne net.Error
			if errors.As(err, &ne) && ne.Timeout() || errors.Is(err, syscall.EMFILE) || errors.Is(err, syscall.ENFILE) {
				// Out of descriptors, say: wait, as net/http does, rather
				// than spin or give up.
				backoff = min(max(2*backoff, 5*time.Millisecond), time.Second)
				time.Sleep(backoff)
				continue
			}
			return err
		}
		backoff = 0
		c, err := s.newConn(nc)
		if err == errTooMany {
			nc.Close()
			continue
		}
		if c == nil {
			nc.Close()
			return ErrServerClosed
		}
		go func() {
			defer s.wg.Done()
			c.serve()
		}()
	}
}

var errTooMany = errors.New("httpserve: too many connections from one host")

func (s *Server) newConn(nc net.Conn) (*conn, error) {
	host := ""
	if a, ok := nc.RemoteAddr().(*net.TCPAddr); ok {
		host = a.IP.String()
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closing {
		return nil, ErrServerClosed
	}
	if host != "" {
		if s.perHost[host] >= s.maxConnsPerHost() {
			return nil, errTooMany
		}
		s.perHost[host]++
	}
	ctx, cancel := context.WithCancel(context.Background())
	c := &conn{s: s, nc: nc, ctx: ctx, cancel: cancel, host: host,
		bw: bufio.NewWriterSize(nc, 4<<10), remote: nc.RemoteAddr().String()}
	c.lim.r, c.lim.n = nc, 1<<62
	c.br = bufio.NewReaderSize(&c.lim, 4<<10)
	c.idleSince.Store(time.Now().UnixNano())
	s.conns[c] = struct{}{}
	s.wg.Add(1)
	if !s.sweeping {
		s.sweeping = true
		go s.sweep()
	}
	return c, nil
}

// plainToTLS answers, as net/http does, a client that sent plain HTTP to
// a TLS listener (err is the handshake's): 400 and why, not a connection
// closed without a word.
func plainToTLS(err error) {
	var re tls.RecordHeaderError
	if !errors.As(err, &re) || re.Conn == nil {
		return
	}
	for _, m := range []string{"GET /", "HEAD ", "POST ", "PUT /", "DELET", "OPTIO", "PATCH", "CONNE"} {
		if string(re.RecordHeader[:]) == m {
			re.Conn.SetWriteDeadline(time.Now().Add(5 * time.Second))
			io.WriteString(re.Conn, "HTTP/1.0 400 Bad Request\r\nContent-Type: text/plain; charset=utf-8\r\n\r\nClient sent an HTTP request to an HTTPS server.\n")
			re.Conn.Close()
			return
		}
	}
}

func (s *Server) drop(c *conn) {
	s.mu.Lock()
	delete(s.conns, c)
	if c.host != "" {
		if s.perHost[c.host]--; s.perHost[c.host] <= 0 {
			delete(s.perHost, c.host)
		}
	}
	s.mu.Unlock()
}

func (s *Server) maxConnsPerHost() int {
	if s.MaxConnsPerHost > 0 {
		return s.MaxConnsPerHost
	}
	return 512
}

func (s *Server) idleTimeout() time.Duration {
	if s.IdleTimeout > 0 {
		return s.IdleTimeout
	}
	return 5 * time.Minute
}

func (s *Server) maxHeaderBytes() int64 {
	if s.MaxHeaderBytes > 0 {
		return int64(s.MaxHeaderBytes)
	}
	return 1 << 20
}

// sweep closes connections idle for longer than IdleTimeout, checking a
// few times per timeout: cheaper than a read deadline set and cleared
// around every request (a timer each), which the hot path avoids.
func (s *Server) sweep() {
	every := s.idleTimeout() / 4
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		select {
		case <-s.shutdown:
			return
		case <-t.C:
		}
		old := time.Now().Add(-s.idleTimeout()).UnixNano()
		s.mu.Lock()
		for c := range s.conns {
			if c.idleSince.Load() < old && c.state.CompareAndSwap(stateIdle, stateClosed) {
				c.nc.Close()
			}
		}
		s.mu.Unlock()
	}
}

// Shutdown stops accepting, closes idle connections, lets requests in
// progress finish until ctx ends, then closes their connections and
// cancels their contexts, and waits for every connection's goroutine.
func (s *Server) Shutdown(ctx context.Context) error {
	s.mu.Lock()
	s.init()
	if !s.closing {
		s.closing = true
		close(s.shutdown)
		for ln := range s.lns {
			ln.Close()
		}
	}
	s.mu.Unlock()
	done := make(chan struct{})
	go func() { s.wg.Wait(); close(done) }()
	t := time.NewTicker(10 * time.Millisecond)
	defer t.Stop()
	for {
		s.closeIdle()
		select {
		case <-done:
			return nil
		case <-t.C:
		case <-ctx.Done():
			s.mu.Lock()
			for c := range s.conns {
				// Close before cancelling: a handler woken by the cancel
				// must not get a (partial or empty) reply out first, as if
				// its request had succeeded.
				c.nc.Close()
				c.cancel()
			}
			s.mu.Unlock()
			<-done
			return ctx.Err()
		}
	}
}

func (s *Server) closeIdle() {
	s.mu.Lock()
	defer s.mu.Unlock()
	for c := range s.conns {
		if c.state.CompareAndSwap(stateIdle, stateClosed) {
			c.nc.Close()
		}
	}
}

// Connection states: idle between requests (Shutdown may close it),
// active while a request is read and served.
const (
	stateIdle int32 = iota
	stateActive
	stateClosed
)

type conn struct {
	s      *Server
	nc     net.Conn
	lim    limitReader // between nc and br: bounds a request's header
	host   string      // remote IP of a TCP connection
	br     *bufio.Reader
	bw     *bufio.Writer
	remote string
	state  atomic.Int32
	// idleSince is when the connection last went idle (Unix ns).
	idleSince atomic.Int64
	ctx       context.Context // cancelled when the connection ends
	cancel    context.CancelFunc
	w         response     // reused: one request at a time
	body      bytes.Buffer // the request body, likewise
}

func (c *conn) serve() {
	defer c.s.drop(c)
	defer c.cancel()
	defer c.nc.Close()
	if c.s.ConnContext != nil {
		c.ctx = c.s.ConnContext(c.ctx, c.nc)
	}
	for {
		// Wait for a request without a deadline, then give its header
		// HeaderTimeout unless the first read brought all of it (the
		// usual case: setting a deadline costs a timer).
		if _, err := c.br.Peek(1); err != nil {
			plainToTLS(err)
			return
		}
		if !c.state.CompareAndSwap(stateIdle, stateActive) {
			return // Shutdown closed it
		}
		var deadline time.Time
		if !bytes.Contains(c.bufferedPeek(), []byte("\r\n\r\n")) {
			deadline = time.Now().Add(c.s.headerTimeout())
			c.nc.SetReadDeadline(deadline)
		}
		// What the buffer holds was already counted; the header may take
		// MaxHeaderBytes more (and a buffer's read-ahead: 4 KiB).
		c.lim.n = c.s.maxHeaderBytes() + 4096
		req, err := http.ReadRequest(c.br)
		hit := c.lim.n <= 0
		c.lim.n = 1 << 62
		if !deadline.IsZero() {
			c.nc.SetReadDeadline(time.Time{})
		}
		if err != nil && hit {
			io.WriteString(c.nc, "HTTP/1.1 431 Request Header Fields Too Large\r\nContent-Type: text/plain; charset=utf-8\r\nConnection: close\r\nContent-Length: 35\r\n\r\n431 Request Header Fields Too Large")
			return
		}
		if err != nil {
			// A header cut short by the timeout can come back as a
			// malformed one (textproto keeps the partial line, not the
			// error): the clock tells.
			timedOut := !deadline.IsZero() && !time.Now().Before(deadline)
			if !timedOut && !errors.Is(err, io.EOF) && !errors.Is(err, io.ErrUnexpectedEOF) {
				// A malformed request: say so, as net/http does, and hang up.
				io.WriteString(c.nc, "HTTP/1.1 400 Bad Request\r\nContent-Type: text/plain; charset=utf-8\r\nConnection: close\r\nContent-Length: 15\r\n\r\n400 Bad Request")
			}
			return
		}
		if !c.serveOne(req) {
			return
		}
		c.idleSince.Store(time.Now().UnixNano())
		if !c.state.CompareAndSwap(stateActive, stateIdle) {
			return
		}
		select {
		case <-c.s.shutdown:
			return
		default:
		}
	}
}

func (c *conn) bufferedPeek() []byte {
	b, _ := c.br.Peek(c.br.Buffered())
	return b
}

func (s *Server) headerTimeout() time.Duration {
	if s.HeaderTimeout > 0 {
		return s.HeaderTimeout
	}
	return 10 * time.Second
}

// serveOne runs one request and writes its response; false means the
// connection must close.
func (c *conn) serveOne(req *http.Request) bool {
	req.RemoteAddr = c.remote
	ctx, cancel := context.WithCancel(c.ctx)
	defer cancel()
	req = req.WithContext(ctx)
	if req.Header.Get("Expect") == "100-continue" && req.ContentLength != 0 {
		c.bw.WriteString("HTTP/1.1 100 Continue\r\n\r\n")
		if c.bw.Flush() != nil {
			return false
		}
	}
	if !c.readBody(req) {
		return false
	}
	w := &c.w
	w.reset(req)
	wt := new(watcher) // one per request: a late timer finds its own
	watch := time.AfterFunc(watchAfter, func() { c.watch(wt, cancel) })
	ok := c.run(w, req)
	if !watch.Stop() {
		// The timer fired: stop its watch before the next read.
		c.unwatch(wt)
	}
	if !ok {
		return false
	}
	keep := !req.Close && !w.close && req.ProtoAtLeast(1, 1)
	if err := w.writeTo(c.bw, keep); err != nil {
		return false
	}
	return keep && c.bw.Flush() == nil
}

// readBody reads the request body whole before the handler runs, so the
// connection is free for the watcher; control requests are small. A body
// over MaxBody gets 413 and the connection closes.
func (c *conn) readBody(req *http.Request) bool {
	if req.Body == nil || req.Body == http.NoBody {
		return true
	}
	c.body.Reset()
	n, err := c.body.ReadFrom(io.LimitReader(req.Body, c.s.maxBody()+1))
	req.Body.Close()
	if err != nil {
		return false
	}
	if n > c.s.maxBody() {
		c.w.reset(req)
		c.w.WriteHeader(http.StatusRequestEntityTooLarge)
		io.WriteString(&c.w, "request body too large\n")
		c.w.writeTo(c.bw, false)
		return false
	}
	req.Body = io.NopCloser(bytes.NewReader(c.body.Bytes()))
	return true
}

func (s *Server) maxBody() int64 {
	if s.MaxBody > 0 {
		return s.MaxBody
	}
	return 8 << 20
}

// run calls the handler; false means it panicked with
// http.ErrAbortHandler (drop the connection, as net/http does).
func (c *conn) run(w *response, req *http.Request) (ok bool) {
	defer func() {
		if v := recover(); v != nil {
			if v == http.ErrAbortHandler {
				ok = false
				return
			}
			c.s.logger().Error("httpserve: panic serving request", "method", req.Method, "path", req.URL.Path, "panic", v, "stack", string(debug.Stack()))
			w.reset(req)
			w.close = true
			w.WriteHeader(http.StatusInternalServerError)
			ok = true
		}
	}()
	c.s.Handler.ServeHTTP(w, req)
	return true
}

// watcher is the state of one request's watch on its connection. The
// timer's function and the request's goroutine meet under mu: once
// stopped is set the function does not start reading, and if it already
// has, unwatch ends its read and waits for it (a Stop that fails only says
// the function began, not how far it got).
type watcher struct {
	mu      sync.Mutex
	stopped bool
	reading bool
	done    chan struct{}
}

// watch runs (in the timer's goroutine) once a request has taken
// watchAfter: it waits for the client to hang up, or send more, and
// cancels the request if it hangs up.
func (c *conn) watch(w *watcher, cancel context.CancelFunc) {
	w.mu.Lock()
	if w.stopped {
		w.mu.Unlock()
		return
	}
	w.reading = true
	w.done = make(chan struct{})
	w.mu.Unlock()
	defer close(w.done)
	// The body was read before the handler ran: what comes now is the
	// client's next request or its hang-up.
	if _, err := c.br.Peek(1); err != nil {
		var ne net.Error
		if !(errors.As(err, &ne) && ne.Timeout()) {
			cancel()
		}
	}
}

// unwatch stops the watch; a deadline in the past ends its read.
func (c *conn) unwatch(w *watcher) {
	w.mu.Lock()
	w.stopped = true
	reading := w.reading
	w.mu.Unlock()
	if reading {
		c.nc.SetReadDeadline(time.Unix(1, 0))
		<-w.done
		c.nc.SetReadDeadline(time.Time{})
	}
}

func (s *Server) logger() *slog.Logger {
	if s.Log != nil {
		return s.Log
	}
	return slog.Default()
}

// response buffers a handler's output.
type response struct {
	hdr     http.Header
	status  int
	body    bytes.Buffer
	head    bool
	headLen int // what a HEAD request's handler wrote (and was not sent)
	close   bool
}

func (w *response) reset(req *http.Request) {
	if w.hdr == nil {
		w.hdr = make(http.Header, 2)
	}
	clear(w.hdr)
	w.status = 0
	w.body.Reset()
	w.head = req.Method == http.MethodHead
	w.headLen = 0
	w.close = false
}

func (w *response) Header() http.Header { return w.hdr }

func (w *response) WriteHeader(code int) {
	if w.status == 0 && code >= 200 {
		w.status = code
	}
}

func (w *response) Write(p []byte) (int, error) {
	if w.status == 0 {
		w.status = http.StatusOK
	}
	if w.head {
		w.headLen += len(p)
		return len(p), nil
	}
	return w.body.Write(p)
}

var dateCache atomic.Pointer[dated]

type dated struct {
	sec int64
	s   string
}

// date is the Date header, formatted once a second.
func date() string {
	now := time.Now()
	if d := dateCache.Load(); d != nil && d.sec == now.Unix() {
		return d.s
	}
	d := &dated{sec: now.Unix(), s: now.UTC().Format(http.TimeFormat)}
	dateCache.Store(d)
	return d.s
}

func (w *response) writeTo(bw *bufio.Writer, keep bool) error {
	if w.status == 0 {
		w.status = http.StatusOK
	}
	if w.hdr.Get("Content-Type") == "" && w.body.Len() > 0 {
		w.hdr.Set("Content-Type", http.DetectContentType(w.body.Bytes()))
	}
	w.hdr.Del("Content-Length")
	w.hdr.Del("Transfer-Encoding")
	bw.WriteString("HTTP/1.1 ")
	bw.WriteString(strconv.Itoa(w.status))
	bw.WriteByte(' ')
	bw.WriteString(http.StatusText(w.status))
	bw.WriteString("\r\n")
	for k, vs := range w.hdr {
		for _, v := range vs {
			bw.WriteString(k)
			bw.WriteString(": ")
			bw.WriteString(headerValue(v))
			bw.WriteString("\r\n")
		}
	}
	bw.WriteString("Date: ")
	bw.WriteString(date())
	bw.WriteString("\r\n")
	if !keep {
		bw.WriteString("Connection: close\r\n")
	}
	if bodyAllowed(w.status) {
		bw.WriteString("Content-Length: ")
		bw.WriteString(strconv.Itoa(w.body.Len() + w.headLen))
		bw.WriteString("\r\n\r\n")
		if !w.head {
			bw.Write(w.body.Bytes())
		}
	} else {
		bw.WriteString("\r\n")
	}
	if keep {
		return nil // the caller flushes
	}
	return bw.Flush()
}

// headerValue keeps a handler's header value from splitting the response.
func headerValue(v string) string {
	for i := 0; i < len(v); i++ {
		if v[i] == '\r' || v[i] == '\n' {
			return string(bytes.Map(func(r rune) rune {
				if r == '\r' || r == '\n' {
					return ' '
				}
				return r
			}, []byte(v)))
		}
	}
	return v
}

func bodyAllowed(status int) bool {
	return !(status >= 100 && status <= 199) && status != http.StatusNoContent && status != http.StatusNotModified
}

// limitReader reads from r until n bytes have been read, then fails: the
// connection's reads while a request's header is parsed.
type limitReader struct {
	r io.Reader
	n int64
}

var errHeaderTooLarge = errors.New("httpserve: request header too large")

func (l *limitReader) Read(p []byte) (int, error) {
	if l.n <= 0 {
		return 0, errHeaderTooLarge
	}
	if int64(len(p)) > l.n {
		p = p[:l.n]
	}
	n, err := l.r.Read(p)
	l.n -= int64(n)
	return n, err
}
