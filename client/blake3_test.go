package client

import (
	"testing"

	"lukechampine.com/blake3"
)

// The node of a 1 MiB piece, as a streamed upload's stripes and a put's
// read-ahead hash each frame, against the blake3 package hashing the
// same bytes (its Hasher, which spreads a large Write over goroutines):
// go test -bench BLAKE3 ./client/
func BenchmarkBLAKE3(b *testing.B) {
	p := make([]byte, 1<<20)
	for i := range p {
		p[i] = byte(i * 7)
	}
	b.Run("node", func(b *testing.B) {
		b.SetBytes(int64(len(p)))
		for range b.N {
			blake3Node(p, 1024)
		}
	})
	b.Run("blake3.Sum256", func(b *testing.B) {
		b.SetBytes(int64(len(p)))
		for range b.N {
			blake3.Sum256(p)
		}
	})
}
