package mover

import (
	"bufio"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"net"
	"os"

	"golang.org/x/sys/unix"

	"github.com/strata-storage/strata/internal/api"
	"github.com/strata-storage/strata/internal/disk"
	"github.com/strata-storage/strata/internal/token"
	"github.com/strata-storage/strata/internal/wire"
)

// A client on the mover's host may pass its source file instead of
// streaming it (wire.Request.Source): the mover reads the stripe out of the
// page cache, checksums it once and stores it. Through the socket the same
// bytes are copied twice more (into the socket and out of it, besides the
// client's read, which the mover's replaces) and checksummed once more (by
// the client, then checked by the mover); on a machine of a few cores that
// is what a put's CPU goes to. The mover stays the only
// writer of its objects: it lays them out, paces capped devices, fsyncs
// and signs the receipt exactly as for a stream. Reading a file the client
// opened gives the mover no access the client did not have.

// progressEvery is how often (in bytes stored) a write from a file reports
// progress; each report also tells the mover whether the client is still
// there.
const progressEvery = 32 << 20

// passed is a write whose bytes the client passes as a file (Source, Ring):
// the object being written, its claims, and the file.
type passed struct {
	w      *disk.Writer
	claims token.Claims
	f      *os.File
	uc     *net.UnixConn
}

// acceptPassed creates the object of a write whose bytes come in a file
// the client passes on the Unix socket c with marker (what names it in
// errors), unless refuse (a check of the request) says otherwise, answers
// OK, and receives the file. A refusal goes to the client and p is nil;
// returned errors are transport errors only. The caller closes p.f and
// aborts p.w unless it closes it.
func (m *Mover) acceptPassed(req wire.Request, c net.Conn, br *bufio.Reader, fw *wire.Writer, marker byte, what string, refuse error) (*passed, error) {
	uc, local := c.(*net.UnixConn)
	err := refuse
	if err == nil && !local {
		err = api.Errorf(api.ErrInvalid, "mover %s: a write from the client's %s needs the mover's Unix socket", m.id, what)
	}
	p := &passed{uc: uc}
	if err == nil {
		var d *disk.Device
		if d, p.claims, err = m.authorize(req, token.OpWrite); err == nil {
			p.w, err = d.Create(m.ctx, req.Object, p.claims.MaxLen)
		}
	}
	if err != nil {
		return nil, fw.Error(status(err))
	}
	if err = fw.Msg(wire.Status{OK: true}); err == nil {
		err = fw.Flush()
	}
	if err != nil {
		p.w.Abort()
		return nil, err
	}
	// The client sends nothing else until it has its reply, so the buffer
	// is empty and the file arrives with the next byte on the socket.
	if n := br.Buffered(); n != 0 {
		p.w.Abort()
		return nil, fmt.Errorf("%w: %d bytes before the %s", wire.ErrFrame, n, what)
	}
	got, f, err := wire.ReceiveFile(uc, what)
	if err == nil && (f == nil || got != marker) {
		if f != nil {
			f.Close()
		}
		err = fmt.Errorf("%w: marker %q without the %s", wire.ErrFrame, got, what)
	}
	if err != nil {
		p.w.Abort()
		return nil, err
	}
	p.f = f
	return p, nil
}

