package vfs

import (
	"io"

	"github.com/strata-storage/strata/client"
)

// readAhead serves a handle's reads from the movers. A reader that reads
// in order gets whole windows (a stripe row: stripe width × unit, within
// [minWindow, maxWindow]) fetched from every stripe at once, the next one
// while it consumes the current; reads out of order go to the movers as
// they are.
type readAhead struct {
	rd       *client.Reader
	size     int
	next     int64 // where a reader in order reads next
	cur, pre *window
	// spare is the buffer of a window read to its end, for the next
	// fetch: a fresh 16–64 MiB buffer per window cost a reader in order
	// more than its copies (zeroing it, and the page faults of memory
	// the process had not touched).
	spare []byte
}

const (
	minWindow = 4 << 20
	maxWindow = 64 << 20
)

type window struct {
	off  int64
	buf  []byte
	n    int
	err  error
	done chan struct{}
}

func (ra *readAhead) init(rd *client.Reader) {
	w, unit := rd.Width()
	ra.rd, ra.size = rd, int(min(max(int64(w)*unit, minWindow), maxWindow))
}

// fetch starts reading the window at off.
func (ra *readAhead) fetch(off int64) *window {
	buf := ra.spare
	if len(buf) != ra.size {
		buf = make([]byte, ra.size)
	}
	ra.spare = nil
	w := &window{off: off, buf: buf, done: make(chan struct{})}
	go func() {
		defer close(w.done)
		w.n, w.err = ra.rd.ReadAt(w.buf, off)
		if w.err == io.EOF {
			w.err = nil
		}
	}()
	return w
}

// covers reports whether w holds [off, off+n) or would, once read.
func (w *window) covers(off int64, n int) bool {
	return w != nil && off >= w.off && off+int64(n) <= w.off+int64(len(w.buf))
}

func (ra *readAhead) readAt(p []byte, off int64) (int, error) {
	inOrder := off == ra.next
	ra.next = off + int64(len(p))
	if !inOrder && !ra.cur.covers(off, len(p)) && !ra.pre.covers(off, len(p)) {
		return ra.rd.ReadAt(p, off)
	}
	if !ra.cur.covers(off, len(p)) {
		ra.retire(ra.cur)
		if ra.pre.covers(off, len(p)) {
			ra.cur, ra.pre = ra.pre, nil
		} else {
			ra.cur = ra.fetch(off)
		}
	}
	w := ra.cur
	<-w.done
	if w.err != nil {
		err := w.err
		ra.cur = nil
		return 0, err
	}
	// Start on the next window as soon as this one is being consumed.
	end := w.off + int64(len(w.buf))
	if ra.pre == nil && w.n == len(w.buf) {
		ra.pre = ra.fetch(end)
	}
	if off >= w.off+int64(w.n) {
		return 0, io.EOF
	}
	n := copy(p, w.buf[off-w.off:w.n])
	if n < len(p) {
		return n, io.EOF
	}
	return n, nil
}

// retire keeps the buffer of window w, which no read will use again, as
// the spare, once its fetch has ended (reads hold the handle's lock, so
// none is copying out of it).
func (ra *readAhead) retire(w *window) {
	if w == nil {
		return
	}
	select {
	case <-w.done:
		ra.spare = w.buf
	default: // still being fetched: left to the GC
	}
}

// stopAll waits out fetches in flight (their buffers are then dropped).
func (ra *readAhead) stopAll() {
	for _, w := range []*window{ra.cur, ra.pre} {
		if w != nil {
			<-w.done
		}
	}
	ra.cur, ra.pre = nil, nil
}
