package httpserve

import (
	"bufio"
	"bytes"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/strata-storage/strata/internal/testutil/tlstest"
)

// countingListener counts accepted connections, to see keep-alive work.
type countingListener struct {
	net.Listener
	n atomic.Int32
}

func (l *countingListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err == nil {
		l.n.Add(1)
	}
	return c, err
}

// start serves h on 127.0.0.1 and stops the server when the test ends.
func start(t *testing.T, s *Server) (string, *countingListener) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	cl := &countingListener{Listener: ln}
	done := make(chan error, 1)
	go func() { done <- s.Serve(cl) }()
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		if err := s.Shutdown(ctx); err != nil {
			t.Errorf("shutdown: %v", err)
		}
		if err := <-done; !errors.Is(err, ErrServerClosed) {
			t.Errorf("Serve returned %v, want ErrServerClosed", err)
		}
	})
	return ln.Addr().String(), cl
}

func testMux() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /q", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprintf(w, `{"path":%q}`, r.URL.Query().Get("path"))
	})
	mux.HandleFunc("POST /echo", func(w http.ResponseWriter, r *http.Request) {
		b, err := io.ReadAll(r.Body)
		if err != nil {
			http.Error(w, err.Error(), 400)
			return
		}
		w.Header().Set("Content-Type", "application/octet-stream")
		w.Write(b)
	})
	mux.HandleFunc("POST /created", func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(http.StatusCreated)
		io.WriteString(w, "made\n")
	})
	mux.HandleFunc("GET /big", func(w http.ResponseWriter, r *http.Request) {
		w.Write(bytes.Repeat([]byte("x"), 1<<20))
	})
	mux.HandleFunc("GET /empty", func(w http.ResponseWriter, r *http.Request) {})
	mux.HandleFunc("GET /panic", func(w http.ResponseWriter, r *http.Request) { panic("boom") })
	mux.HandleFunc("GET /abort", func(w http.ResponseWriter, r *http.Request) { panic(http.ErrAbortHandler) })
	mux.HandleFunc("GET /split", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("X-Evil", "a\r\nInjected: yes")
	})
	return mux
}

// TestRoundTrips speaks to the server with net/http's own client.
func TestRoundTrips(t *testing.T) {
	addr, ln := start(t, &Server{Handler: testMux(), Log: slog.New(slog.NewTextHandler(io.Discard, nil))})
	hc := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 1}}
	defer hc.CloseIdleConnections()
	big := strings.Repeat("y", 300<<10)
	for _, tc := range []struct {
		name, method, path, body string
		status                   int
		want                     string
		ctype                    string
	}{
		{"query", "GET", "/q?path=/a%20b", "", 200, `{"path":"/a b"}`, "application/json"},
		{"echo", "POST", "/echo", "hello", 200, "hello", "application/octet-stream"},
		{"echo empty", "POST", "/echo", "", 200, "", "application/octet-stream"},
		{"echo large", "POST", "/echo", big, 200, big, "application/octet-stream"},
		{"status", "POST", "/created", "", 201, "made\n", "text/plain; charset=utf-8"},
		{"big", "GET", "/big", "", 200, strings.Repeat("x", 1<<20), "text/plain; charset=utf-8"},
		{"empty", "GET", "/empty", "", 200, "", ""},
		{"not found", "GET", "/nope", "", 404, "404 page not found\n", "text/plain; charset=utf-8"},
		{"wrong method", "DELETE", "/q", "", 405, "Method Not Allowed\n", "text/plain; charset=utf-8"},
		{"head", "HEAD", "/q?path=x", "", 200, "", "application/json"},
		{"panic", "GET", "/panic", "", 500, "", ""},
		{"after panic", "GET", "/q?path=still", "", 200, `{"path":"still"}`, "application/json"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			req, err := http.NewRequest(tc.method, "http://"+addr+tc.path, strings.NewReader(tc.body))
			if err != nil {
				t.Fatal(err)
			}
			resp, err := hc.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			b, err := io.ReadAll(resp.Body)
			resp.Body.Close()
			if err != nil {
				t.Fatal(err)
			}
			if resp.StatusCode != tc.status || string(b) != tc.want {
				t.Fatalf("got %d %.40q, want %d %.40q", resp.StatusCode, b, tc.status, tc.want)
			}
			if got := resp.Header.Get("Content-Type"); got != tc.ctype {
				t.Errorf("Content-Type %q, want %q", got, tc.ctype)
			}
			if resp.Header.Get("Date") == "" {
				t.Error("no Date header")
			}
			if tc.method == "HEAD" && resp.ContentLength != int64(len(`{"path":"x"}`)) {
				t.Errorf("HEAD Content-Length %d", resp.ContentLength)
			}
		})
	}
	// Keep-alive: all of that on one connection, but the panic's (a
	// request that failed that way closes its connection).
	if n := ln.n.Load(); n != 2 {
		t.Errorf("%d connections for the requests, want 2 (keep-alive, one closed after the panic)", n)
	}
}

