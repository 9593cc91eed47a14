package client

import (
	"errors"
	"testing"

	"lukechampine.com/blake3"

	"github.com/strata-storage/strata/internal/api"
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
