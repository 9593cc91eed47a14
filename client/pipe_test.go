package client

import (
	"bytes"
	"errors"
	"io"
	"math/rand/v2"
	"testing"
)

// TestPipe: what goes in comes out in order through a buffer smaller
// than the writes, whatever the sizes on either side; the writer's close
// ends the reader's stream after the buffered bytes (cleanly or with its
// error); the reader's close fails the writer.
func TestPipe(t *testing.T) {
	for _, size := range []int{1, 7, 4096, 1 << 20} {
		p := newPipe(size)
		want := make([]byte, 3<<20+11)
		for i := range want {
			want[i] = byte(rand.Uint32())
		}
		go func() {
			for b := want; len(b) > 0; {
				n := min(len(b), 1+rand.IntN(100_000))
				if _, err := p.Write(b[:n]); err != nil {
					t.Error(err)
					return
				}
				b = b[n:]
			}
			p.CloseWrite(nil)
		}()
		got, err := io.ReadAll(io.LimitReader(p, int64(len(want))+1))
		if err != nil || !bytes.Equal(got, want) {
			t.Fatalf("buffer %d: %d bytes, %v", size, len(got), err)
		}
	}
	boom := errors.New("boom")
	p := newPipe(16)
	p.Write([]byte("abc"))
	p.CloseWrite(boom)
	if b, err := io.ReadAll(p); string(b) != "abc" || !errors.Is(err, boom) {
		t.Fatalf("after the writer's error: %q %v", b, err)
	}
	p = newPipe(4)
	done := make(chan error)
	go func() { _, err := p.Write(make([]byte, 100)); done <- err }()
	p.CloseRead(boom)
	if err := <-done; !errors.Is(err, boom) {
		t.Fatalf("a write blocked when the reader closed: %v", err)
	}
}