// get fetches url and returns the status and the body.
func get(t *testing.T, hc *http.Client, url string) (int, string) {
	t.Helper()
	resp, err := hc.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp.StatusCode, string(b)
}

// raw sends bytes on a fresh connection and returns everything the server
// sends back until it closes the connection or goes quiet for a while.
func raw(t *testing.T, addr, in string) string {
	t.Helper()
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if _, err := io.WriteString(c, in); err != nil {
		t.Fatal(err)
	}
	c.SetReadDeadline(time.Now().Add(2 * time.Second))
	var out bytes.Buffer
	io.Copy(&out, c)
	return out.String()
}

// TestWire checks what goes over the connection, byte for byte where it
// matters.
func TestWire(t *testing.T) {
	addr, _ := start(t, &Server{Handler: testMux(), MaxBody: 1 << 10})
	get := "GET /q?path=a HTTP/1.1\r\nHost: x\r\n\r\n"
	for _, tc := range []struct {
		name  string
		in    string
		want  []string // in order
		not   []string
		count map[string]int
	}{
		{name: "pipelined", in: get + get + "GET /q?path=b HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n",
			want:  []string{`{"path":"a"}`, `{"path":"a"}`, "Connection: close", `{"path":"b"}`},
			count: map[string]int{"HTTP/1.1 200 OK": 3}},
		{name: "malformed", in: "NONSENSE\r\n\r\n", want: []string{"HTTP/1.1 400 Bad Request", "Connection: close"}},
		{name: "bad header", in: "GET / HTTP/1.1\r\nHost: x\r\nNo colon here\r\n\r\n", want: []string{"HTTP/1.1 400 Bad Request"}},
		{name: "expect continue", in: "POST /echo HTTP/1.1\r\nHost: x\r\nExpect: 100-continue\r\nContent-Length: 2\r\nConnection: close\r\n\r\nhi",
			want: []string{"HTTP/1.1 100 Continue\r\n\r\n", "HTTP/1.1 200 OK", "Content-Length: 2\r\n\r\nhi"}},
		{name: "chunked body", in: "POST /echo HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\nConnection: close\r\n\r\n3\r\nabc\r\n2\r\nde\r\n0\r\n\r\n",
			want: []string{"HTTP/1.1 200 OK", "Content-Length: 5\r\n\r\nabcde"}, not: []string{"Transfer-Encoding"}},
		{name: "body too large", in: "POST /echo HTTP/1.1\r\nHost: x\r\nContent-Length: 2000\r\n\r\n" + strings.Repeat("z", 2000) + get,
			want: []string{"HTTP/1.1 413 Request Entity Too Large", "Connection: close"}, not: []string{`{"path"`}},
		{name: "http/1.0 closes", in: "GET /q?path=old HTTP/1.0\r\n\r\n" + get,
			want: []string{`{"path":"old"}`}, count: map[string]int{"HTTP/1.1 200 OK": 1}},
		{name: "abort drops the connection", in: "GET /abort HTTP/1.1\r\nHost: x\r\n\r\n" + get, count: map[string]int{"HTTP/1.1": 0}},
		{name: "no header splitting", in: "GET /split HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n",
			want: []string{"X-Evil: a  Injected: yes\r\n"}, not: []string{"\r\nInjected"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			out := raw(t, addr, tc.in)
			rest := out
			for _, w := range tc.want {
				i := strings.Index(rest, w)
				if i < 0 {
					t.Fatalf("no %q (in order) in:\n%s", w, out)
				}
				rest = rest[i+len(w):]
			}
			for _, n := range tc.not {
				if strings.Contains(out, n) {
					t.Errorf("%q in:\n%s", n, out)
				}
			}
			for s, n := range tc.count {
				if got := strings.Count(out, s); got != n {
					t.Errorf("%d × %q, want %d, in:\n%s", got, s, n, out)
				}
			}
		})
	}
}

