package client_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/strata-storage/strata/client"
	"github.com/strata-storage/strata/internal/config"
)

// A flipped byte is caught whether the mover streams the object or hands
// its file over to the client on its host.
func TestCorruptionIsDetected(t *testing.T) {
	for _, handover := range []bool{true, false} {
		t.Run(fmt.Sprintf("handover=%v", handover), func(t *testing.T) { testCorruptionIsDetected(t, handover) })
	}
}

func testCorruptionIsDetected(t *testing.T, handover bool) {
	c, dataDir := newClient(t, nil)
	c.Handover(handover)
	data := randBytes(11, 5*64<<10+99) // 4 stripes
	roundTrip(t, c, "/victim", data, client.PutOptions{})
	st, err := c.Stat(ctx, "/victim")
	if err != nil {
		t.Fatal(err)
	}
	seg := st.Layout.Segments[2]
	var path string
	for _, p := range objects(t, dataDir) {
		if strings.HasSuffix(p, seg.Object) {
			path = p
		}
	}
	if path == "" {
		t.Fatalf("object %s not found", seg.Object)
	}
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	b := make([]byte, 1)
	f.ReadAt(b, 100)
	b[0] ^= 0x40
	f.WriteAt(b, 100)
	f.Close()

	var out bytes.Buffer
	_, err = c.Get(ctx, "/victim", &out, client.GetOptions{})
	if !errors.Is(err, client.ErrCorrupt) {
		t.Fatalf("want corruption error, got %v", err)
	}
	for _, want := range []string{"/victim", "segment 2", seg.Device, seg.Object} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not name %q", err, want)
		}
	}
	// Nothing past the damaged unit was handed to the writer: the output
	// holds at most the units before stripe 2's first unit.
	if out.Len() > 2*64<<10 {
		t.Fatalf("%d bytes written before the corruption was caught", out.Len())
	}
	// Other files are unaffected and the server still serves.
	roundTrip(t, c, "/fine", []byte("still fine"), client.PutOptions{})
}

func dfUsed(t *testing.T, c *client.Client) int64 {
	df, err := c.DF(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var u int64
	for _, d := range df.Devices {
		u += d.Used
	}
	return u
}

func TestFullDevice(t *testing.T) {
	const capacity = 1 << 20
	c, dataDir := newClient(t, func(c *config.Config) {
		c.Devices = []config.Device{{ID: "small", Capacity: capacity}}
		c.ReclaimEvery = "50ms"
	})
	// The core refuses a file no device can hold, before any data moves.
	big := randBytes(1, 2*capacity)
	_, err := c.Put(ctx, "/big", bytes.NewReader(big), int64(len(big)), client.PutOptions{})
	if !errors.Is(err, client.ErrNoSpace) {
		t.Fatalf("want no space, got %v", err)
	}
	// Exactly the capacity passes the core's accounting but not the
	// mover's (objects carry a checksum trailer): the mover refuses the
	// stream itself, and the put fails cleanly.
	exact := randBytes(2, capacity)
	_, err = c.Put(ctx, "/exact", bytes.NewReader(exact), int64(len(exact)), client.PutOptions{})
	if !errors.Is(err, client.ErrNoSpace) {
		t.Fatalf("want no space from the mover, got %v", err)
	}
	for _, p := range []string{"/big", "/exact"} {
		if _, err := c.Stat(ctx, p); !errors.Is(err, client.ErrNotFound) {
			t.Fatalf("%s visible after failed put: %v", p, err)
		}
	}
	waitFor(t, func() bool { return dfUsed(t, c) == 0 && len(objects(t, dataDir)) == 0 }, "space reclaimed")
	// The device still works for what fits.
	roundTrip(t, c, "/ok", randBytes(3, capacity/2), client.PutOptions{})
}

func TestSourceShorterThanSaid(t *testing.T) {
	c, dataDir := newClient(t, func(c *config.Config) { c.ReclaimEvery = "50ms" })
	data := randBytes(5, 300<<10)
	_, err := c.Put(ctx, "/short", bytes.NewReader(data[:200<<10]), int64(len(data)), client.PutOptions{})
	if err == nil {
		t.Fatal("put of a truncated source succeeded")
	}
	if _, err := c.Stat(ctx, "/short"); !errors.Is(err, client.ErrNotFound) {
		t.Fatalf("partial file visible: %v", err)
	}
	waitFor(t, func() bool { return dfUsed(t, c) == 0 && len(objects(t, dataDir)) == 0 }, "space reclaimed")
}

func TestCancelledPutLeavesNothing(t *testing.T) {
	c, dataDir := newClient(t, func(c *config.Config) {
		c.ReclaimEvery = "50ms"
		for i := range c.Devices {
			c.Devices[i].Bandwidth = 4 << 20 // slow enough to cancel midway
		}
	})
	data := randBytes(9, 8<<20)
	cctx, cancel := context.WithCancel(ctx)
	done := make(chan error, 1)
	var sent atomic.Int64
	go func() {
		_, err := c.Put(cctx, "/cancelled", bytes.NewReader(data), int64(len(data)), client.PutOptions{Progress: func(n int64) {
			if sent.Add(n) > 1<<20 {
				cancel()
			}
		}})
		done <- err
	}()
	if err := <-done; !errors.Is(err, context.Canceled) {
		t.Fatalf("want cancelled, got %v", err)
	}
	if _, err := c.Stat(ctx, "/cancelled"); !errors.Is(err, client.ErrNotFound) {
		t.Fatalf("cancelled file visible: %v", err)
	}
	waitFor(t, func() bool { return dfUsed(t, c) == 0 && len(objects(t, dataDir)) == 0 }, "space reclaimed")
}