// writeFrom stores the part of a client's file that req.Source names.
// Returned errors are transport errors only, as for write.
func (m *Mover) writeFrom(req wire.Request, c net.Conn, br *bufio.Reader, fw *wire.Writer) error {
	src := *req.Source
	var bad error
	if cerr := src.Check(); cerr != nil {
		bad = api.Errorf(api.ErrInvalid, "mover %s: %v", m.id, cerr)
	}
	p, err := m.acceptPassed(req, c, br, fw, wire.SourceFile, "source file", bad)
	if p == nil {
		return err
	}
	w, f, uc := p.w, p.f, p.uc
	defer w.Abort() // unless closed: nothing half-written stays
	defer f.Close()
	if fi, err := f.Stat(); err != nil || !fi.Mode().IsRegular() {
		return fw.Error(status(api.Errorf(api.ErrInvalid, "mover %s: %s/%s: the source is not a regular file", m.id, req.Device, req.Object)))
	}
	next := int64(progressEvery)
	check := func(stored int64) error {
		if peerGone(uc) {
			// A cancelled client closes the connection: stop now rather
			// than store (and fsync) what nobody will commit.
			return sendError{fmt.Errorf("mover %s: %s/%s: the client went away", m.id, req.Device, req.Object)}
		}
		if stored < next {
			return nil
		}
		next += progressEvery
		if err := fw.Msg(wire.Status{OK: true, More: true, Length: stored}); err != nil {
			return sendError{err}
		}
		if err := fw.Flush(); err != nil {
			return sendError{err}
		}
		return nil
	}
	if err := m.copyFrom(f, src, w, check); err != nil {
		if errors.As(err, new(sendError)) {
			return err
		}
		m.log.Warn("mover: write from a client's file failed", "device", req.Device, "object", req.Object, "err", err)
		return fw.Error(status(fmt.Errorf("mover %s: %s/%s: %w", m.id, req.Device, req.Object, err)))
	}
	if err := w.Close(); err != nil {
		return fw.Error(status(err))
	}
	m.sourced.Add(1)
	return fw.Msg(wire.Status{OK: true, Length: w.Len(), CRC32C: w.CRC(), Receipt: m.signer.Receipt(req.Device, req.Object, w.Len(), w.CRC())})
}

// copyFrom reads src's stripe of f into w: this goroutine reads and
// checksums a chunk while the storer writes the one before. check is
// called after each chunk with the bytes read so far.
func (m *Mover) copyFrom(f *os.File, src wire.Source, w *disk.Writer, check func(int64) error) error {
	st := newStorer(w, src.Len())
	r := wire.NewStripeReader(f, src)
	var read int64
	for {
		if err := m.ctx.Err(); err != nil {
			st.abort()
			return err
		}
		bp := bufPool.Get()
		n, err := fill(r, *bp)
		if n > 0 {
			p := (*bp)[:n]
			if perr := w.Pace(n); perr != nil {
				bufPool.Put(bp)
				st.abort()
				return perr
			}
			st.put(frame{bp: bp, p: p, crc: crc32.Checksum(p, wire.Castagnoli)})
			read += int64(n)
		} else {
			bufPool.Put(bp)
		}
		if err == io.EOF {
			return st.finish()
		}
		if errors.Is(err, io.ErrUnexpectedEOF) {
			err = api.Errorf(api.ErrInvalid, "the source ended after %d of its stripe's %d bytes (did it change size?)", read, src.Len())
		}
		if err == nil {
			err = st.failed()
		}
		if err == nil {
			err = check(read)
		}
		if err != nil {
			st.abort()
			return err
		}
	}
}

// peerGone reports whether the client closed its end of c. During a write
// from its file a client sends nothing, so anything readable (end of file,
// a reset, stray bytes) means it is gone or broken.
func peerGone(c *net.UnixConn) bool {
	rc, err := c.SyscallConn()
	if err != nil {
		return true
	}
	gone := false
	rc.Read(func(fd uintptr) bool {
		var b [1]byte
		_, _, err := unix.Recvfrom(int(fd), b[:], unix.MSG_PEEK|unix.MSG_DONTWAIT)
		gone = err != unix.EAGAIN && err != unix.EINTR
		return true
	})
	return gone
}

// fill reads from r until buf is full; io.EOF means r ended (after n
// bytes), any other error is r's.
func fill(r io.Reader, buf []byte) (int, error) {
	n := 0
	for n < len(buf) {
		k, err := r.Read(buf[n:])
		n += k
		if err != nil {
			return n, err
		}
	}
	return n, nil
}