// TestHeaderTimeout: a client that stalls in the middle of a header is cut
// off; one that sits idle between requests is not.
func TestHeaderTimeout(t *testing.T) {
	addr, _ := start(t, &Server{Handler: testMux(), HeaderTimeout: 100 * time.Millisecond})
	stall, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer stall.Close()
	io.WriteString(stall, "GET /q?path=a HTTP/1.1\r\nHo")
	stall.SetReadDeadline(time.Now().Add(5 * time.Second))
	if b, err := io.ReadAll(stall); err != nil || len(b) != 0 {
		t.Fatalf("stalled header: read %q, %v; want the server to close", b, err)
	}

	idle, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer idle.Close()
	// Not a wait for an event: the connection must sit idle for longer
	// than the header timeout before its request starts.
	time.Sleep(300 * time.Millisecond)
	io.WriteString(idle, "GET /q?path=late HTTP/1.1\r\nHost: x\r\n\r\n")
	idle.SetReadDeadline(time.Now().Add(5 * time.Second))
	resp, err := http.ReadResponse(bufio.NewReader(idle), nil)
	if err != nil {
		t.Fatalf("idle connection: %v", err)
	}
	b, _ := io.ReadAll(resp.Body)
	if string(b) != `{"path":"late"}` {
		t.Fatalf("idle connection answered %q", b)
	}
}

// TestLongRequests: a request that runs long is cancelled when its client
// hangs up, and one that finishes leaves its connection fit for the next.
func TestLongRequests(t *testing.T) {
	defer func(d time.Duration) { watchAfter = d }(watchAfter)
	watchAfter = time.Millisecond
	cancelled := make(chan struct{})
	mux := http.NewServeMux()
	mux.HandleFunc("POST /wait", func(w http.ResponseWriter, r *http.Request) {
		io.ReadAll(r.Body)
		select {
		case <-r.Context().Done():
			close(cancelled)
		case <-time.After(10 * time.Second):
		}
	})
	mux.HandleFunc("GET /slow", func(w http.ResponseWriter, r *http.Request) {
		time.Sleep(20 * time.Millisecond)
		if r.Context().Err() != nil {
			http.Error(w, "cancelled", 500)
			return
		}
		io.WriteString(w, "slow "+r.URL.Query().Get("n"))
	})
	addr, ln := start(t, &Server{Handler: mux})

	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	io.WriteString(c, "POST /wait HTTP/1.1\r\nHost: x\r\nContent-Length: 3\r\n\r\nabc")
	time.Sleep(50 * time.Millisecond)
	c.Close()
	select {
	case <-cancelled:
	case <-time.After(5 * time.Second):
		t.Fatal("the handler's context was not cancelled when its client hung up")
	}

	hc := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 1}}
	defer hc.CloseIdleConnections()
	before := ln.n.Load()
	for i := range 3 {
		code, b := get(t, hc, fmt.Sprintf("http://%s/slow?n=%d", addr, i))
		if want := fmt.Sprintf("slow %d", i); b != want {
			t.Fatalf("got %d %q, want %q", code, b, want)
		}
	}
	if n := ln.n.Load() - before; n != 1 {
		t.Errorf("%d connections for 3 slow requests, want 1", n)
	}
}

