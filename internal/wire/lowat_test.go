package wire

import (
	"bufio"
	"bytes"
	"hash/crc32"
	"math/rand/v2"
	"net"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/strata-storage/strata/internal/testutil/tcppair"
)

// tcpPair returns the two ends of a TCP connection on 127.0.0.1, each
// failing its reads and writes after a few seconds.
func tcpPair(t *testing.T) (client, server net.Conn) { return tcppair.New(t, 10*time.Second) }

// TestConnReaderExchanges: frames of every size read through
// NewConnReader arrive whole, and a reader waiting for a payload's last
// bytes — fewer than the low mark a larger read set, sent after a pause —
// or for a message shorter than its buffer wakes as soon as they are
// there. Each exchange is a request answered before the next is sent, as
// a mover's are, so a low mark above what the sender will send before it
// waits would stall the test until its deadline.
func TestConnReaderExchanges(t *testing.T) {
	cases := []struct {
		name   string
		pieces []int // one payload sent in these pieces, a pause between them
	}{
		{"message only", nil},
		{"one byte", []int{1}},
		{"the buffer's size", []int{32 << 10}},
		{"a byte over the buffer", []int{32<<10 + 1}},
		{"100 KiB", []int{100 << 10}},
		{"a frame", []int{FrameSize}},
		{"the low mark's cap and a byte", []int{lowatMax + 1}},
		{"most of a frame, a pause, its last bytes", []int{600 << 10, 100 << 10}},
		{"a little, a pause, the rest", []int{10 << 10, 900 << 10}},
		{"three pieces", []int{40 << 10, 500 << 10, 40 << 10}},
	}
	client, server := tcpPair(t)
	cw := NewConnWriter(bufio.NewWriterSize(client, 32<<10), client)
	cr := NewReader(NewConnReader(client, 32<<10))
	sr := NewReader(NewConnReader(server, 32<<10))
	sw := NewConnWriter(bufio.NewWriterSize(server, 32<<10), server)
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var payload []byte
			for _, n := range tc.pieces {
				p := make([]byte, n)
				for i := range p {
					p[i] = byte(rand.IntN(256))
				}
				payload = append(payload, p...)
			}
			sent := make(chan error, 1)
			go func() {
				sent <- func() error {
					if err := cw.Msg(Status{OK: true, Length: int64(len(payload))}); err != nil {
						return err
					}
					if len(payload) > 0 {
						// One frame whose payload leaves in pieces, the
						// receiver left waiting in between.
						PutHeader(cw.hdr[:], Header{Type: TypeData, Length: uint32(len(payload)), CRC: crcOf(payload)})
						if _, err := cw.w.Write(cw.hdr[:]); err != nil {
							return err
						}
						rest := payload
						for _, n := range tc.pieces {
							if _, err := cw.w.Write(rest[:n]); err != nil {
								return err
							}
							if err := cw.Flush(); err != nil {
								return err
							}
							rest = rest[n:]
							time.Sleep(20 * time.Millisecond)
						}
					}
					if err := cw.End(0); err != nil {
						return err
					}
					return cw.Flush()
				}()
			}()
			var st Status
			if err := sr.ReadMsg(&st); err != nil {
				t.Fatal(err)
			}
			got := make([]byte, 0, len(payload))
			for {
				h, err := sr.Next()
				if err != nil {
					t.Fatal(err)
				}
				if h.Type == TypeEnd {
					break
				}
				p, err := sr.Payload(h, make([]byte, h.Length))
				if err != nil {
					t.Fatal(err)
				}
				got = append(got, p...)
			}
			if !bytes.Equal(got, payload) || st.Length != int64(len(payload)) {
				t.Fatalf("received %d bytes (announced %d), sent %d", len(got), st.Length, len(payload))
			}
			if err := <-sent; err != nil {
				t.Fatal(err)
			}
			// The answer: a short message the other side's buffered
			// read waits for.
			if err := sw.Msg(Status{OK: true}); err != nil {
				t.Fatal(err)
			}
			if err := sw.Flush(); err != nil {
				t.Fatal(err)
			}
			if err := cr.ReadMsg(&st); err != nil || !st.OK {
				t.Fatalf("answer: %v %+v", err, st)
			}
		})
	}
}

func crcOf(p []byte) uint32 { return crc32.Checksum(p, Castagnoli) }

// TestLowatMark: a read larger than the buffer sets the socket's low mark
// to what it asks (at most lowatMax); any other read puts it back to one
// byte. A connection that is not TCP is read as it is.
func TestLowatMark(t *testing.T) {
	client, server := tcpPair(t)
	r := newLowatReader(server, 32<<10)
	mark := func() int {
		var v int
		r.rc.Control(func(fd uintptr) { v, _ = unix.GetsockoptInt(int(fd), unix.SOL_SOCKET, unix.SO_RCVLOWAT) })
		return v
	}
	data := make([]byte, 2<<20)
	go client.Write(data)
	for _, tc := range []struct{ read, mark int }{
		{64 << 10, 64 << 10},
		{2 << 20, lowatMax},
		{32 << 10, 1},
		{16, 1},
		{32<<10 + 1, 32<<10 + 1},
	} {
		if _, err := r.Read(make([]byte, tc.read)); err != nil {
			t.Fatal(err)
		}
		if got := mark(); got != tc.mark || r.cur != tc.mark {
			t.Errorf("after a read of %d bytes: low mark %d (recorded %d), want %d", tc.read, got, r.cur, tc.mark)
		}
	}

	a, b := net.Pipe()
	defer a.Close()
	defer b.Close()
	go a.Write([]byte("hello"))
	pr := newLowatReader(b, 2)
	p := make([]byte, 5)
	if n, err := pr.Read(p); err != nil || pr.rc != nil || string(p[:n]) != "hello"[:n] {
		t.Fatalf("a pipe: %q %v (raw conn %v)", p[:n], err, pr.rc)
	}
}
