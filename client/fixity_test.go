package client

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"sync"
	"testing"

	"lukechampine.com/blake3"

	"github.com/strata-storage/strata/internal/api"
	"github.com/strata-storage/strata/internal/moverconn"
	"github.com/strata-storage/strata/internal/wire"
)

// The recorded forms are the standard digests (known-answer vectors), a
// get recomputes with the algorithm the record names, and a mismatch or an
// unknown algorithm is an error, never a pass.
func TestFixity(t *testing.T) {
	abc := map[string]string{
		"":       "blake3:6437b3ac38465133ffb63b75273a8db548c558465d79db03fd359c6cd5bd9d85",
		"blake3": "blake3:6437b3ac38465133ffb63b75273a8db548c558465d79db03fd359c6cd5bd9d85",
		"sha256": "sha256:ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad",
	}
	for alg, want := range abc {
		h, name, err := newHash(alg)
		if err != nil {
			t.Fatal(err)
		}
		h.Write([]byte("abc"))
		if got := fixityString(name, h); got != want {
			t.Errorf("%q: %s, want %s", alg, got, want)
		}
		fi := &FileInfo{Fixity: want}
		h, name, err = recordedHash(want)
		if err != nil {
			t.Fatal(err)
		}
		h.Write([]byte("abc"))
		if err := checkFixity("/f", fi, name, h); err != nil {
			t.Errorf("%s: %v", want, err)
		}
		h.Reset()
		h.Write([]byte("abd"))
		if err := checkFixity("/f", fi, name, h); !errors.Is(err, api.ErrCorrupt) {
			t.Errorf("%s of other data: %v, want ErrCorrupt", want, err)
		}
	}
	for _, bad := range []string{"md5:900150983cd24fb0d6963f7d28e17f72", "nocolon", ":00"} {
		if _, _, err := recordedHash(bad); err == nil {
			t.Errorf("recorded %q accepted", bad)
		}
	}
	if _, _, err := newHash("md5"); !errors.Is(err, api.ErrInvalid) {
		t.Errorf("md5: %v, want ErrInvalid", err)
	}
}

// The in-goroutine BLAKE3 of small files is BLAKE3: the same sums as the
// blake3 package's, at every size around chunk and tree boundaries.
func TestBLAKE3Sum256(t *testing.T) {
	data := make([]byte, 3<<20+1)
	for i := range data {
		data[i] = byte(i*7 + i>>9)
	}
	sizes := []int{0, 1, 63, 64, 65, 1023, 1024, 1025, 2047, 2048, 2049, 4096, 15 << 10, 16 << 10, 16<<10 + 1, 17 << 10, 31<<10 + 5, 32 << 10, 32<<10 + 1, 64 << 10, 65 << 10, 100000, 1<<20 - 1, 1 << 20, 1<<20 + 1, 3 << 20, 3<<20 + 1}
	for n := 0; n < 40<<10; n += 997 {
		sizes = append(sizes, n)
	}
	for _, n := range sizes {
		if got, want := blake3Sum256(data[:n]), blake3.Sum256(data[:n]); got != want {
			t.Fatalf("%d bytes: %x, want %x", n, got, want)
		}
	}
}

// A tree hash assembled from stripes read in parallel is the BLAKE3 of the
// whole file whenever the readings tile BLAKE3's tree (powers of two), and
// admits it cannot when they do not, so the put hashes by a reading of its
// own instead of recording a wrong fixity.
func TestTreeHash(t *testing.T) {
	data := make([]byte, 9<<20+3)
	for i := range data {
		data[i] = byte(i*13 + i>>11)
	}
	src := bytes.NewReader(data)
	cases := []struct {
		size  int64
		unit  int64
		width int
		tiles bool
	}{
		{1, 4 << 20, 1, true},
		{1023, 4 << 20, 1, true},
		{1 << 20, 4 << 20, 1, true},
		{1<<20 + 1, 4 << 20, 1, true},
		{9<<20 + 3, 4 << 20, 1, true},
		{9<<20 + 3, 4 << 20, 4, true},
		{9<<20 + 3, 1 << 20, 3, true},
		{9<<20 + 3, 64 << 10, 8, true},
		{9<<20 + 3, 1 << 10, 2, true},
		{5<<20 + 7, 2 << 20, 2, true},
		{9<<20 + 3, 3 << 20, 2, true},     // whole frames at multiples of 1 MiB
		{9<<20 + 3, 3 << 19, 2, false},    // 1.5 MiB: a frame starts mid-subtree
		{9<<20 + 3, 5000, 3, false},       // not whole chunks
		{3<<20 + 17, 100 << 10, 2, false}, // 100 KiB: not a power of two
	}
	for _, tc := range cases {
		name := fmt.Sprintf("%d/%d/%d", tc.size, tc.unit, tc.width)
		tree := newTreeHash()
		r := tree.readerAt(src)
		var wg sync.WaitGroup
		for k := range tc.width {
			wg.Add(1)
			go func() {
				defer wg.Done()
				buf := make([]byte, moverconn.FrameSize)
				sr := wire.NewStripeReader(r, wire.Source{Size: tc.size, Unit: tc.unit, Width: tc.width, Stripe: k})
				for {
					if _, err := io.ReadFull(sr, buf); err != nil {
						return
					}
				}
			}()
		}
		wg.Wait()
		got, ok := tree.sum(tc.size)
		if ok != tc.tiles {
			t.Fatalf("%s: tiles %v, want %v", name, ok, tc.tiles)
		}
		if want, _ := fixityOfBytes("", data[:tc.size]); ok && got != want {
			t.Fatalf("%s: %s, want %s", name, got, want)
		}
		tree.spoil()
		if _, ok := tree.sum(tc.size); ok {
			t.Fatalf("%s: a spoiled tree still sums", name)
		}
	}
}
