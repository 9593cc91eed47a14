package client

import (
	"context"
	"errors"
	"fmt"
	"hash"
	"io"
	"sync"

	"github.com/strata-storage/strata/internal/api"
	"github.com/strata-storage/strata/internal/moverconn"
	"github.com/strata-storage/strata/internal/token"
	"github.com/strata-storage/strata/internal/wire"
	"lukechampine.com/blake3/guts"
)

// Upload is a file being written as a stream: Create reserves its layout,
// the caller writes its bytes, Commit makes it visible. Unlike Put, whose
// source can be read again, an Upload cannot retry a stripe once its bytes
// have gone: a failed stream fails the upload (nothing becomes visible).
//
// Bytes arrive either in file order through Write, or stripe by stripe
// through Stripe(k), each stripe from its own goroutine: the second is how
// N writers fill one shared file in parallel (HPSS's parallel transfer:
// writer k owns stripe k, whose units are the file's blocks k, k+w, …).
// The two must not be mixed.
type Upload struct {
	c    *Client
	path string
	size int64
	o    PutOptions
	cr   api.CreateResponse
	ctx  context.Context
	stop context.CancelFunc
	off  int64     // file-order position of Write
	h    hash.Hash // fixity of Write's bytes; nil with NoFixity, per-stripe writes, or tree
	alg  string    // h's algorithm
	// tree, when set, is the BLAKE3 fixity built by the stripe streams
	// (see treeLender) instead of h.
	tree  *treeHash
	seq   bool // Write was used
	mu    sync.Mutex
	parts []*stripeStream
	done  bool
	file  *FileInfo
	// ended: every stripe's stream has ended (endStripes), with these
	// receipts, total size and errors.
	ended    bool
	receipts []api.SegmentReceipt
	stored   int64
	endErr   error
}

// Create starts writing a file of at most size bytes at path: size
// reserves the space and fixes the layout, and Commit stores what was
// written (laid out the same way, so stripe by stripe the amounts must be
// those of a file of that length). o.Progress,
// o.COS, o.Stripes, o.StripeUnit, o.Mode, o.Overwrite and o.Rewrite apply
// as for Put.
func (c *Client) Create(ctx context.Context, path string, size int64, o PutOptions) (*Upload, error) {
	var h hash.Hash
	var alg string
	if !o.NoFixity {
		var err error
		if h, alg, err = newHash(o.Fixity); err != nil {
			return nil, fmt.Errorf("put %s: %w", path, err)
		}
	}
	var cr api.CreateResponse
	err := c.do(ctx, "POST", "/v1/create", nil, api.CreateRequest{Path: path, Size: size, COS: o.COS, Stripes: o.Stripes, StripeUnit: o.StripeUnit,
		Overwrite: o.Overwrite, Rewrite: o.Rewrite, Mode: o.Mode, Xattrs: o.Xattrs}, &cr)
	if err != nil {
		return nil, err
	}
	u := &Upload{c: c, path: path, size: size, o: o, cr: cr, file: cr.File, h: h, alg: alg}
	if alg == FixityBLAKE3 && treeTiles(cr.StripeUnit) {
		u.h, u.tree = nil, newTreeHash()
	}
	u.ctx, u.stop = context.WithCancel(ctx)
	u.parts = make([]*stripeStream, len(cr.Stripes))
	return u, nil
}

// Stripes is the layout's stripe width; StripeUnit its unit. A file
// smaller than width × unit has fewer stripes than asked.
func (u *Upload) Stripes() int      { return len(u.cr.Stripes) }
func (u *Upload) StripeUnit() int64 { return u.cr.StripeUnit }

// StripeLength is how many bytes stripe k takes.
func (u *Upload) StripeLength(k int) int64 { return u.cr.Stripes[k].Length }

// Write appends p in file order.
func (u *Upload) Write(p []byte) (int, error) {
	u.seq = true
	if u.off+int64(len(p)) > u.size {
		return 0, api.Errorf(api.ErrInvalid, "write %s: %d bytes past the declared size %d", u.path, u.off+int64(len(p))-u.size, u.size)
	}
	if u.h != nil {
		u.h.Write(p)
	}
	w, unit := int64(len(u.cr.Stripes)), u.cr.StripeUnit
	n := 0
	for n < len(p) {
		i := u.off / unit
		m := int(min(int64(len(p)-n), unit-u.off%unit))
		s, err := u.stripe(int(i % w))
		if err != nil {
			return n, err
		}
		if _, err := s.Write(p[n : n+m]); err != nil {
			return n, err
		}
		n += m
		u.off += int64(m)
	}
	return n, nil
}

