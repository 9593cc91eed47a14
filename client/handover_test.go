package client_test

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/strata-storage/strata/client"
	"github.com/strata-storage/strata/internal/server"
	"github.com/strata-storage/strata/internal/testutil"
)

func fileOf(t *testing.T, data []byte) *os.File {
	t.Helper()
	p := filepath.Join(t.TempDir(), "src")
	if err := os.WriteFile(p, data, 0o644); err != nil {
		t.Fatal(err)
	}
	f, err := os.Open(p)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.Close() })
	return f
}

// getBack reads path and checks it holds data and its recorded fixity.
func getBack(t *testing.T, c *client.Client, path string, data []byte) {
	t.Helper()
	var out bytes.Buffer
	if _, err := c.Get(ctx, path, &out, client.GetOptions{VerifyFixity: true}); err != nil || !bytes.Equal(out.Bytes(), data) {
		t.Fatalf("get %d bytes back: %d bytes, %v", len(data), out.Len(), err)
	}
}

// A put from a file on the mover's host passes the file to the mover for
// every stripe of 1 MiB or more and streams the rest; either way the bytes,
// CRCs and fixity are those of the file. With handover off, all streams.
func TestPutFromFile(t *testing.T) {
	t.Parallel()
	eachHandover(t, func(t *testing.T, s *server.Server, c *client.Client, handover bool) {
		var want int64
		for i, tc := range []struct {
			size, stripes int
			handed        int64 // stripes the mover reads from the file
		}{
			{9<<20 + 12345, 4, 4},
			{3<<20 + 7, 1, 1},
			{1 << 20, 1, 1},
			{1<<20 - 1, 1, 0},
			{2<<20 + 5, 4, 0}, // stripes of ~512 KiB stream
			{100, 0, 0},
			{0, 0, 0},
		} {
			data := randBytes(uint64(40+i), tc.size)
			path := fmt.Sprintf("/ff%d", i)
			var progress atomic.Int64
			fi, err := c.Put(ctx, path, fileOf(t, data), int64(len(data)), client.PutOptions{Stripes: tc.stripes, Progress: func(n int64) { progress.Add(n) }})
			if err != nil {
				t.Fatalf("put %d bytes: %v", tc.size, err)
			}
			if fi.Size != int64(tc.size) || progress.Load() != int64(tc.size) {
				t.Fatalf("put %d bytes: size %d, progress %d", tc.size, fi.Size, progress.Load())
			}
			getBack(t, c, path, data)
			if handover {
				want += tc.handed
			}
			if got := s.Mover.Stats().FilesRead; got != want {
				t.Fatalf("after a put of %d bytes in %d stripes: the mover read %d files, want %d", tc.size, tc.stripes, got, want)
			}
		}
	})
}

// An upload (bytes from memory) to movers on its host shares each stripe
// stream's buffer with the mover for every stripe of 1 MiB or more and
// streams the rest; either way the bytes, CRCs and fixity are those
// written. With handover off, all streams.
func TestUploadThroughRing(t *testing.T) {
	t.Parallel()
	eachHandover(t, func(t *testing.T, s *server.Server, c *client.Client, handover bool) {
		var want int64
		for i, tc := range []struct {
			size, stripes, piece int
			unit                 int64
			ringed               int64 // stripes written from a ring
		}{
			{33<<20 + 12345, 4, 1 << 20, 1 << 20, 4},
			{20<<20 + 7, 2, 128<<10 + 3, 8 << 20, 2},
			{3<<20 + 7, 1, 4 << 20, 0, 1},
			{1<<20 - 1, 1, 4096, 0, 0},
			{2<<20 + 5, 4, 1 << 20, 64 << 10, 0}, // stripes of ~512 KiB stream
		} {
			data := randBytes(uint64(60+i), tc.size)
			path := fmt.Sprintf("/ur%d", i)
			var progress atomic.Int64
			u, err := c.Create(ctx, path, int64(tc.size), client.PutOptions{Stripes: tc.stripes, StripeUnit: tc.unit, Progress: func(n int64) { progress.Add(n) }})
			if err != nil {
				t.Fatal(err)
			}
			for off := 0; off < len(data); off += tc.piece {
				if _, err := u.Write(data[off:min(off+tc.piece, len(data))]); err != nil {
					t.Fatal(err)
				}
			}
			fi, err := u.Commit(ctx)
			if err != nil {
				t.Fatalf("upload %d bytes: %v", tc.size, err)
			}
			if fi.Size != int64(tc.size) || progress.Load() != int64(tc.size) || fi.Fixity == "" {
				t.Fatalf("upload %d bytes: size %d, progress %d, fixity %q", tc.size, fi.Size, progress.Load(), fi.Fixity)
			}
			getBack(t, c, path, data)
			if handover {
				want += tc.ringed
			}
			if got := s.Mover.Stats().RingWrites; got != want {
				t.Fatalf("after an upload of %d bytes in %d stripes: %d ring writes, want %d", tc.size, tc.stripes, got, want)
			}
		}
	})
}

