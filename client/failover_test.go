package client_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/strata-storage/strata/client"
	"github.com/strata-storage/strata/internal/server"
	"github.com/strata-storage/strata/internal/testutil"
)

// A client given several core addresses uses the one that serves: an
// address where nothing listens is passed over (and the one that answered
// kept), and when none answers the error says so after FailoverWait.
func TestFailoverAddresses(t *testing.T) {
	t.Parallel()
	s := testutil.Start(t, nil)
	c, err := client.New("127.0.0.1:1, " + s.URL())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	c.SetToken(testutil.Token(t, s, "root", 0))
	if _, err := c.Mkdir(ctx, "/d", false, 0); err != nil {
		t.Fatal(err)
	}
	if got := c.Server(); got != s.URL() {
		t.Fatalf("talking to %s, want %s", got, s.URL())
	}
	data := []byte(strings.Repeat("standby ", 1000))
	roundTrip(t, c, "/d/f", data, client.PutOptions{})

	dead, err := client.New("127.0.0.1:1,127.0.0.1:2")
	if err != nil {
		t.Fatal(err)
	}
	defer dead.Close()
	dead.FailoverWait = 300 * time.Millisecond
	start := time.Now()
	if _, err := dead.Stat(ctx, "/"); !errors.Is(err, client.ErrUnreachable) {
		t.Fatalf("no core serving: %v, want unreachable", err)
	}
	if took := time.Since(start); took < dead.FailoverWait {
		t.Fatalf("gave up after %v, before FailoverWait %v", took, dead.FailoverWait)
	}
	if _, err := client.New("127.0.0.1:1,http://"); err == nil {
		t.Fatal("a list with a bad address accepted")
	}
}

// A core that restarts (a standby that took over is the same to movers)
// starts a new epoch, and movers then refuse the tokens of the old one: a
// Reader opened before goes on reading with a layout it asks the new core
// for, and a put's commit that reaches the new core is refused as
// ErrRestarted, so that the put begins again.
func TestRestartedCoreReopens(t *testing.T) {
	t.Parallel()
	s := testutil.Start(t, nil)
	cfg := s.Cfg
	c, err := client.New("unix:" + cfg.Socket)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if got := c.Server(); got != "unix:"+cfg.Socket {
		t.Fatalf("Server() = %q, want unix:%s", got, cfg.Socket)
	}
	data := randBytes(7, 3<<20+5)
	roundTrip(t, c, "/f", data, client.PutOptions{})
	r, err := c.Open(ctx, "/f", client.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	up, err := c.Create(ctx, "/g", 1<<20, client.PutOptions{})
	if err != nil {
		t.Fatal(err)
	}

	// The same core again, its mover on the same addresses.
	cfg.Listen, cfg.Mover.Listen = strings.TrimPrefix(s.URL(), "http://"), s.DataAddr()
	s.Close()
	s, err = server.Start(context.Background(), cfg, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()

	got, err := io.ReadAll(io.NewSectionReader(r, 0, r.Size()))
	if err != nil {
		t.Fatalf("read across the restart: %v", err)
	}
	if !bytes.Equal(got, data) {
		t.Fatalf("read across the restart: %d bytes, want %d, or they differ", len(got), len(data))
	}
	_, err = up.Write(make([]byte, 1<<20))
	if err == nil {
		_, err = up.Commit(ctx)
	}
	if !errors.Is(err, client.ErrRestarted) {
		t.Fatalf("a write begun before the restart: %v, want ErrRestarted", err)
	}
	if _, err := c.Stat(ctx, "/g"); !errors.Is(err, client.ErrNotFound) {
		t.Fatalf("the write begun before the restart is visible: %v", err)
	}
}

// A core that goes away with a put's request leaves the put to find out
// what happened: a create whose reply was lost (the core made a pending
// write no one sees) begins again; a commit whose reply was lost is found
// done (the file is there with the put's size and fixity); a commit that
// never reached the core begins the put again. Each put ends with the
// file whole and no error. A proxy in front of a real core drops the
// replies (or the requests) it is told to.
func TestPutAcrossALostReply(t *testing.T) {
	t.Parallel()
	s := testutil.Start(t, nil)
	target, err := url.Parse(s.URL())
	if err != nil {
		t.Fatal(err)
	}
	rp := httputil.NewSingleHostReverseProxy(target)
	var mu sync.Mutex
	drops := map[string]string{} // route prefix -> "reply" (run, then drop) or "request" (drop unrun)
	proxy := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		var how string
		for prefix, h := range drops {
			if strings.HasPrefix(r.URL.Path, prefix) {
				how = h
				delete(drops, prefix)
			}
		}
		mu.Unlock()
		if how == "reply" {
			rp.ServeHTTP(httptest.NewRecorder(), r) // the core runs it ...
		}
		if how != "" {
			conn, _, err := w.(http.Hijacker).Hijack() // ... and no answer comes back
			if err == nil {
				conn.Close()
			}
			return
		}
		rp.ServeHTTP(w, r)
	}))
	defer proxy.Close()
	c, err := client.New(proxy.URL)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	c.TCPOnly(true) // through the proxy, not the core's socket
	c.SetToken(testutil.Token(t, s, "root", 0))
	for i, drop := range []struct{ route, how string }{
		{"/v1/create", "reply"},
		{"/v1/commit", "reply"},
		{"/v1/commit", "request"},
	} {
		mu.Lock()
		drops[drop.route] = drop.how
		mu.Unlock()
		data := randBytes(uint64(20+i), 3<<20+i)
		p := fmt.Sprintf("/lost-%d", i)
		if _, err := c.Put(ctx, p, bytes.NewReader(data), int64(len(data)), client.PutOptions{}); err != nil {
			t.Fatalf("put with the %s of %s lost: %v", drop.how, drop.route, err)
		}
		mu.Lock()
		left := len(drops)
		mu.Unlock()
		if left != 0 {
			t.Fatalf("the put never sent %s", drop.route)
		}
		var got bytes.Buffer
		if _, err := c.Get(ctx, p, &got, client.GetOptions{VerifyFixity: true}); err != nil || !bytes.Equal(got.Bytes(), data) {
			t.Fatalf("%s after the %s of %s was lost: %d bytes, %v", p, drop.how, drop.route, got.Len(), err)
		}
	}
}
