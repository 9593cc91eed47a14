package client

import (
	"bytes"
	"hash/crc32"
	"testing"

	"github.com/strata-storage/strata/internal/wire"
)

// A ranged read's frames land in place in the caller's buffer where their
// place is contiguous, go through scratch where they span two places, and
// the bytes, count and CRC come out as if copied.
func TestScatterSinkInPlace(t *testing.T) {
	src := make([]byte, 8000)
	for i := range src {
		src[i] = byte(i * 7)
	}
	out := make([]byte, 8000)
	s := &scatterSink{dst: [][]byte{out[:3000], out[3000:]}}
	cases := []struct {
		n       int
		inPlace bool
	}{{1000, true}, {2500, false}, {4500, true}}
	pos := 0
	for _, c := range cases {
		b := s.Buffer(c.n)
		if got := &b[0] == &out[pos]; got != c.inPlace {
			t.Fatalf("frame of %d at %d: in place %v, want %v", c.n, pos, got, c.inPlace)
		}
		copy(b, src[pos:pos+c.n])
		if err := s.Deliver(b, crc32.Checksum(b, wire.Castagnoli)); err != nil {
			t.Fatal(err)
		}
		pos += c.n
	}
	if !bytes.Equal(out, src) {
		t.Fatal("scattered bytes differ")
	}
	if n, crc := s.delivered(); n != 8000 || crc != crc32.Checksum(src, wire.Castagnoli) {
		t.Fatalf("delivered %d bytes crc %08x", n, crc)
	}
	if err := s.Deliver(s.Buffer(1), 0); err == nil {
		t.Fatal("a frame past the range was taken")
	}
}
