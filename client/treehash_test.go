package client_test

import (
	"encoding/hex"
	"fmt"
	"testing"

	"lukechampine.com/blake3"

	"github.com/strata-storage/strata/client"
)

// TestTreeHashJoinsParts: parts hashed apart (their nodes carried as
// text, as S3 parts carry them in attributes) and a last part hashed at
// its place make the BLAKE3 of the whole; pieces that do not tile the
// tree give no answer.
func TestTreeHashJoinsParts(t *testing.T) {
	for _, tc := range []struct {
		part, last int
		parts      int
		ok         bool
	}{
		{1 << 20, 1, 1, true},
		{1 << 20, 12345, 3, true},
		{2 << 20, 2 << 20, 4, true},
		{8 << 20, 3<<20 + 77, 5, true},
		{4 << 20, 1 << 10, 7, true},
		{3 << 20, 1000, 3, false}, // not a power of two: parts do not tile the tree
	} {
		t.Run(fmt.Sprintf("%dx%d+%d", tc.parts-1, tc.part, tc.last), func(t *testing.T) {
			var all []byte
			var encs []string
			for i := 0; i < tc.parts-1; i++ {
				p := randBytes(uint64(i+1), tc.part)
				all = append(all, p...)
				// Each part in a request of its own.
				h := client.NewTreeHash()
				off := int64(i * tc.part)
				w := h.At(off)
				// Writes that do not fall on blocks, writes of whole
				// blocks (hashed where they lie), and writes of a block
				// and a bit (both ways in one write).
				step := []int{70001, 4 << 20, 1<<20 + 5}[i%3]
				for b := p; len(b) > 0; b = b[min(len(b), step):] {
					w.Write(b[:min(len(b), step)])
				}
				w.Close()
				enc, ok := h.Node(off, off+int64(tc.part))
				if !ok && tc.ok {
					t.Fatalf("part %d: no node", i)
				}
				encs = append(encs, enc)
			}
			last := randBytes(99, tc.last)
			all = append(all, last...)
			h := client.NewTreeHash()
			for i, enc := range encs {
				if enc == "" {
					continue
				}
				off := int64(i * tc.part)
				if err := h.AddNode(off, off+int64(tc.part), enc); err != nil {
					t.Fatal(err)
				}
			}
			w := h.At(int64((tc.parts - 1) * tc.part))
			w.Write(last)
			w.Close()
			got, ok := h.Sum(int64(len(all)))
			sum := blake3.Sum256(all)
			want := "blake3:" + hex.EncodeToString(sum[:])
			if ok != tc.ok || ok && got != want {
				t.Fatalf("sum %q %v, want %q %v", got, ok, want, tc.ok)
			}
		})
	}
	if err := client.NewTreeHash().AddNode(0, 10, "zz"); err == nil {
		t.Fatal("a malformed node was taken")
	}
}

// FuzzTreeNode: a node read back from an attribute (which users may
// set) is taken or refused, never a panic; what Node wrote comes back.
func FuzzTreeNode(f *testing.F) {
	h := client.NewTreeHash()
	w := h.At(0)
	w.Write(randBytes(5, 1<<20))
	w.Close()
	enc, _ := h.Node(0, 1<<20)
	f.Add(enc, int64(0), int64(1<<20))
	f.Add("zz", int64(0), int64(1))
	f.Add(enc[:10], int64(-1), int64(5))
	f.Fuzz(func(t *testing.T, enc string, lo, hi int64) {
		h := client.NewTreeHash()
		if err := h.AddNode(lo, hi, enc); err != nil {
			return
		}
		if got, ok := h.Node(lo, hi); !ok || got != hex.EncodeToString(mustHex(t, enc)) {
			t.Fatalf("node %q came back as %q %v", enc, got, ok)
		}
		h.Sum(hi)
	})
}

func mustHex(t *testing.T, s string) []byte {
	b, err := hex.DecodeString(s)
	if err != nil {
		t.Fatal(err)
	}
	return b
}