// TestShutdown: idle connections close at once, a request in progress
// finishes, and one that outlasts the deadline is cancelled.
func TestShutdown(t *testing.T) {
	for _, tc := range []struct {
		name    string
		release bool
		wantErr error
	}{
		{"in-flight request finishes", true, nil},
		{"deadline cancels it", false, context.DeadlineExceeded},
	} {
		t.Run(tc.name, func(t *testing.T) {
			release := make(chan struct{})
			started := make(chan struct{}, 2)
			mux := http.NewServeMux()
			mux.HandleFunc("GET /hold", func(w http.ResponseWriter, r *http.Request) {
				started <- struct{}{}
				select {
				case <-release:
					io.WriteString(w, "done")
				case <-r.Context().Done():
				}
			})
			mux.HandleFunc("GET /hi", func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "hi") })
			s := &Server{Handler: mux}
			ln, err := net.Listen("tcp", "127.0.0.1:0")
			if err != nil {
				t.Fatal(err)
			}
			served := make(chan error, 1)
			go func() { served <- s.Serve(ln) }()
			addr := ln.Addr().String()

			idle, err := net.Dial("tcp", addr)
			if err != nil {
				t.Fatal(err)
			}
			defer idle.Close()
			io.WriteString(idle, "GET /hi HTTP/1.1\r\nHost: x\r\n\r\n")
			br := bufio.NewReader(idle)
			if resp, err := http.ReadResponse(br, nil); err != nil {
				t.Fatal(err)
			} else {
				io.ReadAll(resp.Body)
			}

			got := make(chan string, 1)
			go func() {
				resp, err := http.Get("http://" + addr + "/hold")
				if err != nil {
					got <- "error: " + err.Error()
					return
				}
				b, _ := io.ReadAll(resp.Body)
				resp.Body.Close()
				got <- string(b)
			}()
			<-started
			ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
			defer cancel()
			shut := make(chan error, 1)
			go func() { shut <- s.Shutdown(ctx) }()

			// The idle connection is closed at once.
			idle.SetReadDeadline(time.Now().Add(5 * time.Second))
			if _, err := br.ReadByte(); err != io.EOF {
				t.Errorf("idle connection: %v, want EOF", err)
			}
			if _, err := net.DialTimeout("tcp", addr, time.Second); err == nil {
				t.Error("still accepting after Shutdown")
			}
			if tc.release {
				close(release)
				if b := <-got; b != "done" {
					t.Errorf("in-flight request got %q", b)
				}
			}
			if err := <-shut; !errors.Is(err, tc.wantErr) {
				t.Errorf("Shutdown: %v, want %v", err, tc.wantErr)
			}
			if !tc.release {
				if b := <-got; !strings.HasPrefix(b, "error") {
					t.Errorf("cut-off request got %q, want an error", b)
				}
			}
			if err := <-served; !errors.Is(err, ErrServerClosed) {
				t.Errorf("Serve: %v", err)
			}
		})
	}
}

// FuzzConn feeds arbitrary bytes to a connection: the server must answer
// or hang up, never panic or hang.
func FuzzConn(f *testing.F) {
	for _, s := range []string{
		"GET /q?path=a HTTP/1.1\r\nHost: x\r\n\r\n",
		"POST /echo HTTP/1.1\r\nHost: x\r\nContent-Length: 3\r\n\r\nabc",
		"POST /echo HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\nz\r\n",
		"GET /q HTTP/1.1\r\nContent-Length: -1\r\n\r\n",
		"HEAD /big HTTP/1.0\r\n\r\n",
		"\x00\xff\r\n\r\n",
		"POST /echo HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nabc\r\n0\r\n\r\n",
		"POST /echo HTTP/1.1\r\nTransfer-Encoding: chunked\r\nContent-Length: 3\r\n\r\n1;ext=1\r\na\r\n0\r\nTrailer: x\r\n\r\n",
		"GET /q HTTP/1.1\r\n" + strings.Repeat("X-A: b\r\n", 300) + "\r\n",
		"GET /q HTTP/1.1\r\nX-Long: " + strings.Repeat("a", 5000) + "\r\n\r\n",
		"GET /q HTTP/1.1\r\nHost: x\r\n\r\nGET /q HTTP/1.1\r\nHost: y\r\n\r\n",
	} {
		f.Add([]byte(s))
	}
	// A small header limit, so that fuzzed inputs reach it.
	s := &Server{Handler: testMux(), MaxBody: 4 << 10, HeaderTimeout: 50 * time.Millisecond, MaxHeaderBytes: 2 << 10}
	s.mu.Lock()
	s.init()
	s.mu.Unlock()
	f.Fuzz(func(t *testing.T, in []byte) {
		cl, sv := net.Pipe()
		c, _ := s.newConn(sv)
		done := make(chan struct{})
		go func() {
			defer close(done)
			defer s.wg.Done()
			c.serve()
		}()
		go io.Copy(io.Discard, cl)
		cl.SetWriteDeadline(time.Now().Add(time.Second))
		cl.Write(in)
		cl.Close()
		select {
		case <-done:
		case <-time.After(5 * time.Second):
			t.Fatalf("connection still served 5 s after its client closed, on %q", in)
		}
	})
}