// A stripe's ring holds two units, in whole frames, but no more than the
// stripe or 8 MiB.
func TestRingSize(t *testing.T) {
	const mi = 1 << 20
	for _, tc := range []struct {
		n, unit int64
		want    int
	}{
		{64 * mi, 4 * mi, 8 * mi},   // the default class: two 4 MiB units
		{64 * mi, 1 * mi, 2 * mi},   // two units
		{64 * mi, 64 << 10, 2 * mi}, // small units: two frames
		{64 * mi, 16 * mi, 8 * mi},  // capped
		{3*mi + 5, 4 * mi, 4 * mi},  // the stripe, in whole frames
		{mi, 4 * mi, mi},
		{100, 4 * mi, mi}, // at least a frame
	} {
		if got := client.RingSize(tc.n, tc.unit); got != tc.want {
			t.Errorf("ringSize(%d, %d) = %d, want %d", tc.n, tc.unit, got, tc.want)
		}
	}
}

// A damaged trailer is found whether the mover hands the object's file
// over (it does not read the file; the client checks the trailer) or
// streams it: the get fails as corrupt, either way.
func TestDamagedTrailerHandedOver(t *testing.T) {
	t.Parallel()
	eachHandover(t, func(t *testing.T, s *server.Server, c *client.Client, handover bool) {
		data := randBytes(61, 70000)
		if _, err := c.Put(ctx, "/t", bytes.NewReader(data), int64(len(data)), client.PutOptions{}); err != nil {
			t.Fatal(err)
		}
		object := residency(t, c, "/t").Layout.Segments[0].Object
		for _, p := range objects(t, s.Cfg.DataDir) {
			if strings.HasSuffix(p, object) {
				fi, err := os.Stat(p)
				if err != nil {
					t.Fatal(err)
				}
				flip(t, p, fi.Size()-1) // the trailer's own CRC
			}
		}
		handed := s.Mover.Stats().FilesHanded
		if _, err := getBytes(c, "/t"); !errors.Is(err, client.ErrCorrupt) {
			t.Fatalf("get of an object with a damaged trailer: %v, want corrupt", err)
		}
		if got := s.Mover.Stats().FilesHanded > handed; got != handover {
			t.Fatalf("handover %v, but the mover handed the file over: %v", handover, got)
		}
	})
}

// eachHandover runs body on a server of its own, with handover on and off.
func eachHandover(t *testing.T, body func(t *testing.T, s *server.Server, c *client.Client, handover bool)) {
	for _, handover := range []bool{true, false} {
		t.Run(fmt.Sprintf("handover=%v", handover), func(t *testing.T) {
			s := testutil.Start(t, nil)
			c := testutil.Client(t, s)
			c.Handover(handover)
			body(t, s, c, handover)
		})
	}
}
