package client

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// fakeCore answers requests on 127.0.0.1 as a core would, except that
// the request numbered die (counting from 1, over all connections) is
// read whole and then the connection is dropped without a reply: a core
// killed between reading a create and answering it.
type fakeCore struct {
	ln    net.Listener
	seen  atomic.Int32 // requests read whole, by method and path
	log   chan string
	die   int32
	mu    sync.Mutex
	conns []net.Conn
}

// closeAll closes the core's end of every connection, as a restart does.
func (f *fakeCore) closeAll() {
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, c := range f.conns {
		c.Close()
	}
}

func newFakeCore(t *testing.T, die int32) *fakeCore {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	f := &fakeCore{ln: ln, log: make(chan string, 100), die: die}
	t.Cleanup(func() { ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			f.mu.Lock()
			f.conns = append(f.conns, c)
			f.mu.Unlock()
			go f.serve(c)
		}
	}()
	return f
}

func (f *fakeCore) serve(c net.Conn) {
	defer c.Close()
	br := bufio.NewReader(c)
	for {
		req, err := http.ReadRequest(br)
		if err != nil {
			return
		}
		io.Copy(io.Discard, req.Body)
		n := f.seen.Add(1)
		f.log <- req.Method + " " + req.URL.Path
		if n == f.die {
			return // read whole, never answered
		}
		body := `{}`
		if req.URL.Path == "/v1/local" {
			body = `{"socket":"","host":""}`
		}
		fmt.Fprintf(c, "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n%s", len(body), body)
	}
}

func (f *fakeCore) requests() []string {
	var out []string
	for {
		select {
		case s := <-f.log:
			out = append(out, s)
		default:
			return out
		}
	}
}

// A request that reached the core whole on a reused connection, which then
// broke before the reply, is sent again only if it is idempotent: a create
// must not run twice.
func TestTransportReplaysOnlyWhatCannotRunTwice(t *testing.T) {
	for _, tc := range []struct {
		method string
		want   []string // requests the core saw after the first
		ok     bool
	}{
		{"POST", []string{"POST /v1/create"}, false},
		{"GET", []string{"GET /v1/create", "GET /v1/create"}, true},
	} {
		t.Run(tc.method, func(t *testing.T) {
			// Request 1 is the socket probe, 2 the first call (answered on
			// the connection that goes back to the pool), 3 dies.
			f := newFakeCore(t, 3)
			tr := newTransport(f.ln.Addr().String())
			defer tr.CloseIdleConnections()
			do := func() error {
				resp, body, err := tr.roundTrip(context.Background(), &request{method: tc.method, uri: "/v1/create", body: []byte(`{"path":"/f"}`), hasBody: true})
				if err != nil {
					return err
				}
				io.Copy(io.Discard, resp.body)
				return body.Close()
			}
			if err := do(); err != nil {
				t.Fatal(err)
			}
			f.requests()
			err := do()
			if (err == nil) != tc.ok {
				t.Fatalf("second %s: err %v, want ok=%v", tc.method, err, tc.ok)
			}
			if got := f.requests(); strings.Join(got, ",") != strings.Join(tc.want, ",") {
				t.Fatalf("the core saw %v, want %v", got, tc.want)
			}
		})
	}
}

// A pooled connection the core closed while it sat idle is noticed before
// a create is written to it: the create goes out once, on a new connection.
func TestTransportChecksIdleConnectionBeforeCreate(t *testing.T) {
	defer func(d time.Duration) { checkIdleAfter = d }(checkIdleAfter)
	checkIdleAfter = 0
	f := newFakeCore(t, 0)
	tr := newTransport(f.ln.Addr().String())
	defer tr.CloseIdleConnections()
	post := func() error {
		resp, body, err := tr.roundTrip(context.Background(), &request{method: "POST", uri: "/v1/create", body: []byte(`{}`), hasBody: true})
		if err != nil {
			return err
		}
		io.Copy(io.Discard, resp.body)
		return body.Close()
	}
	if err := post(); err != nil {
		t.Fatal(err)
	}
	f.closeAll()                      // as a restart would
	time.Sleep(50 * time.Millisecond) // the FIN reaches the client's end
	f.requests()
	if err := post(); err != nil {
		t.Fatalf("create after the core closed the idle connection: %v", err)
	}
	if got := f.requests(); len(got) != 1 {
		t.Fatalf("the core saw %v, want one create", got)
	}
}

// A request whose context ends just as its answer is read leaves its
// connection with a deadline in the past, set by a goroutine that may run
// after the body is closed: that connection is closed, never pooled, so
// the next request (another context, still live) does not fail with a
// timeout out of nowhere — which a FUSE mount, whose opens are cancelled
// by every signal their callers get, turned into EIO.
func TestTransportPoolsNoConnectionACancelBroke(t *testing.T) {
	f := newFakeCore(t, 0)
	tr := newTransport(f.ln.Addr().String())
	defer tr.CloseIdleConnections()
	get := func(ctx context.Context) (*response, io.Closer, error) {
		return tr.roundTrip(ctx, &request{method: http.MethodGet, uri: "/v1/stat"})
	}
	for i := range 300 {
		ctx, cancel := context.WithCancel(context.Background())
		resp, body, err := get(ctx)
		if err != nil {
			t.Fatal(err)
		}
		io.Copy(io.Discard, resp.body)
		cancel()
		body.Close()
		resp, body, err = get(context.Background())
		if err != nil {
			t.Fatalf("request %d, on a live context after a cancelled one: %v", i, err)
		}
		io.Copy(io.Discard, resp.body)
		body.Close()
		f.requests() // the core's log holds a hundred
	}
}
