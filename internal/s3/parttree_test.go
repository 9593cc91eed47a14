package s3

import (
	"encoding/hex"
	"fmt"
	"math/rand/v2"
	"testing"

	"lukechampine.com/blake3"

	"github.com/strata-storage/strata/client"
)

// Parts of a whole number of MiB, hashed apart as they arrive into the
// nodes of their aligned blocks, make the object's BLAKE3 with its last
// part hashed at Complete, whatever the part size: a power of two (the
// aws cli's 8 MiB), or not (rclone's 5 MiB, s5cmd's 50 MiB here 3 and 6).
func TestPartNodesMakeTheObjectsFixity(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	data := make([]byte, 23<<20+12345)
	for i := range data {
		data[i] = byte(rng.Uint32())
	}
	want := blake3.Sum256(data)
	for _, mib := range []int64{1, 2, 3, 5, 6, 8} {
		t.Run(fmt.Sprintf("%d MiB parts", mib), func(t *testing.T) {
			size := mib << 20
			var attrs []map[string][]byte
			for n := 1; int64(n)*size < int64(len(data)); n++ {
				ph := partTree(n, size)
				if ph == nil {
					t.Fatalf("part %d of %d MiB: no tree", n, mib)
				}
				ph.w.Write(data[int64(n-1)*size : int64(n)*size])
				a := map[string][]byte{}
				ph.record(a)
				attrs = append(attrs, a)
			}
			h := client.NewTreeHash()
			for i, a := range attrs {
				if !addPartNodes(h, string(a[xaPartNode]), int64(i)*size, size) {
					t.Fatalf("part %d: nodes %q not taken", i+1, a[xaPartNode])
				}
			}
			last := int64(len(attrs)) * size
			w := h.At(last)
			w.Write(data[last:])
			w.Close()
			if got, ok := h.Sum(int64(len(data))); !ok || got != "blake3:"+hex.EncodeToString(want[:]) {
				t.Fatalf("joined fixity %q (%v), want blake3:%x", got, ok, want)
			}
		})
	}
}

// A part's blocks are aligned powers of two of MiB covering it exactly;
// sizes that are no whole number of MiB get no tree; nodes that do not
// cover the part, or are malformed, are refused.
func TestTreeBlocks(t *testing.T) {
	const M = 1 << 20
	for _, tc := range []struct {
		off, to int64
		want    string
	}{
		{0, 8 * M, "[[0 8388608]]"},
		{0, 5 * M, "[[0 4194304] [4194304 5242880]]"},
		{5 * M, 10 * M, "[[5242880 6291456] [6291456 8388608] [8388608 10485760]]"},
		{50 * M, 100 * M, "[[52428800 54525952] [54525952 58720256] [58720256 67108864] [67108864 100663296] [100663296 104857600]]"},
	} {
		if got := fmt.Sprint(treeBlocks(tc.off, tc.to)); got != tc.want {
			t.Errorf("treeBlocks(%d, %d) = %s, want %s", tc.off, tc.to, got, tc.want)
		}
	}
	for _, size := range []int64{0, M - 1, 5*M + 1, 5_000_000} {
		if partTree(2, size) != nil {
			t.Errorf("a part of %d bytes got a tree", size)
		}
	}
	h := client.NewTreeHash()
	for _, v := range []string{"", "0", "0 x", "0 1048576", "1048576 1048576 00", "0 0 00"} {
		if addPartNodes(h, v, 0, 2*M) {
			t.Errorf("nodes %q taken for a part of 2 MiB at 0", v)
		}
	}
}
