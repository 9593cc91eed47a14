package client

import (
	"io"
	"sync"
)

// pipe is io.Pipe with a buffer: Write returns once its bytes are in the
// buffer, blocking only while it is full. A writer that fills a file's
// stripes in turn (Upload.Write: a stripe unit to stripe 0, the next to
// stripe 1, …) thereby keeps every stripe's stream busy at once, where
// io.Pipe would hold it at each stripe until that stripe's sender had
// taken the bytes — one stripe at a time (a FUSE mount writing 4 GiB
// streamed 0.26 of `strata put`).
//
// The reader either reads (Read) or borrows (Lend and Return, the
// moverconn.Lender a stripe stream sends from without copying), not both.
type pipe struct {
	mu      sync.Mutex
	changed sync.Cond
	buf     []byte // a ring
	r, n    int    // where the next read starts, bytes held
	lent    int    // of the n, lent out from r on and not yet returned
	werr    error  // set when the writer closed (io.EOF: cleanly)
	rerr    error  // set when the reader closed
}

func newPipe(size int) *pipe { return newPipeOn(make([]byte, size)) }

// newPipeOn returns a pipe whose ring is buf (a moverconn.Ring's memory).
func newPipeOn(buf []byte) *pipe {
	p := &pipe{buf: buf}
	p.changed.L = &p.mu
	return p
}

// Write copies b into the buffer, waiting for room as it needs.
func (p *pipe) Write(b []byte) (int, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	n := 0
	for len(b) > 0 {
		for p.n == len(p.buf) && p.rerr == nil && p.werr == nil {
			p.changed.Wait()
		}
		if p.rerr != nil {
			return n, p.rerr
		}
		if p.werr != nil {
			return n, io.ErrClosedPipe
		}
		w := (p.r + p.n) % len(p.buf)
		k := copy(p.buf[w:min(len(p.buf), w+len(p.buf)-p.n)], b)
		p.n += k
		n += k
		b = b[k:]
		p.changed.Broadcast()
	}
	return n, nil
}

// Read copies out what the buffer holds, waiting for something or the
// writer's close (then io.EOF, or the error it closed with).
func (p *pipe) Read(b []byte) (int, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	for p.n == 0 && p.werr == nil && p.rerr == nil {
		p.changed.Wait()
	}
	if p.rerr != nil {
		return 0, io.ErrClosedPipe
	}
	if p.n == 0 {
		return 0, p.werr
	}
	k := copy(b, p.buf[p.r:min(len(p.buf), p.r+p.n)])
	p.r = (p.r + k) % len(p.buf)
	p.n -= k
	p.changed.Broadcast()
	return k, nil
}

// Lend implements moverconn.Lender: the next bytes, in place in the ring, up
// to max and to the ring's end; it waits for a full max while the writer
// may still add to it.
func (p *pipe) Lend(max int) ([]byte, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	for {
		if p.rerr != nil {
			return nil, io.ErrClosedPipe
		}
		start := (p.r + p.lent) % len(p.buf)
		k := min(p.n-p.lent, max, len(p.buf)-start)
		if k == max || (k > 0 && start+k == len(p.buf)) || (p.werr != nil && k > 0) {
			p.lent += k
			return p.buf[start : start+k], nil
		}
		if p.werr != nil {
			return nil, p.werr
		}
		p.changed.Wait()
	}
}

// Return implements moverconn.Lender.
func (p *pipe) Return(n int) {
	p.mu.Lock()
	p.r = (p.r + n) % len(p.buf)
	p.n -= n
	p.lent -= n
	p.changed.Broadcast()
	p.mu.Unlock()
}

// CloseWrite ends the stream for the reader: with io.EOF after what is
// buffered when err is nil, else with err.
func (p *pipe) CloseWrite(err error) {
	if err == nil {
		err = io.EOF
	}
	p.mu.Lock()
	if p.werr == nil {
		p.werr = err
	}
	p.changed.Broadcast()
	p.mu.Unlock()
}

// CloseRead makes the writer's Writes fail with err from now on.
func (p *pipe) CloseRead(err error) {
	p.mu.Lock()
	if p.rerr == nil {
		p.rerr = err
	}
	p.changed.Broadcast()
	p.mu.Unlock()
}
