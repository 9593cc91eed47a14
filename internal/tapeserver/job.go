// Package tapeserver moves tape data directly between disk movers and tape
// drives, and lets drives live on hosts other than the core's.
//
// The HSM engine in the core decides what goes where (which files make a
// tape file, which drive, which cartridge, which recall next) and records
// the result; the bytes never pass through it. It hands each transfer to
// the drive's host as a job: a WriteJob names the disk objects a tape file
// is made of, each with the mover that holds it and a capability to read
// it, and the job's runner (Exec) streams them from the movers onto the
// drive; a ReadJob names a tape file range and the new disk object it goes
// to, with a capability to write it. `strata serve` runs jobs in its own
// process on its own library (Exec); `strata tape-server` runs them on the
// host that owns the drives (Server), and the core reaches those drives
// through Library, which is a tape.Library itself: it keeps the one robot
// and the cartridge table, and forwards every drive operation and job to
// the tape server that owns the drive.
//
// The protocol between core and tape servers is HTTP with JSON bodies:
// requests are few and large (one per tape file), so a framed protocol
// like the movers' would buy nothing, and HTTP gives the tape server's
// metrics and health check for free.
package tapeserver

import (
	"context"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"sync"
	"syscall"

	"github.com/strata-storage/strata/internal/api"
	"github.com/strata-storage/strata/internal/moverconn"
	"github.com/strata-storage/strata/internal/tape"
	"github.com/strata-storage/strata/internal/token"
	"github.com/strata-storage/strata/internal/wire"
)

// Source is one disk object, where it is and the capability to move it.
type Source struct {
	Endpoint moverconn.Endpoint `json:"endpoint"`
	Device   string             `json:"device"`
	Object   string             `json:"object"`
	Length   int64              `json:"length"`
	Token    string             `json:"token"`
}

// File is one file of a tape file: its disk copy's stripes, in stripe
// order, stripe units going round-robin over them.
type File struct {
	Size       int64    `json:"size"`
	StripeUnit int64    `json:"stripe_unit"`
	Stripes    []Source `json:"stripes"`
}

// Single reports whether the file is one stripe holding all of it: the
// drive's entry CRC is then the stripe's own CRC32C.
func (f File) Single() bool { return len(f.Stripes) == 1 && f.Stripes[0].Length == f.Size }

// WriteJob writes one tape file: Header's entries, their data read from
// Files in order.
type WriteJob struct {
	Drive  string       `json:"drive"`
	Header *tape.Header `json:"header"`
	Files  []File       `json:"files"`
}

// WriteResult is a tape file written and closed (not yet flushed).
type WriteResult struct {
	Seq       int      `json:"seq"`
	Start     int64    `json:"start"`
	EntryCRCs []uint32 `json:"entry_crcs"` // as the drive wrote them
	// CRCs are the CRC32C of each file as read from its stripes, for files
	// of several stripes (0 for a single one: its entry CRC is checked
	// against the catalog's instead).
	CRCs []uint32 `json:"crcs"`
}

// ReadJob reads a range of a tape file into a new disk object.
type ReadJob struct {
	Drive       string `json:"drive"`
	Seq         int    `json:"seq"`
	Offset      int64  `json:"offset"`
	Length      int64  `json:"length"`
	ReadThrough bool   `json:"read_through"` // read on to Offset instead of locating
	Dest        Source `json:"dest"`
}

// VerifyJob reads a range of a tape file and sums it.
type VerifyJob struct {
	Drive  string `json:"drive"`
	Seq    int    `json:"seq"`
	Offset int64  `json:"offset"`
	Length int64  `json:"length"`
}

// VerifyResult is what a verify read: its length and CRC32C, and why it
// stopped if the data was damaged.
type VerifyResult struct {
	Length int64  `json:"length"`
	CRC32C uint32 `json:"crc32c"`
	Damage string `json:"damage,omitempty"`
}

// FileError is a write job stopped by one of its files: the HSM engine
// deals with that file (a damaged disk copy) and writes the rest again.
type FileError struct {
	Index int
	Err   error
}

func (e *FileError) Error() string { return fmt.Sprintf("file %d: %v", e.Index, e.Err) }
func (e *FileError) Unwrap() error { return e.Err }

