package wire

import (
	"hash/crc32"
	"math/rand/v2"
	"testing"
)

func TestCombineCRC(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 1))
	for _, n := range []int{0, 1, 7, 4096, 1 << 20, 3<<20 + 5} {
		for _, split := range []int{0, 1, n / 3, n} {
			if split > n {
				continue
			}
			b := make([]byte, n)
			for i := range b {
				b[i] = byte(r.Uint32())
			}
			a, c := b[:split], b[split:]
			want := crc32.Checksum(b, Castagnoli)
			got := CombineCRC(crc32.Checksum(a, Castagnoli), crc32.Checksum(c, Castagnoli), int64(len(c)))
			if got != want {
				t.Fatalf("n=%d split=%d: combine %08x, direct %08x", n, split, got, want)
			}
		}
	}
}

func FuzzCombineCRC(f *testing.F) {
	f.Add([]byte("hello"), []byte("world"))
	f.Fuzz(func(t *testing.T, a, b []byte) {
		want := crc32.Checksum(append(append([]byte{}, a...), b...), Castagnoli)
		if got := CombineCRC(crc32.Checksum(a, Castagnoli), crc32.Checksum(b, Castagnoli), int64(len(b))); got != want {
			t.Fatalf("combine %08x, direct %08x", got, want)
		}
	})
}

func BenchmarkCombineCRC(b *testing.B) {
	for b.Loop() {
		CombineCRC(0x12345678, 0x9abcdef0, 1<<20)
	}
}