// Stripe returns the writer of stripe k's bytes, in stripe order. Each
// stripe may be written from its own goroutine.
func (u *Upload) Stripe(k int) (io.Writer, error) {
	if u.seq {
		return nil, api.Errorf(api.ErrInvalid, "upload %s: Stripe after Write", u.path)
	}
	u.mu.Lock()
	u.h, u.tree = nil, nil // bytes arrive out of file order: no whole-file digest
	u.mu.Unlock()
	return u.stripe(k)
}

func (u *Upload) stripe(k int) (*stripeStream, error) {
	if k < 0 || k >= len(u.parts) {
		return nil, api.Errorf(api.ErrInvalid, "upload %s: no stripe %d (width %d)", u.path, k, len(u.parts))
	}
	u.mu.Lock()
	defer u.mu.Unlock()
	if u.done {
		return nil, api.Errorf(api.ErrInvalid, "upload %s: already committed or aborted", u.path)
	}
	if u.parts[k] == nil {
		var tl *treeLender
		if u.tree != nil && u.seq {
			tl = &treeLender{t: u.tree, stripe: int64(k), width: int64(len(u.parts)), unit: u.cr.StripeUnit}
		}
		u.parts[k] = u.c.startStripe(u.ctx, u.cr.Stripes[k], u.cr.StripeUnit, u.o.Progress, tl)
	}
	return u.parts[k], nil
}

// Commit ends every stripe, checks the movers' receipts and makes the file
// visible. On failure the upload is aborted.
func (u *Upload) Commit(ctx context.Context) (*FileInfo, error) {
	u.mu.Lock()
	if u.done {
		u.mu.Unlock()
		if u.file != nil {
			return u.file, nil
		}
		return nil, api.Errorf(api.ErrInvalid, "upload %s: aborted", u.path)
	}
	u.done = true
	u.mu.Unlock()
	if u.cr.File != nil { // empty file: committed at create
		return u.file, nil
	}
	fi, err := u.commit(ctx)
	if err != nil {
		u.abort()
		return nil, err
	}
	u.file = fi
	return fi, nil
}

// endStripes ends every stripe's stream, once, and keeps the movers'
// answers: Commit sends them, and a tree fixity is complete only once
// every stream has hashed its last bytes.
func (u *Upload) endStripes() ([]api.SegmentReceipt, int64, error) {
	if u.ended {
		return u.receipts, u.stored, u.endErr
	}
	u.ended = true
	u.receipts = make([]api.SegmentReceipt, len(u.parts))
	var errs []error
	for k, s := range u.parts {
		t := u.cr.Stripes[k]
		if s == nil {
			s = u.c.startStripe(u.ctx, t, 0, nil, nil) // a stripe nobody wrote: empty
		}
		st, err := s.finish()
		if err != nil {
			errs = append(errs, fmt.Errorf("stripe %d (device %s): %w", k, t.Device, err))
			continue
		}
		u.receipts[k] = api.SegmentReceipt{Stripe: t.Stripe, Length: st.Length, CRC32C: st.CRC32C, Receipt: st.Receipt}
		u.stored += st.Length
	}
	if err := errors.Join(errs...); err != nil {
		u.endErr = fmt.Errorf("put %s: %w", u.path, err)
	}
	return u.receipts, u.stored, u.endErr
}

// fixity is the whole file's digest as Commit records it: "" with
// NoFixity or per-stripe writes.
func (u *Upload) fixity() (string, error) {
	switch {
	case u.tree != nil && u.seq:
		_, size, err := u.endStripes()
		if err != nil || size == 0 {
			return "", err
		}
		sum, ok := u.tree.sum(size)
		if !ok { // the streams lend whole frames: not reached
			return "", fmt.Errorf("put %s: the BLAKE3 pieces the stripes hashed do not make up the file", u.path)
		}
		return sum, nil
	case u.h != nil && u.seq:
		return fixityString(u.alg, u.h), nil
	}
	return "", nil
}

