package mover

import (
	"bufio"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"net"

	"github.com/strata-storage/strata/internal/api"
	"github.com/strata-storage/strata/internal/disk"
	"github.com/strata-storage/strata/internal/wire"
)

// A client on the mover's host that writes from memory (a FUSE mount, a
// gateway) may share its stream's buffer, a ring in a memfd, instead of
// sending the bytes (wire.Request.Ring): each TypeRing frame names a span
// of the ring, which the mover copies out with pread — its own descriptor,
// never a mapping, so a client that shrinks the file gets a short read,
// not a fault — checksums and stores exactly as it stores a frame. The
// copy it made is what it checksums and writes, so the object and its
// CRC32Cs agree whatever the client does to the ring meanwhile. Each span
// is acknowledged once copied, so the client may refill it.

// writeRing stores a write whose bytes come from the client's ring.
// Returned errors are transport errors only, as for write.
func (m *Mover) writeRing(req wire.Request, c net.Conn, br *bufio.Reader, fr *wire.Reader, fw *wire.Writer) error {
	p, err := m.acceptPassed(req, c, br, fw, wire.RingFile, "ring", nil)
	if p == nil {
		return err
	}
	w, f, claims := p.w, p.f, p.claims
	defer w.Abort() // unless closed: nothing half-written stays
	defer f.Close()
	var sent bool // an Error frame went out: skip to End
	refuse := func(err error) error {
		sent = true
		return fw.Error(status(err))
	}
	if fi, err := f.Stat(); err != nil || !fi.Mode().IsRegular() {
		if err := refuse(api.Errorf(api.ErrInvalid, "mover %s: %s/%s: the ring is not a regular file", m.id, req.Device, req.Object)); err != nil {
			return err
		}
	}
	st := newStorer(w, claims.MaxLen)
	finished := false
	defer func() {
		if !finished {
			st.abort()
		}
	}()
	var span [wire.RingSpanSize]byte
	var taken int64
	for {
		h, err := fr.Next()
		if err != nil {
			return err
		}
		switch h.Type {
		case wire.TypeRing:
			p, err := fr.Payload(h, span[:])
			if err != nil {
				return err // a damaged span is a broken connection, not data
			}
			sp, err := wire.ParseRingSpan(p)
			if err != nil {
				return err
			}
			if sent {
				continue
			}
			if err := m.takeSpan(f, sp, w, st); err != nil {
				if errors.As(err, new(sendError)) {
					return err
				}
				if err := refuse(fmt.Errorf("mover %s: %s/%s: %w", m.id, req.Device, req.Object, err)); err != nil {
					return err
				}
				continue
			}
			taken += int64(sp.Length)
			if err := fw.Msg(wire.Status{OK: true, More: true, Length: taken}); err != nil {
				return err
			}
			if err := fw.Flush(); err != nil {
				return err
			}
		case wire.TypeEnd:
			if sent {
				return nil // the error was already sent
			}
			finished = true
			if err := st.finish(); err != nil {
				return fw.Error(status(err))
			}
			if err := w.Close(); err != nil {
				return fw.Error(status(err))
			}
			m.ringed.Add(1)
			return fw.Msg(wire.Status{OK: true, Length: w.Len(), CRC32C: w.CRC(), Receipt: m.signer.Receipt(req.Device, req.Object, w.Len(), w.CRC())})
		default:
			return fmt.Errorf("%w: unexpected frame type %d in a write from a ring", wire.ErrFrame, h.Type)
		}
	}
}

// takeSpan copies sp out of the ring f, checksums it and hands it to the
// storer. A failure to store is returned as the write's error; a pacing
// failure (the mover closing) as a sendError.
func (m *Mover) takeSpan(f io.ReaderAt, sp wire.RingSpan, w *disk.Writer, st *storer) error {
	if err := st.failed(); err != nil {
		return err
	}
	bp := bufPool.Get()
	buf := *bp
	if int(sp.Length) > len(buf) {
		buf = make([]byte, sp.Length)
	}
	p := buf[:sp.Length]
	if n, err := f.ReadAt(p, int64(sp.Offset)); n < len(p) {
		bufPool.Put(bp)
		if err == nil || err == io.EOF {
			err = io.ErrUnexpectedEOF
		}
		return api.Errorf(api.ErrInvalid, "the ring ended inside the span %d+%d: %v", sp.Offset, sp.Length, err)
	}
	if err := w.Pace(len(p)); err != nil {
		bufPool.Put(bp)
		return sendError{err}
	}
	st.put(frame{bp: bp, p: p, crc: crc32.Checksum(p, wire.Castagnoli)})
	return nil
}