// tapeWriter keeps the first error of the tape file's own writes, so that
// a job stopped by the cartridge or the drive is not taken for one
// stopped by a file's disk copy.
type tapeWriter struct {
	w   io.Writer
	err error
}

func (t *tapeWriter) Write(p []byte) (int, error) {
	n, err := t.w.Write(p)
	if err != nil && t.err == nil {
		t.err = err
	}
	return n, err
}

// writeFailed marks an error of the tape file itself (its header, data or
// closing verification) as tape.ErrWriteFailed, unless the library named
// it (a failed drive, which the engine handles as the drive's and not
// the cartridge's, a full cartridge, a busy drive), the job was
// cancelled, or the host's own storage under an emulated library is full
// (no cartridge's fault: marking each read-only in turn would empty the
// library of writable ones).
func writeFailed(err error) error {
	for _, t := range tapeErrors {
		if errors.Is(err, t.err) {
			return err
		}
	}
	for _, e := range []error{context.Canceled, context.DeadlineExceeded, syscall.ENOSPC, syscall.EDQUOT} {
		if errors.Is(err, e) {
			return err
		}
	}
	return fmt.Errorf("%w: %w", tape.ErrWriteFailed, err)
}

// Jobs runs transfers on a library's drives: Exec in the process that has
// the drives, Library on a remote tape server.
type Jobs interface {
	Write(ctx context.Context, j WriteJob) (WriteResult, error)
	Read(ctx context.Context, j ReadJob) (wire.Status, error)
	Verify(ctx context.Context, j VerifyJob) (VerifyResult, error)
}

// Exec runs jobs on a library in this process, reading and writing disk
// objects through Pool.
type Exec struct {
	Lib  tape.Library
	Pool *moverconn.Pool
}

// Write runs j: the tape file is appended, the files' disk copies stream
// into it (small ones read ahead, several at once), and it is closed,
// which verifies it; a file that cannot be read stops the job with a
// FileError and abandons the tape file.
func (x *Exec) Write(ctx context.Context, j WriteJob) (WriteResult, error) {
	fw, err := x.Lib.Append(ctx, j.Drive, j.Header)
	if err != nil {
		return WriteResult{}, writeFailed(err)
	}
	res := WriteResult{CRCs: make([]uint32, len(j.Files))}
	ra := x.readAhead(ctx, j.Files)
	defer ra.stop()
	tw := &tapeWriter{w: fw}
	for i, f := range j.Files {
		// A single stripe's bytes reach the drive through frames checked
		// against the chunks' stored CRCs, so the drive's entry CRC ties
		// the tape copy to the catalog's record without a pass of our
		// own; a striped file's CRC32C in file order is computed here.
		var dst io.Writer = tw
		cw := &crcWriter{w: tw}
		if !f.Single() {
			dst = cw
		}
		data, err := ra.take(ctx, i)
		switch {
		case err != nil:
		case data != nil:
			_, err = dst.Write(data)
			ra.release(i)
		default:
			err = x.readFile(ctx, f, dst)
		}
		if err != nil {
			fw.Abort()
			if tw.err != nil {
				return WriteResult{}, writeFailed(tw.err)
			}
			return WriteResult{}, &FileError{Index: i, Err: err}
		}
		res.CRCs[i] = cw.crc
	}
	if err := fw.Close(); err != nil {
		return WriteResult{}, writeFailed(err)
	}
	res.Seq, res.Start, res.EntryCRCs = fw.Seq(), fw.Start(), fw.EntryCRCs()
	return res, nil
}

// Read runs j: the tape range streams into the new disk object. The
// caller checks the mover's receipt.
func (x *Exec) Read(ctx context.Context, j ReadJob) (wire.Status, error) {
	if j.ReadThrough {
		if err := x.Lib.ReadThrough(ctx, j.Drive, j.Seq, j.Offset); err != nil {
			return wire.Status{}, err
		}
	}
	rd, err := x.Lib.ReadData(ctx, j.Drive, j.Seq, j.Offset, j.Length)
	if err != nil {
		return wire.Status{}, err
	}
	defer rd.Close()
	d := j.Dest
	conn, err := x.Pool.Get(ctx, d.Endpoint)
	if err != nil {
		return wire.Status{}, err
	}
	req := wire.Request{Op: token.OpWrite, Token: d.Token, Device: d.Device, Object: d.Object}
	st, err := conn.Write(ctx, req, rd, make([]byte, moverconn.FrameSize), nil)
	x.Pool.Put(conn)
	return st, err
}