func (u *Upload) commit(ctx context.Context) (*FileInfo, error) {
	receipts, size, err := u.endStripes()
	if err != nil {
		return nil, err
	}
	fixity, err := u.fixity()
	if err != nil {
		return nil, err
	}
	var fi FileInfo
	err = u.c.do(ctx, "POST", "/v1/commit", nil, api.CommitRequest{Bitfile: u.cr.Bitfile, Epoch: u.cr.Epoch, Path: u.path, Size: size, Segments: receipts,
		Fixity: fixity, COS: u.o.COS, Overwrite: u.o.Overwrite, Rewrite: u.o.Rewrite, Mode: u.o.Mode, Xattrs: u.o.Xattrs}, &fi)
	if err != nil {
		return nil, err
	}
	return &fi, nil
}

// Fixity is the whole-file digest of what Write has been given, as Commit
// will record it ("" with NoFixity or per-stripe writes). It ends the
// writes: the stripes' streams hash what they send (treeLender), so the
// digest is known once they have sent it all.
func (u *Upload) Fixity() string {
	f, _ := u.fixity() // an error is Commit's to report
	return f
}

// SetXattrs gives the attributes Commit will make the file's (see
// PutOptions.Xattrs): what a gateway learns only from the data, an
// S3 ETag, goes in with it.
func (u *Upload) SetXattrs(attrs map[string][]byte) { u.o.Xattrs = attrs }

// Abort gives up the upload: nothing becomes visible and the space is
// given back. Aborting a committed upload does nothing.
func (u *Upload) Abort() {
	u.mu.Lock()
	if u.done {
		u.mu.Unlock()
		return
	}
	u.done = true
	u.mu.Unlock()
	u.abort()
}

func (u *Upload) abort() {
	u.stop()
	for _, s := range u.parts {
		if s != nil {
			s.finish()
		}
	}
	if u.cr.File == nil {
		u.c.do(context.Background(), "POST", "/v1/abort", nil, api.AbortRequest{Bitfile: u.cr.Bitfile}, nil)
	}
}

// stripeStream feeds one stripe's mover connection through a buffered
// pipe: the sender reads it a frame at a time, so small writes still
// travel as full frames, and a writer can go on to the next stripe while
// this one sends.
type stripeStream struct {
	p      *pipe
	result chan stripeResult
	err    error
}

type stripeResult struct {
	st  wire.Status
	err error
}

func (c *Client) startStripe(ctx context.Context, t api.StripeTarget, unit int64, progress func(int64), tl *treeLender) *stripeStream {
	// A stripe unit of buffer: a writer in file order hands each stripe
	// a whole unit and moves on. For a mover on this host the buffer is a
	// ring the mover reads itself (moverconn.Ring); a ring that cannot be
	// made leaves the socket.
	var ring *moverconn.Ring
	if t.Length >= handOverMin && c.pool.HandsOver(endpoint(t)) {
		ring, _ = c.pool.Ring(ringSize(t.Length, unit))
	}
	var pr *pipe
	if ring != nil {
		pr = newPipeOn(ring.Bytes())
	} else {
		pr = newPipe(int(min(max(unit, moverconn.FrameSize), maxPipe)))
	}
	var src lendReader = pr
	if tl != nil {
		tl.p = pr
		src = tl
	}
	s := &stripeStream{p: pr, result: make(chan stripeResult, 1)}
	go func() {
		var report func(int)
		if progress != nil {
			report = func(n int) { progress(int64(n)) }
		}
		st, err := c.streamStripe(ctx, t, src, ring, report)
		pr.CloseRead(errStripeDone(err))
		// Closed for reading, the pipe no longer touches the ring. Only a
		// ring whose mover has answered may serve another stream.
		switch {
		case ring != nil && err == nil:
			c.pool.PutRing(ring)
		case ring != nil:
			ring.Close()
		}
		s.result <- stripeResult{st, err}
	}()
	return s
}

// maxPipe bounds a stripe stream's buffer.
const maxPipe = 8 << 20

