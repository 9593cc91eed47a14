package moverconn

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"sync"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/strata-storage/strata/internal/api"
	"github.com/strata-storage/strata/internal/wire"
)

// A Ring is a stripe stream's buffer in memory the client shares with a
// mover on its host (a memfd, mapped): a write with wire.Request.Ring
// names spans of it instead of sending their bytes. Through the Unix
// socket each byte is copied into the socket, out of it and then into the
// mover's device, and checksummed by both ends; from the ring the mover
// copies it once (pread) and checksums it once. On a host of two cores
// that is what a stream from memory (a FUSE mount's writes, a gateway's
// PUTs) spends its CPU on.
//
// The mover reads the ring through its own descriptor and never maps it,
// so a client that shrinks or rewrites it can only spoil its own write:
// the mover checksums what it copied, never the client's memory.
type Ring struct {
	f *os.File
	b []byte
}

// newRing returns a ring of size bytes.
func newRing(size int) (*Ring, error) {
	f, err := memfd("strata-ring")
	if err != nil {
		return nil, err
	}
	if err := f.Truncate(int64(size)); err != nil {
		f.Close()
		return nil, fmt.Errorf("ring: %w", err)
	}
	b, err := unix.Mmap(int(f.Fd()), 0, size, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED)
	if err != nil {
		f.Close()
		return nil, fmt.Errorf("ring: mmap: %w", err)
	}
	return &Ring{f: f, b: b}, nil
}

// Bytes is the ring's memory.
func (r *Ring) Bytes() []byte { return r.b }

// Close unmaps and closes the ring. A mover still reading it keeps its
// pages until it closes its own descriptor.
func (r *Ring) Close() {
	unix.Munmap(r.b)
	r.f.Close()
}

// maxIdleRings bounds the rings a pool keeps for reuse: a ring's pages,
// once touched, are kept rather than zeroed again for every stream.
const maxIdleRings = 16

// Ring returns an idle ring of size bytes or a new one.
func (p *Pool) Ring(size int) (*Ring, error) {
	p.mu.Lock()
	for i, r := range p.rings {
		if len(r.b) == size {
			p.rings = append(p.rings[:i], p.rings[i+1:]...)
			p.mu.Unlock()
			return r, nil
		}
	}
	p.mu.Unlock()
	return newRing(size)
}

// PutRing keeps r for another stream, or closes it. Only a ring no mover
// reads any more may be put back: one whose write ended with the mover's
// final reply.
func (p *Pool) PutRing(r *Ring) {
	p.mu.Lock()
	if !p.closed && len(p.rings) < maxIdleRings {
		p.rings = append(p.rings, r)
		r = nil
	}
	p.mu.Unlock()
	if r != nil {
		r.Close()
	}
}

// WriteRing stores what ls lends, which must lie in ring, as the object
// of req by naming each span to the mover (wire.Request.Ring), and
// returns the mover's final status with its receipt. Each span is
// returned to ls once the mover has copied it out. progress, if set, is
// called as the mover takes bytes. Only for a connection that HandsOver.
func (c *Conn) WriteRing(ctx context.Context, req wire.Request, ring *Ring, ls Lender, progress func(int)) (wire.Status, error) {
	uc, ok := c.c.(*net.UnixConn)
	if !ok || !c.handles {
		return wire.Status{}, fmt.Errorf("mover %s: a write from a ring needs the mover's Unix socket", c.addr)
	}
	defer c.watch(ctx)()
	req.Ring = true
	if _, err := c.request(ctx, req); err != nil {
		return wire.Status{}, err // refused: the connection is in step
	}
	if err := wire.SendFile(uc, wire.RingFile, ring.f); err != nil {
		return wire.Status{}, c.fail(ctx, fmt.Errorf("mover %s: send ring: %w", c.addr, err))
	}
	// Spans sent and not yet taken, oldest first; the reader of the
	// mover's acknowledgements returns them to ls, which may be waiting
	// for that room to lend more.
	var mu sync.Mutex
	var pending []int64 // each span's end, in bytes of the stream
	var returned int64
	giveBack := func(upTo int64, taken bool) {
		mu.Lock()
		defer mu.Unlock()
		for len(pending) > 0 && pending[0] <= upTo {
			n := int(pending[0] - returned)
			ls.Return(n)
			if taken && progress != nil {
				progress(n)
			}
			returned, pending = pending[0], pending[1:]
		}
	}
	type reply struct {
		st  wire.Status
		err error
	}
	replies := make(chan reply, 1)
	go func() {
		for {
			var st wire.Status
			err := c.fr.ReadMsg(&st)
			if err == nil && st.More {
				giveBack(st.Length, true)
				continue
			}
			replies <- reply{st, err}
			return
		}
	}()
	chunks := lend(ctx, ls)
	defer func() {
		for ch := range chunks {
			ch.Release()
		}
	}()
	base := uintptr(unsafe.Pointer(unsafe.SliceData(ring.b)))
	var sent int64
	var early *reply
	var sendErr error
	for early == nil && sendErr == nil {
		ch, ok := <-chunks
		if !ok {
			break
		}
		if n := len(ch.P); n > 0 {
			if off := uintptr(unsafe.Pointer(unsafe.SliceData(ch.P))) - base; off > uintptr(len(ring.b)-n) { // below base wraps too
				ch.Release()
				sendErr = errors.New("a span outside the ring")
			} else {
				mu.Lock()
				pending = append(pending, sent+int64(n))
				mu.Unlock()
				sent += int64(n)
				if sendErr = c.fw.Ring(wire.RingSpan{Offset: uint32(off), Length: uint32(n)}); sendErr == nil {
					sendErr = c.bw.Flush()
				}
			}
		}
		switch {
		case sendErr != nil:
		case ch.Err == io.EOF || ch.Err == io.ErrUnexpectedEOF:
			ok = false
		case ch.Err != nil:
			sendErr = fmt.Errorf("read source: %w", ch.Err)
		}
		if !ok {
			break
		}
		select {
		case r := <-replies:
			early = &r
		default:
		}
	}
	if sendErr == nil {
		// End closes the stream, or, after the mover refused (early),
		// ends the frames it skips, so the connection stays in step.
		if sendErr = c.fw.End(0); sendErr == nil {
			sendErr = c.bw.Flush()
		}
	}
	if sendErr != nil {
		// Nothing may be stored: break the connection, and the mover,
		// reading its end, aborts the write. The deadline also ends the
		// reader of its replies.
		c.c.SetDeadline(time.Unix(1, 0))
		if early == nil {
			<-replies
		}
		giveBack(sent, false)
		return wire.Status{}, c.fail(ctx, fmt.Errorf("mover %s: %w", c.addr, sendErr))
	}
	r := early
	if r == nil {
		rr := <-replies
		r = &rr
	}
	giveBack(sent, false) // what the mover never took, after a refusal
	if r.err != nil {
		var se *wire.StatusError
		if errors.As(r.err, &se) {
			return wire.Status{}, peerError(r.err)
		}
		return wire.Status{}, c.fail(ctx, fmt.Errorf("mover %s: %w", c.addr, r.err))
	}
	if r.st.Length != sent {
		c.broken = true
		return r.st, api.Errorf(api.ErrCorrupt, "mover %s: stored %d bytes of the ring, sent %d", c.addr, r.st.Length, sent)
	}
	return r.st, nil
}