// Verify runs j: the tape range is read and summed. Damage the library
// detects is reported in the result, not as an error.
func (x *Exec) Verify(ctx context.Context, j VerifyJob) (VerifyResult, error) {
	r, err := x.Lib.ReadData(ctx, j.Drive, j.Seq, j.Offset, j.Length)
	if err != nil {
		return VerifyResult{}, err
	}
	crc := crc32.New(wire.Castagnoli)
	n, err := io.Copy(crc, r)
	r.Close()
	res := VerifyResult{Length: n, CRC32C: crc.Sum32()}
	switch {
	case errors.Is(err, api.ErrCorrupt):
		res.Damage = err.Error()
	case err != nil:
		return res, err
	}
	return res, nil
}

// crcWriter passes bytes on and computes their CRC32C.
type crcWriter struct {
	w   io.Writer
	crc uint32
}

func (c *crcWriter) Write(p []byte) (int, error) {
	n, err := c.w.Write(p)
	c.crc = crc32.Update(c.crc, wire.Castagnoli, p[:n])
	return n, err
}

// readFile writes f's disk copy to w in file order, stripe unit by stripe
// unit, every byte checked against the CRCs stored with it (the mover
// verifies each chunk, the connection each frame).
func (x *Exec) readFile(ctx context.Context, f File, w io.Writer) error {
	if len(f.Stripes) == 0 {
		return api.Errorf(api.ErrOffline, "no disk copy to read")
	}
	// Every stripe streams from its mover in one request, a few units
	// ahead, while the units go to w in file order: asking for one unit
	// at a time left the movers idle while w (a tape drive) wrote, and w
	// idle while the next unit came. A file of one stripe takes the same
	// path, so its reading overlaps the drive's writing too.
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	width, unit := len(f.Stripes), f.StripeUnit
	if unit <= 0 {
		unit = 4 << 20
	}
	units := make([]chan []byte, width)
	errs := make([]error, width)
	lengths := make([]int64, width)
	for k, s := range f.Stripes {
		units[k] = make(chan []byte, readAheadPieces)
		lengths[k] = s.Length
	}
	limit := 0 // every stripe at once
	if moverconn.OneUnitEach(lengths, unit) {
		limit = stripeReaders
	}
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		moverconn.InOrder(ctx, width, limit, func(k int) {
			defer close(units[k])
			s := f.Stripes[k]
			uw := &unitWriter{ctx: ctx, unit: unit, piece: min(unit, maxPiece), left: s.Length, out: units[k]}
			buf := frameBufs.Get().(*[]byte)
			if errs[k] = x.readRange(ctx, s, 0, s.Length, uw, *buf); errs[k] == nil {
				errs[k] = uw.flush()
			}
			frameBufs.Put(buf)
		})
	}()
	var werr error
	short := -1
	for i, off := 0, int64(0); off < f.Size && werr == nil; i++ {
		// A unit comes in pieces, none crossing into the next unit.
		for need := min(unit, f.Size-off); need > 0 && werr == nil; {
			p, ok := <-units[i%width]
			if !ok { // that stripe's reader failed (errs says why, below) or came short
				short = i % width
				werr = fmt.Errorf("read %s/%s: stripe %d ended early", f.Stripes[short].Device, f.Stripes[short].Object, short)
				break
			}
			_, werr = w.Write(p)
			off += int64(len(p))
			need -= int64(len(p))
		}
	}
	if werr != nil {
		cancel() // the readers stop; their errors are ours
	}
	for _, ch := range units {
		for range ch { // drain: a reader ends once its stripe is sent or it sees the cancellation
		}
	}
	wg.Wait()
	if short >= 0 && errs[short] != nil {
		return errs[short]
	}
	if werr != nil {
		return werr
	}
	return errors.Join(errs...)
}