// ringSize is the ring of a stripe of n bytes in units of unit: two units,
// so the writer fills one while the mover takes the other, but no more
// than the stripe needs (whole frames) or maxPipe.
func ringSize(n, unit int64) int {
	f := int64(moverconn.FrameSize)
	return int(min(max(2*unit, 2*f), maxPipe, max(f, (n+f-1)/f*f)))
}

// errStripeDone is what a writer sees when its stripe's stream has ended.
func errStripeDone(err error) error {
	if err == nil {
		return errors.New("stripe already complete")
	}
	return err
}

// lendReader is a stripe stream's source: a pipe, or a treeLender over
// one. A connection lends from it (moverconn.Lender).
type lendReader interface {
	io.Reader
	moverconn.Lender
}

// streamStripe sends what src lends as stripe target t: as spans of ring
// where it is set and the connection reaches the mover's Unix socket, else
// through the connection.
func (c *Client) streamStripe(ctx context.Context, t api.StripeTarget, src lendReader, ring *moverconn.Ring, report func(int)) (wire.Status, error) {
	conn, err := c.pool.Get(ctx, endpoint(t))
	if err != nil {
		return wire.Status{}, err
	}
	req := wire.Request{Op: token.OpWrite, Token: t.Token, Device: t.Device, Object: t.Object}
	var st wire.Status
	if ring != nil && conn.HandsOver() {
		st, err = conn.WriteRing(ctx, req, ring, src, report)
	} else {
		bp := bufPool.Get().(*[]byte)
		st, err = conn.Write(ctx, req, src, *bp, report)
		bufPool.Put(bp)
	}
	c.pool.Put(conn)
	return st, err
}

func (s *stripeStream) Write(p []byte) (int, error) {
	if s.err != nil {
		return 0, s.err
	}
	n, err := s.p.Write(p)
	if err != nil {
		s.err = err
	}
	return n, err
}

// finish flushes and closes the stream and waits for the mover's answer.
func (s *stripeStream) finish() (wire.Status, error) {
	s.p.CloseWrite(s.err) // nil: the mover sees the end of the stripe
	r := <-s.result
	s.result <- r // finish may be called again (abort after a failed commit)
	if r.err != nil {
		return r.st, r.err
	}
	return r.st, s.err
}

// treeTiles reports whether an upload with stripe unit unit may build its
// BLAKE3 fixity in its stripes' streams (treeLender): a unit of whole
// frames, so that every frame a stream lends is a 1 MiB-aligned run of
// the file, a subtree of BLAKE3's tree.
func treeTiles(unit int64) bool {
	return unit > 0 && unit%moverconn.FrameSize == 0 && moverconn.FrameSize%guts.ChunkSize == 0 && maxPipe%moverconn.FrameSize == 0
}

// treeLender is a stripe's pipe, lent to its mover connection frame by
// frame (moverconn.Lender), that hashes each frame into the upload's
// BLAKE3 tree before lending it: the hashing runs in the stream's own
// goroutine, beside the others' and beside the writer, instead of in
// Upload.Write (where a FUSE mount's write waited for it). The bytes
// hashed are the bytes sent.
type treeLender struct {
	p                   *pipe
	t                   *treeHash
	stripe, width, unit int64
	off                 int64 // in the stripe's stream
	short               bool  // a frame shorter than FrameSize was lent
}

func (l *treeLender) Lend(max int) ([]byte, error) {
	b, err := l.p.Lend(max)
	if len(b) > 0 {
		if l.short || max != moverconn.FrameSize {
			l.t.spoil() // a frame after a short one, or frames of another size: not subtrees
		}
		l.short = len(b) < moverconn.FrameSize
		// The stripe's m-th unit is the file's unit m·width + stripe.
		at := (l.off/l.unit*l.width+l.stripe)*l.unit + l.off%l.unit
		node := blake3Node(b, uint64(at/guts.ChunkSize))
		l.t.mu.Lock()
		l.t.pieces[at] = treePiece{n: int64(len(b)), node: node}
		l.t.mu.Unlock()
		l.off += int64(len(b))
	}
	return b, err
}

func (l *treeLender) Return(n int) { l.p.Return(n) }

// Read is not how a stream sends (it lends); a reader would bypass the
// hashing, so the tree is given up.
func (l *treeLender) Read(b []byte) (int, error) {
	l.t.spoil()
	return l.p.Read(b)
}
