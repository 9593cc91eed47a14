package client_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/strata-storage/strata/client"
	"github.com/strata-storage/strata/internal/config"
)

// A flipped byte is caught whether the mover streams the object or hands
// its file over to the client on its host; with no other copy to read
// from, the file is reported lost.
func TestCorruptionIsDetected(t *testing.T) {
	t.Parallel()
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
	// Its only copy: the file is lost, and the error says so.
	for _, want := range []string{"/victim is lost", seg.Device, seg.Object} {
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
	t.Parallel()
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

// sources are the two ways a put on the mover's host takes its data: from
// a reader, streamed through the socket, and from a file, which the mover
// reads itself.
var sources = []struct {
	name string
	of   func(t *testing.T, data []byte) io.ReaderAt
}{
	{"stream", func(t *testing.T, data []byte) io.ReaderAt { return bytes.NewReader(data) }},
	{"file", func(t *testing.T, data []byte) io.ReaderAt { return fileOf(t, data) }},
}

func TestSourceShorterThanSaid(t *testing.T) {
	t.Parallel()
	for _, src := range sources {
		t.Run(src.name, func(t *testing.T) {
			c, dataDir := newClient(t, func(c *config.Config) { c.ReclaimEvery = "50ms" })
			data := randBytes(5, 3<<20)
			_, err := c.Put(ctx, "/short", src.of(t, data[:2<<20]), int64(len(data)), client.PutOptions{Stripes: 1})
			if err == nil {
				t.Fatal("put of a truncated source succeeded")
			}
			if _, err := c.Stat(ctx, "/short"); !errors.Is(err, client.ErrNotFound) {
				t.Fatalf("partial file visible: %v", err)
			}
			waitFor(t, func() bool { return dfUsed(t, c) == 0 && len(objects(t, dataDir)) == 0 }, "space reclaimed")
		})
	}
}

// changingSource serves data, except that the byte at reads differently
// from its second reading on: a file written to while it is put. A put
// recording SHA-256 reads every byte twice (by its stripe and by the
// fixity hash, in either order), so the two readings disagree whatever
// the timing.
type changingSource struct {
	data []byte
	at   int64
	mu   sync.Mutex
	seen bool
}

func (s *changingSource) ReadAt(p []byte, off int64) (int, error) {
	if off >= int64(len(s.data)) {
		return 0, io.EOF
	}
	n := copy(p, s.data[off:])
	if s.at >= off && s.at < off+int64(n) {
		s.mu.Lock()
		if s.seen {
			p[s.at-off] ^= 0xff
		}
		s.seen = true
		s.mu.Unlock()
	}
	if n < len(p) {
		return n, io.EOF
	}
	return n, nil
}

// A source that changes between two readings fails the put: the fixity
// hash would not describe the stored bytes. A streamed BLAKE3 put and a
// put without fixity read once, and store what they read, with a BLAKE3
// fixity that describes exactly that.
func TestSourceChangingDuringPut(t *testing.T) {
	t.Parallel()
	c, dataDir := newClient(t, func(c *config.Config) { c.ReclaimEvery = "50ms" })
	data := randBytes(12, 3<<20+5)
	for _, at := range []int64{0, 1<<20 + 17, int64(len(data)) - 1} { // stripes 0, 1, 0 of 2
		_, err := c.Put(ctx, "/changing", &changingSource{data: data, at: at}, int64(len(data)), client.PutOptions{Stripes: 2, StripeUnit: 1 << 20, Fixity: client.FixitySHA256})
		if !errors.Is(err, client.ErrSourceChanged) {
			t.Fatalf("byte %d changed: want ErrSourceChanged, got %v", at, err)
		}
		if _, err := c.Stat(ctx, "/changing"); !errors.Is(err, client.ErrNotFound) {
			t.Fatalf("file visible after a failed put: %v", err)
		}
	}
	waitFor(t, func() bool { return dfUsed(t, c) == 0 && len(objects(t, dataDir)) == 0 }, "space reclaimed")
	if _, err := c.Put(ctx, "/once", &changingSource{data: data, at: 5}, int64(len(data)), client.PutOptions{Stripes: 2, StripeUnit: 1 << 20, NoFixity: true}); err != nil {
		t.Fatalf("put without fixity: %v", err)
	}
	for i, at := range []int64{0, 1<<20 + 17, int64(len(data)) - 1} {
		path := fmt.Sprintf("/tree%d", i)
		src := &changingSource{data: data, at: at}
		if _, err := c.Put(ctx, path, src, int64(len(data)), client.PutOptions{Stripes: 2, StripeUnit: 1 << 20}); err != nil {
			t.Fatalf("streamed BLAKE3 put, byte %d changing: %v", at, err)
		}
		if !src.seen {
			t.Fatalf("byte %d never read", at)
		}
		var out bytes.Buffer
		if _, err := c.Get(ctx, path, &out, client.GetOptions{VerifyFixity: true}); err != nil {
			t.Fatalf("get %s with its fixity: %v", path, err)
		}
		if !bytes.Equal(out.Bytes(), data) {
			t.Fatalf("%s: stored bytes differ from the one reading", path)
		}
	}
}

// A cancelled put leaves nothing, whether the client streams or the mover
// reads the client's file (it notices the client has gone).
func TestCancelledPutLeavesNothing(t *testing.T) {
	t.Parallel()
	for _, src := range sources {
		t.Run(src.name, func(t *testing.T) {
			c, dataDir := newClient(t, func(c *config.Config) {
				c.ReclaimEvery = "50ms"
				for i := range c.Devices {
					c.Devices[i].Bandwidth = 8 << 20 // the put takes ~8 s
				}
			})
			data := randBytes(9, 64<<20)
			cctx, cancel := context.WithCancel(ctx)
			time.AfterFunc(300*time.Millisecond, cancel)
			done := make(chan error, 1)
			go func() {
				_, err := c.Put(cctx, "/cancelled", src.of(t, data), int64(len(data)), client.PutOptions{Stripes: 1})
				done <- err
			}()
			if err := <-done; !errors.Is(err, context.Canceled) {
				t.Fatalf("want cancelled, got %v", err)
			}
			if _, err := c.Stat(ctx, "/cancelled"); !errors.Is(err, client.ErrNotFound) {
				t.Fatalf("cancelled file visible: %v", err)
			}
			waitFor(t, func() bool { return dfUsed(t, c) == 0 && len(objects(t, dataDir)) == 0 }, "space reclaimed")
		})
	}
}

// TestReclaimGrace: a file removed while a reader holds its layout stays
// readable for the reclaim grace, and its space comes back after it.
func TestReclaimGrace(t *testing.T) {
	t.Parallel()
	c, dataDir := newClient(t, func(c *config.Config) { c.ReclaimEvery = "50ms"; c.ReclaimGrace = "2s" })
	data := randBytes(21, 3<<20)
	roundTrip(t, c, "/f", data, client.PutOptions{Stripes: 2, StripeUnit: 1 << 20})
	r, err := c.Open(ctx, "/f", client.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Remove(ctx, "/f", false); err != nil {
		t.Fatal(err)
	}
	time.Sleep(200 * time.Millisecond) // passes of the reclaimer
	got, err := io.ReadAll(r)
	if err != nil || !bytes.Equal(got, data) {
		t.Fatalf("read of the removed file: %d bytes, %v", len(got), err)
	}
	waitFor(t, func() bool { return dfUsed(t, c) == 0 && len(objects(t, dataDir)) == 0 }, "space reclaimed after the grace")
}