// readAheadPieces is how many pieces (a stripe unit, or maxPiece of a
// larger one) each stripe of a disk copy reads ahead of a migration's
// tape write.
const readAheadPieces = 2

// maxPiece bounds what a stripe's reader holds at once: a file joined
// from an S3 upload's parts has units as large as its parts (up to
// 5 GiB).
const maxPiece = 8 << 20

// stripeReaders is how many stripes a migration reads at once from a
// layout of one unit a stripe: four 8 MiB pieces in flight keep a drive
// streaming.
const stripeReaders = 4

// frameBufs are the buffers disk copies are read into, one frame each:
// a migration of small files reads one per file, and a fresh megabyte
// each time cost more CPU (zeroing it, collecting it) than the file.
var frameBufs = sync.Pool{New: func() any { b := make([]byte, moverconn.FrameSize); return &b }}

// unitWriter cuts a stripe's stream into stripe units, sent on out.
type unitWriter struct {
	ctx   context.Context
	unit  int64
	piece int64 // what is sent at once: the unit, or a part of it
	left  int64 // bytes of the stripe not yet sent: the last unit is only as large as they are
	at    int64 // position in the current unit
	out   chan<- []byte
	cur   []byte
}

func (u *unitWriter) Write(p []byte) (int, error) {
	n := len(p)
	for len(p) > 0 {
		// A piece ends at its size or at the unit's end, whichever is
		// first, so that no piece holds bytes of two units.
		end := min(u.piece, u.unit-u.at)
		if u.cur == nil {
			u.cur = make([]byte, 0, max(min(end, u.left), int64(len(p))))
		}
		k := min(int64(len(p)), end-int64(len(u.cur)))
		u.cur = append(u.cur, p[:k]...)
		p = p[k:]
		u.left -= k
		if int64(len(u.cur)) == end {
			if u.at += end; u.at == u.unit {
				u.at = 0
			}
			if err := u.flush(); err != nil {
				return n - len(p), err
			}
		}
	}
	return n, nil
}

// flush sends the unit being filled, if any.
func (u *unitWriter) flush() error {
	if len(u.cur) == 0 {
		return nil
	}
	select {
	case u.out <- u.cur:
		u.cur = nil
		return nil
	case <-u.ctx.Done():
		return u.ctx.Err()
	}
}

// readRange writes n bytes at off of one disk object to w, every chunk
// checked once against its stored CRC32C: by this reader, from the
// object's file when the mover is on this host and hands it over (one
// copy out of the page cache), else from frames that carry the stored
// CRCs. A chunk that fails the check is asked for again with
// Request.Verify, so that the mover reads and checks it at rest and
// reports damage there as corruption of the object (api.ErrCorrupt), the
// way a client's get does.
func (x *Exec) readRange(ctx context.Context, s Source, off, n int64, w io.Writer, buf []byte) error {
	req := wire.Request{Op: token.OpRead, Token: s.Token, Device: s.Device, Object: s.Object}
	// What has been delivered: a second try reads on from there. A
	// fixedBuffer counts itself, and stays a FrameSink.
	var dst io.Writer
	var got func() int64
	if fb, ok := w.(*fixedBuffer); ok {
		dst, got = fb, fb.count
	} else {
		cw := &moverconn.CountingWriter{W: w}
		dst, got = cw, func() int64 { return cw.N }
	}
	for {
		req.Offset, req.Length = off+got(), n-got()
		conn, err := x.Pool.Get(ctx, s.Endpoint)
		if err != nil {
			return fmt.Errorf("read %s/%s: %w", s.Device, s.Object, err)
		}
		st, err := conn.Read(ctx, req, dst, buf)
		x.Pool.Put(conn)
		var de *moverconn.DamagedError
		if errors.As(err, &de) && !req.Verify {
			req.Verify = true
			continue
		}
		if err != nil {
			return fmt.Errorf("read %s/%s: %w", s.Device, s.Object, err)
		}
		if st.Length != req.Length {
			return fmt.Errorf("read %s/%s: %d bytes at %d, want %d", s.Device, s.Object, st.Length, req.Offset, req.Length)
		}
		return nil
	}
}