// TestWatchAtTheEdge: requests that end just as their watch begins (the
// timer firing while the handler returns) leave the connection in step,
// over many requests on one connection; run under -race.
func TestWatchAtTheEdge(t *testing.T) {
	defer func(d time.Duration) { watchAfter = d }(watchAfter)
	watchAfter = 200 * time.Microsecond
	mux := http.NewServeMux()
	mux.HandleFunc("GET /edge", func(w http.ResponseWriter, r *http.Request) {
		n, _ := strconv.Atoi(r.URL.Query().Get("n"))
		time.Sleep(time.Duration(n%5) * 100 * time.Microsecond)
		if r.Context().Err() != nil {
			http.Error(w, "cancelled", 500)
			return
		}
		io.WriteString(w, r.URL.Query().Get("n"))
	})
	addr, ln := start(t, &Server{Handler: mux})
	hc := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 1}}
	defer hc.CloseIdleConnections()
	for i := range 300 {
		if code, b := get(t, hc, fmt.Sprintf("http://%s/edge?n=%d", addr, i)); b != strconv.Itoa(i) {
			t.Fatalf("request %d: %d %q", i, code, b)
		}
	}
	if n := ln.n.Load(); n != 1 {
		t.Errorf("%d connections, want 1", n)
	}
}

// ask asks addr (dialling from the local address from, if set) for /q and
// reports whether it answered.
func ask(t *testing.T, addr, from string) error {
	t.Helper()
	d := net.Dialer{Timeout: 5 * time.Second}
	if from != "" {
		d.LocalAddr = &net.TCPAddr{IP: net.ParseIP(from)}
	}
	c, err := d.Dial("tcp", addr)
	if err != nil {
		return err
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(5 * time.Second))
	io.WriteString(c, "GET /q?path=ok HTTP/1.1\r\nHost: x\r\n\r\n")
	resp, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil {
		return err
	}
	resp.Body.Close()
	if resp.StatusCode != 200 {
		return fmt.Errorf("status %d", resp.StatusCode)
	}
	return nil
}

