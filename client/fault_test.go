package client_test

import (
	"bytes"
	"io"
	"net"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/strata-storage/strata/client"
	"github.com/strata-storage/strata/internal/config"
	"github.com/strata-storage/strata/internal/testutil"
)

// cutter is a TCP proxy in front of the mover that breaks the first cuts
// connections after limit bytes in either direction, as a flaky network or
// a restarting mover would.
type cutter struct {
	ln     net.Listener
	target atomic.Pointer[string] // set once the server is up: the core may dial the proxy before
	limit  int64
	cuts   atomic.Int32
	cut    atomic.Int32
	wg     sync.WaitGroup
}

func newCutter(t *testing.T, limit int64, cuts int32) *cutter {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	c := &cutter{ln: ln, limit: limit}
	c.cuts.Store(cuts)
	go func() {
		for {
			in, err := ln.Accept()
			if err != nil {
				return
			}
			c.wg.Add(1)
			go func() { defer c.wg.Done(); c.serve(in) }()
		}
	}()
	t.Cleanup(func() { ln.Close() })
	return c
}

func (c *cutter) serve(in net.Conn) {
	defer in.Close()
	target := c.target.Load()
	if target == nil {
		return
	}
	out, err := net.Dial("tcp", *target)
	if err != nil {
		return
	}
	defer out.Close()
	limit := int64(-1)
	if c.cuts.Add(-1) >= 0 {
		limit = c.limit
		c.cut.Add(1)
	}
	done := make(chan struct{}, 2)
	pipe := func(dst, src net.Conn) {
		if limit >= 0 {
			io.CopyN(dst, src, limit)
		} else {
			io.Copy(dst, src)
		}
		done <- struct{}{}
	}
	go pipe(out, in)
	go pipe(in, out)
	<-done // either direction ending (or hitting its cut) ends both
}

func TestStripeRetriesSurviveCutConnections(t *testing.T) {
	t.Parallel()
	cut := newCutter(t, 300<<10, 3)
	s := testutil.Start(t, func(cfg *config.Config) {
		// Clients reach the mover only through the proxy.
		cfg.Mover.Advertise = cut.ln.Addr().String()
	})
	addr := s.DataAddr()
	cut.target.Store(&addr)
	c := testutil.Client(t, s)
	c.TCPOnly(true) // the proxy is on the TCP path
	data := randBytes(21, 3<<20+4321)
	fi, err := c.Put(ctx, "/flaky", bytes.NewReader(data), int64(len(data)), client.PutOptions{})
	if err != nil {
		t.Fatalf("put through a cutting proxy: %v", err)
	}
	if cut.cut.Load() == 0 {
		t.Fatal("the proxy never cut a connection")
	}
	cut.cuts.Store(3) // reads get cut too, and resume from the last byte delivered
	before := cut.cut.Load()
	// A client of its own: the put's client may hold an uncut connection
	// in its pool, and a read on it would never dial the proxy again.
	rc := testutil.Client(t, s)
	rc.TCPOnly(true)
	var out bytes.Buffer
	if _, err := rc.Get(ctx, "/flaky", &out, client.GetOptions{VerifyFixity: true}); err != nil {
		t.Fatalf("get through a cutting proxy: %v", err)
	}
	if !bytes.Equal(out.Bytes(), data) || fi.Size != int64(len(data)) {
		t.Fatal("data differs after retries")
	}
	if cut.cut.Load() == before {
		t.Fatal("no read was cut")
	}
}

// A client on the mover's host reaches it through its Unix socket: with the
// advertised TCP address dead, transfers still work, and a client told to
// use TCP only fails.
func TestLocalClientsUseTheMoverSocket(t *testing.T) {
	t.Parallel()
	dead, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	deadAddr := dead.Addr().String()
	dead.Close()
	s := testutil.Start(t, func(cfg *config.Config) { cfg.Mover.Advertise = deadAddr })
	c, err := client.New(s.URL())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	data := randBytes(22, 2<<20+17)
	roundTrip(t, c, "/local", data, client.PutOptions{})

	c.TCPOnly(true)
	c.Retries = 0
	if _, err := c.Get(ctx, "/local", io.Discard, client.GetOptions{}); err == nil {
		t.Fatal("a TCP-only client reached a mover whose TCP address is dead")
	}
}
