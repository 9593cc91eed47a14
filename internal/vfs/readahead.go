package vfs

import (
	"io"
	"sync/atomic"

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
	// spares are buffers of windows read to their end, for the next
	// fetches: a fresh 16–64 MiB buffer per window cost a reader in order
	// more than its copies (zeroing it, and the page faults of memory
	// the process had not touched). A window still lent out when it is
	// retired gives its buffer back when the last loan ends (a FUSE
	// reply is released after the next read may have arrived).
	spares chan []byte
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
	// refs counts the slices of buf lent out (readRef) and not yet
	// released: a window lent out is not reused.
	refs atomic.Int32
	// retired: no read will use it again; given: its buffer went back
	// to the spares (by retire or by the last release, whichever saw
	// the window both retired and not lent out).
	retired, given atomic.Bool
	spares         chan []byte
}

// giveBack returns w's buffer to the spares once it is retired and no
// loan of it is outstanding.
func (w *window) giveBack() {
	if w.retired.Load() && w.refs.Load() == 0 && w.given.CompareAndSwap(false, true) {
		select {
		case w.spares <- w.buf:
		default: // spares full: left to the GC
		}
	}
}

func (ra *readAhead) init(rd *client.Reader) {
	w, unit := rd.Width()
	ra.rd, ra.size = rd, int(min(max(int64(w)*unit, minWindow), maxWindow))
	ra.spares = make(chan []byte, 2)
}

// fetch starts reading the window at off.
func (ra *readAhead) fetch(off int64) *window {
	var buf []byte
	select {
	case buf = <-ra.spares:
	default:
		buf = make([]byte, ra.size)
	}
	w := &window{off: off, buf: buf, done: make(chan struct{}), spares: ra.spares}
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

// readRef reads len(p) bytes at off: in place in a window when the read
// falls in one, with release to call once the bytes are no longer used
// (the window is not reused until then), else copied into p (release
// nil).
func (ra *readAhead) readRef(p []byte, off int64) ([]byte, func(), error) {
	inOrder := off == ra.next
	ra.next = off + int64(len(p))
	if !inOrder && !ra.cur.covers(off, len(p)) && !ra.pre.covers(off, len(p)) {
		n, err := ra.rd.ReadAt(p, off)
		return p[:n], nil, err
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
		return nil, nil, err
	}
	// Start on the next window as soon as this one is being consumed.
	end := w.off + int64(len(w.buf))
	if ra.pre == nil && w.n == len(w.buf) {
		ra.pre = ra.fetch(end)
	}
	if off >= w.off+int64(w.n) {
		return nil, nil, io.EOF
	}
	b := w.buf[off-w.off : min(off-w.off+int64(len(p)), int64(w.n))]
	var err error
	if len(b) < len(p) {
		err = io.EOF
	}
	w.refs.Add(1)
	var once atomic.Bool
	return b, func() {
		if once.CompareAndSwap(false, true) {
			w.refs.Add(-1)
			w.giveBack()
		}
	}, err
}

// retire gives the buffer of window w, which no read will use again, to
// the spares once its fetch has ended and none of it is lent out (reads
// hold the handle's lock, so none is being lent meanwhile).
func (ra *readAhead) retire(w *window) {
	if w == nil {
		return
	}
	select {
	case <-w.done:
		w.retired.Store(true)
		w.giveBack()
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
