package tapeserver

import (
	"bytes"
	"testing"
)

func TestSmallBufferClasses(t *testing.T) {
	for _, tc := range []struct{ n, size int64 }{
		{0, 4 << 10}, {1, 4 << 10}, {4 << 10, 4 << 10}, {4<<10 + 1, 8 << 10},
		{64 << 10, 64 << 10}, {100000, 128 << 10}, {readAheadMax, readAheadMax},
	} {
		if got := classSize(tc.n); int64(got) != tc.size {
			t.Errorf("classSize(%d) = %d, want %d", tc.n, got, tc.size)
		}
		b := getSmall(tc.n)
		if len(b) != 0 || int64(cap(b)) != tc.size {
			t.Errorf("getSmall(%d): len %d cap %d, want 0 and %d", tc.n, len(b), cap(b), tc.size)
		}
		putSmall(b)
	}
}

// A fixedBuffer takes frames read into its own memory without a copy,
// frames from elsewhere by copying, and refuses more than it was sized for.
func TestFixedBufferSink(t *testing.T) {
	f := &fixedBuffer{b: make([]byte, 0, 10)}
	in := f.Buffer(4)
	copy(in, "abcd")
	if err := f.Deliver(in, 0); err != nil || f.count() != 4 {
		t.Fatalf("in place: %v, count %d", err, f.count())
	}
	if err := f.Deliver([]byte("efg"), 0); err != nil || f.count() != 7 {
		t.Fatalf("copied: %v, count %d", err, f.count())
	}
	over := f.Buffer(4)
	copy(over, "hijk")
	if err := f.Deliver(over, 0); err == nil {
		t.Fatal("a fixedBuffer took more than it was sized for")
	}
	if !bytes.Equal(f.b, []byte("abcdefg")) {
		t.Fatalf("holds %q", f.b)
	}
}
