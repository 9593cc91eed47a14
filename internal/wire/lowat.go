package wire

import (
	"bufio"
	"net"
	"syscall"

	"golang.org/x/sys/unix"
)

// lowatReader reads a TCP connection for a bufio.Reader of size small:
// a read larger than that is a payload's remaining bytes read in place,
// which the sender will certainly send, so the socket is told not to
// wake the reader (SO_RCVLOWAT) until that many, at most lowatMax, are
// queued. Otherwise a 1 MiB frame arrives in ~4 reads, most of them after
// the reader ran dry, parked and was woken — on a virtual machine whose
// idle CPUs halt, a wake-up costs an exit to the host. A 4 GiB put over
// loopback TCP: the mover's reads 4.0 → 2.2 a MiB, its futex calls 3.2 →
// 2.6, the put 1,590 → 1,801 MB/s (medians of five, taking turns); a
// get's client the same way 2,550 → 2,728 MB/s. Any other read (a bufio
// fill, which may wait for a message shorter than its buffer) runs with
// the default low mark of one byte, so nothing waits for bytes that are
// not coming. The kernel wakes the reader anyway when the connection
// closes or its receive window runs short.
type lowatReader struct {
	c     net.Conn
	rc    syscall.RawConn
	small int
	cur   int
}

const lowatMax = 512 << 10

// NewConnReader returns a buffered reader of size bytes on c for a frame
// Reader: on a TCP connection, a payload read in place waits in the
// kernel for a few hundred KiB at a time (see lowatReader).
func NewConnReader(c net.Conn, size int) *bufio.Reader {
	return bufio.NewReaderSize(newLowatReader(c, size), size)
}

func newLowatReader(c net.Conn, small int) *lowatReader {
	r := &lowatReader{c: c, small: small, cur: 1}
	if tc, ok := c.(*net.TCPConn); ok {
		if rc, err := tc.SyscallConn(); err == nil {
			r.rc = rc
		}
	}
	return r
}

func (r *lowatReader) Read(p []byte) (int, error) {
	if r.rc != nil {
		want := 1
		if len(p) > r.small {
			want = min(len(p), lowatMax)
		}
		if want != r.cur {
			r.rc.Control(func(fd uintptr) {
				if unix.SetsockoptInt(int(fd), unix.SOL_SOCKET, unix.SO_RCVLOWAT, want) == nil {
					r.cur = want
				}
			})
		}
	}
	return r.c.Read(p)
}