// TestLimits: the limits net/http has. A header past MaxHeaderBytes gets
// 431 without the server reading (or holding) the rest; a slow header is
// cut off at HeaderTimeout; an idle connection is closed after
// IdleTimeout; a flood of connections from one address is refused past
// MaxConnsPerHost. Through all of it the server answers everyone else.
func TestLimits(t *testing.T) {
	srv := &Server{Handler: testMux(), HeaderTimeout: 200 * time.Millisecond, IdleTimeout: 200 * time.Millisecond, MaxHeaderBytes: 64 << 10, MaxConnsPerHost: 100}
	addr, _ := start(t, srv)

	t.Run("header", func(t *testing.T) {
		c, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		go func() {
			io.WriteString(c, "GET /q HTTP/1.1\r\nHost: x\r\n")
			big := "X-Big: " + strings.Repeat("a", 1<<20) + "\r\n"
			for range 64 { // 64 MiB offered; the server stops reading at 64 KiB
				if _, err := io.WriteString(c, big); err != nil {
					return
				}
			}
		}()
		c.SetReadDeadline(time.Now().Add(5 * time.Second))
		resp, err := http.ReadResponse(bufio.NewReader(c), nil)
		if err != nil || resp.StatusCode != http.StatusRequestHeaderFieldsTooLarge {
			t.Fatalf("a huge header: %v %v", resp, err)
		}
		if err := ask(t, addr, ""); err != nil {
			t.Fatalf("after a huge header: %v", err)
		}
	})

	t.Run("slowloris", func(t *testing.T) {
		c, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		start := time.Now()
		go func() {
			for _, b := range []byte("GET /q HTTP/1.1\r\nHost: x\r\nX-Slow: aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa") {
				if _, err := c.Write([]byte{b}); err != nil {
					return
				}
				if err := ask(t, addr, ""); err != nil { // others are served meanwhile
					t.Errorf("while a slow client dribbles: %v", err)
					return
				}
				time.Sleep(20 * time.Millisecond)
			}
		}()
		c.SetReadDeadline(time.Now().Add(5 * time.Second))
		if b, err := io.ReadAll(c); err != nil || len(b) != 0 {
			t.Fatalf("slow header: read %q, %v", b, err)
		}
		if d := time.Since(start); d > 2*time.Second {
			t.Fatalf("a slow header held its connection %v", d)
		}
	})

	t.Run("idle", func(t *testing.T) {
		c, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		c.SetReadDeadline(time.Now().Add(5 * time.Second))
		if b, err := io.ReadAll(c); err != nil || len(b) != 0 {
			t.Fatalf("idle connection: read %q, %v; want it closed", b, err)
		}
	})

	t.Run("flood", func(t *testing.T) {
		// 10,000 connection attempts from 127.0.0.1, all held open; the
		// server keeps at most 100 of them. A client from another address
		// (127.0.0.2: the whole 127/8 is loopback) is served throughout.
		var held []net.Conn
		defer func() {
			for _, c := range held {
				c.Close()
			}
		}()
		for i := range 10000 {
			c, err := net.DialTimeout("tcp", addr, 5*time.Second)
			if err != nil {
				t.Fatalf("attempt %d: %v", i, err)
			}
			held = append(held, c)
			if i%2500 == 0 {
				if err := ask(t, addr, "127.0.0.2"); err != nil {
					t.Fatalf("another address during the flood: %v", err)
				}
			}
		}
		if err := ask(t, addr, "127.0.0.2"); err != nil {
			t.Fatalf("another address after the flood: %v", err)
		}
		srv.mu.Lock()
		open := srv.perHost["127.0.0.1"]
		srv.mu.Unlock()
		if open > 100 {
			t.Fatalf("%d connections from the flooding address kept open, the cap is 100", open)
		}
	})
}

// TestPlainHTTPToTLS: on a TLS listener, a request in plain HTTP is
// answered 400 and told why, as net/http answers it; other bytes that are
// not TLS get the connection closed; TLS clients are served meanwhile.
func TestPlainHTTPToTLS(t *testing.T) {
	scfg, ccfg := tlstest.Configs(t)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	s := &Server{Handler: testMux()}
	go s.Serve(tls.NewListener(ln, scfg))
	t.Cleanup(func() { s.Shutdown(context.Background()) })
	addr := ln.Addr().String()
	for _, tc := range []struct{ in, want string }{
		{"GET /q?path=a HTTP/1.1\r\nHost: x\r\n\r\n", "HTTP/1.0 400 Bad Request\r\nContent-Type: text/plain; charset=utf-8\r\n\r\nClient sent an HTTP request to an HTTPS server.\n"},
		{"POST /echo HTTP/1.1\r\nHost: x\r\nContent-Length: 2\r\n\r\nhi", "HTTP/1.0 400 Bad Request"},
		{"NONSENSE\r\n\r\n", ""},
	} {
		if out := raw(t, addr, tc.in); !strings.HasPrefix(out, tc.want) || tc.want == "" && out != "" {
			t.Errorf("%q: answered %q, want %q", tc.in, out, tc.want)
		}
	}
	hc := &http.Client{Transport: &http.Transport{TLSClientConfig: ccfg}}
	resp, err := hc.Get("https://" + addr + "/q?path=tls")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 || !strings.Contains(string(body), `"path":"tls"`) {
		t.Fatalf("over TLS: %s %s", resp.Status, body)
	}
}
