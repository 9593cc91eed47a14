package client

import (
	"bytes"
	"errors"
	"io"
	"math/rand/v2"
	"testing"
)

// feed writes 3 MiB of random bytes into p from a goroutine of its own,
// in writes of random sizes, then closes it; it returns the bytes.
func feed(t *testing.T, p *pipe) []byte {
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
	return want
}

// TestPipe: what goes in comes out in order through a buffer smaller
// than the writes, whatever the sizes on either side; the writer's close
// ends the reader's stream after the buffered bytes (cleanly or with its
// error); the reader's close fails the writer.
func TestPipe(t *testing.T) {
	for _, size := range []int{1, 7, 4096, 1 << 20} {
		p := newPipe(size)
		want := feed(t, p)
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

// TestPipeLend: a reader that borrows (as a stripe stream sends from the
// pipe) gets every byte in order, in chunks of at most max, keeping two
// chunks out at once where the ring holds two; the writer's error ends
// the loans.
func TestPipeLend(t *testing.T) {
	for _, size := range []int{1, 7, 4096, 1 << 20, 4 << 20} {
		p := newPipe(size)
		want := feed(t, p)
		max := min(size, 1<<20)
		var got []byte
		var out [][]byte // lent, not yet returned
		for {
			b, err := p.Lend(max)
			if err == io.EOF {
				break
			}
			if err != nil {
				t.Fatal(err)
			}
			if len(b) > max || len(b) == 0 {
				t.Fatalf("buffer %d: lent %d bytes, max %d", size, len(b), max)
			}
			got = append(got, b...)
			keep := 1
			if size >= 2*max {
				keep = 2
			}
			if out = append(out, b); len(out) == keep {
				p.Return(len(out[0]))
				out = out[1:]
			}
		}
		for _, b := range out {
			p.Return(len(b))
		}
		if !bytes.Equal(got, want) {
			t.Fatalf("buffer %d: %d bytes lent, differ", size, len(got))
		}
	}
	boom := errors.New("boom")
	p := newPipe(16)
	p.Write([]byte("abc"))
	p.CloseWrite(boom)
	if b, err := p.Lend(8); string(b) != "abc" || err != nil {
		t.Fatalf("lend before the error: %q %v", b, err)
	}
	if _, err := p.Lend(8); err != boom {
		t.Fatalf("lend after: %v, want boom", err)
	}
}
