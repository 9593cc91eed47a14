package client

import (
	"context"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"os"
	"strings"
	"sync"

	"github.com/strata-storage/strata/internal/api"
	"github.com/strata-storage/strata/internal/moverconn"
	"github.com/strata-storage/strata/internal/token"
	"github.com/strata-storage/strata/internal/wire"
)

// PutOptions tune a Put.
type PutOptions struct {
	COS     string // class of service; "" for the default
	Stripes int    // stripe width override; 0 for the class's
	// StripeUnit overrides the class's stripe unit (bytes); 0 keeps it.
	StripeUnit int64
	Overwrite  bool // replace an existing file atomically
	// Rewrite writes into an existing file as write(2) does (the POSIX
	// front ends' store of a file opened for writing): write permission
	// on the file suffices, and it keeps its owner, group, mode and
	// class. A missing file is created.
	Rewrite bool
	Mode    uint32 // 0 for 0644
	// Fixity names the whole-file hash to record: FixityBLAKE3 (the
	// default, for "") or FixitySHA256.
	Fixity string
	// NoFixity records no whole-file hash (CRC32C still protects every
	// frame and segment).
	NoFixity bool
	// Progress is called with byte counts as data is sent, from several
	// goroutines.
	Progress func(n int64)
	// Xattrs, when not nil, become the file's user.* attributes in the
	// commit that makes it visible (those it had are dropped): a gateway's
	// metadata arrives with the data, never after it. An Upload may set
	// them later, before Commit (SetXattrs).
	Xattrs map[string][]byte
}

// Put stores size bytes read from src at path. The file becomes visible only
// when every stripe is durable on its mover and the core has committed it;
// on any failure nothing is visible and the space is given back.
//
// A put whose core stopped before the commit (a standby took over, or it
// restarted), or went away with its create, or one of whose movers could
// no longer be reached (by the core either), begins again from src, which
// can be read again: the first attempt left nothing visible. One whose
// core went away with the commit asks the core serving now whether it
// committed.
func (c *Client) Put(ctx context.Context, path string, src io.ReaderAt, size int64, o PutOptions) (*FileInfo, error) {
	for attempt := 1; ; attempt++ {
		fi, err := c.put(ctx, path, src, size, o)
		// A create the core went away with left at most a pending write,
		// which no one sees and the next core reclaims; so does a put
		// one of whose movers went away (its host died), which the core,
		// having checked, now places elsewhere.
		if err == nil || attempt == maxRestarts || !(errors.Is(err, api.ErrRestarted) || broken(err) || c.replace(ctx, err)) {
			return fi, err
		}
	}
}

// maxRestarts bounds the attempts of a put across core restarts.
const maxRestarts = 3

func (c *Client) put(ctx context.Context, path string, src io.ReaderAt, size int64, o PutOptions) (*FileInfo, error) {
	if _, err := fixityAlg(o.Fixity); err != nil && !o.NoFixity {
		return nil, fmt.Errorf("put %s: %w", path, err)
	}
	q := api.CreateRequest{Path: path, Size: size, COS: o.COS, Stripes: o.Stripes, StripeUnit: o.StripeUnit,
		Overwrite: o.Overwrite, Rewrite: o.Rewrite, Mode: o.Mode, Xattrs: o.Xattrs}
	if err := validUTF8(q, nil); err != nil {
		return nil, err
	}
	cr, err := c.createFile(ctx, q)
	if err != nil {
		return nil, err
	}
	if cr.File != nil { // empty file: already committed
		return cr.File, nil
	}
	fi, err := c.write(ctx, path, src, size, cr, o)
	if err != nil {
		// Tell the core now so the space returns at once; if this fails
		// too, the lease expiry reclaims it.
		c.do(context.WithoutCancel(ctx), "POST", "/v1/abort", nil, api.AbortRequest{Bitfile: cr.Bitfile}, nil)
		return nil, err
	}
	return fi, nil
}

func (c *Client) write(ctx context.Context, path string, src io.ReaderAt, size int64, cr api.CreateResponse, o PutOptions) (*FileInfo, error) {
	if len(cr.Stripes) == 1 && size < handOverMin { // less than a frame, and too small to hand over
		return c.writeSmall(ctx, path, src, size, cr, o)
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	w := len(cr.Stripes)
	receipts := make([]api.SegmentReceipt, w)
	errs := make([]error, w)
	tree := c.treeHashFor(src, cr, o)
	stripeSrc := src
	if tree != nil {
		stripeSrc = tree.readerAt(src)
	}
	var wg sync.WaitGroup
	for k, t := range cr.Stripes {
		wg.Add(1)
		go func() {
			defer wg.Done()
			receipts[k], errs[k] = c.putStripe(ctx, stripeSrc, size, cr.StripeUnit, w, k, t, tree, o.Progress)
			if errs[k] != nil {
				cancel() // one stripe failed: stop the others
			}
		}()
	}
	var fixity string
	var crcs []uint32
	var ferr error
	if !o.NoFixity && tree == nil {
		fixity, crcs, ferr = fixityOf(ctx, o.Fixity, src, size, cr.StripeUnit, w)
	}
	wg.Wait()
	for k, err := range errs {
		if err != nil && !errors.Is(err, context.Canceled) {
			t := cr.Stripes[k]
			return nil, fmt.Errorf("put %s: stripe %d (device %s): %w", path, k, t.Device, err)
		}
	}
	if err := errors.Join(errors.Join(errs...), ferr); err != nil {
		return nil, fmt.Errorf("put %s: %w", path, err)
	}
	if tree != nil {
		var ok bool
		if fixity, ok = tree.sum(size); !ok {
			if fixity, crcs, ferr = fixityOf(ctx, o.Fixity, src, size, cr.StripeUnit, w); ferr != nil {
				return nil, fmt.Errorf("put %s: %w", path, ferr)
			}
		}
	}
	// A fixity hashed by fixityOf comes from a second reading of the
	// source; the movers stored what the first reading (theirs, or the
	// streams') gave. If the two differ, the recorded hash would not
	// describe the stored bytes.
	for k, crc := range crcs {
		if receipts[k].CRC32C != crc {
			return nil, fmt.Errorf("put %s: %w: stripe %d was stored with crc32c %08x, the file now reads %08x; nothing was committed", path, ErrSourceChanged, k, receipts[k].CRC32C, crc)
		}
	}
	return c.commit(ctx, path, size, cr, receipts, fixity, o)
}

func (c *Client) commit(ctx context.Context, path string, size int64, cr api.CreateResponse, receipts []api.SegmentReceipt, fixity string, o PutOptions) (*FileInfo, error) {
	fi, err := c.commitFile(ctx, api.CommitRequest{Bitfile: cr.Bitfile, Epoch: cr.Epoch, Path: path, Size: size, Segments: receipts,
		Fixity: fixity, COS: o.COS, Overwrite: o.Overwrite, Rewrite: o.Rewrite, Mode: o.Mode, Xattrs: o.Xattrs})
	if broken(err) && fixity != "" {
		// The core went away with the commit, which may have run: the
		// core serving now says. The file as committed has our size and
		// fixity; if it is not there, the write was never committed
		// (and is reclaimed), and the put begins again (see Put).
		if got, serr := c.Stat(ctx, path); serr == nil && got.Size == size && got.Fixity == fixity {
			return got, nil
		}
		return nil, fmt.Errorf("commit %s: %w (%v)", path, api.ErrRestarted, err)
	}
	if err != nil {
		return nil, err
	}
	return &fi, nil
}

// broken reports whether err is a request sent to a core that went away
// before it answered.
func broken(err error) bool {
	var u *unreachable
	return errors.As(err, &u) && !u.unsent
}

// writeSmall stores a file of one stripe and at most one frame: read once
// into memory, hashed from there and sent in one flush, all in the
// caller's goroutine. A put of many small files is bounded by per-file
// overheads, not bytes; the stream machinery of large files (read-ahead
// goroutines, a second reading for the fixity) costs a small file more
// than its data does.
func (c *Client) writeSmall(ctx context.Context, path string, src io.ReaderAt, size int64, cr api.CreateResponse, o PutOptions) (*FileInfo, error) {
	bp := bufPool.Get().(*[]byte)
	defer bufPool.Put(bp)
	p := (*bp)[:size]
	if n, err := src.ReadAt(p, 0); int64(n) < size {
		if err == nil || err == io.EOF {
			err = io.ErrUnexpectedEOF
		}
		return nil, fmt.Errorf("put %s: read source: %d of %d bytes: %w", path, n, size, err)
	}
	var fixity string
	if !o.NoFixity {
		var err error
		if fixity, err = fixityOfBytes(o.Fixity, p); err != nil {
			return nil, fmt.Errorf("put %s: %w", path, err)
		}
	}
	t := cr.Stripes[0]
	receipt, err := c.sendStripe(ctx, t, o.Progress, func(conn *moverconn.Conn, req wire.Request, report func(int)) (wire.Status, error) {
		st, err := conn.WriteBytes(ctx, req, p)
		if err == nil {
			report(len(p))
		}
		return st, err
	})
	if err != nil {
		return nil, fmt.Errorf("put %s: stripe 0 (device %s): %w", path, t.Device, err)
	}
	return c.commit(ctx, path, size, cr, []api.SegmentReceipt{receipt}, fixity, o)
}

// fixityOf hashes the source in file order, for a put whose fixity a
// treeHash cannot assemble from its streams: SHA-256 is no tree, and a
// mover that reads a handed-over file itself shows the client nothing. It
// re-reads the source (from the page cache) beside the stripes. Reading
// runs a buffer ahead of hashing, so the hash, the longest single thread
// of such a put, does nothing else but the CRC32C of each stripe (of width
// w and stripe unit unit) as this reading sees it, for the caller to hold
// against what the movers stored (CRC32C runs at several times the hash's
// rate).
func fixityOf(ctx context.Context, alg string, src io.ReaderAt, size, unit int64, w int) (string, []uint32, error) {
	h, alg, err := newHash(alg)
	if err != nil {
		return "", nil, err
	}
	crcs := make([]uint32, w)
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	bp := bufPool.Get().(*[]byte)
	chunks := moverconn.ReadAhead(ctx, io.NewSectionReader(src, 0, size), *bp)
	defer func() {
		for ch := range chunks {
			ch.Release()
		}
		bufPool.Put(bp)
	}()
	var off int64
	for ch := range chunks {
		h.Write(ch.P)
		for p := ch.P; len(p) > 0; {
			// The piece of p up to the end of the stripe unit at off.
			n := min(int64(len(p)), unit-off%unit)
			k := (off / unit) % int64(w)
			crcs[k] = crc32.Update(crcs[k], wire.Castagnoli, p[:n])
			p, off = p[n:], off+n
		}
		ch.Release()
		if ch.Err != nil && ch.Err != io.EOF {
			return "", nil, fmt.Errorf("read source at %d: %w", off, ch.Err)
		}
	}
	if err := ctx.Err(); err != nil {
		return "", nil, err
	}
	if off != size {
		return "", nil, fmt.Errorf("read source: %d of %d bytes: %w", off, size, io.ErrUnexpectedEOF)
	}
	return fixityString(alg, h), crcs, nil
}

// attemptsError reports the last failure, with the earlier ones when the
// transfer was retried (the first usually says why).
func attemptsError(errs []error) error {
	if len(errs) == 0 {
		return api.Errorf(api.ErrCorrupt, "mover returned fewer bytes than the catalog records")
	}
	last := errs[len(errs)-1]
	if len(errs) == 1 {
		return last
	}
	msgs := make([]string, len(errs)-1)
	for i, e := range errs[:len(errs)-1] {
		msgs[i] = e.Error()
	}
	return fmt.Errorf("%w (after %d attempts; earlier: %s)", last, len(errs), strings.Join(msgs, "; "))
}

var bufPool = sync.Pool{New: func() any { b := make([]byte, moverconn.FrameSize); return &b }}

// handOverMin is the smallest stripe a put passes to a mover on its host as
// a file: below it, the extra round trip costs more than the copies saved.
const handOverMin = 1 << 20

// handOverFile returns src as a file a mover on this host may read a
// stripe of n bytes from, or nil to stream it.
func handOverFile(src io.ReaderAt, n int64) *os.File {
	f, ok := src.(*os.File)
	if !ok || n < handOverMin {
		return nil
	}
	if fi, err := f.Stat(); err != nil || !fi.Mode().IsRegular() {
		return nil
	}
	return f
}

// treeHashFor returns the hash a put assembles from its streams' readings
// (see treeHash), or nil when the put hashes by a reading of its own: no
// fixity, SHA-256 (not a tree), or a stripe the mover will read from the
// file itself.
func (c *Client) treeHashFor(src io.ReaderAt, cr api.CreateResponse, o PutOptions) *treeHash {
	if o.NoFixity || (o.Fixity != "" && o.Fixity != FixityBLAKE3) {
		return nil
	}
	for _, t := range cr.Stripes {
		if handOverFile(src, t.Length) != nil && c.pool.HandsOver(endpoint(t)) {
			return nil
		}
	}
	return newTreeHash()
}

// putStripe stores stripe k of src on target t. tree, when not nil, hashes
// what src reads; an attempt after the first spoils it.
func (c *Client) putStripe(ctx context.Context, src io.ReaderAt, size, unit int64, w, k int, t api.StripeTarget, tree *treeHash, progress func(int64)) (api.SegmentReceipt, error) {
	bp := bufPool.Get().(*[]byte)
	defer bufPool.Put(bp)
	part := wire.Source{Size: size, Unit: unit, Width: w, Stripe: k}
	attempts := 0
	return c.sendStripe(ctx, t, progress, func(conn *moverconn.Conn, req wire.Request, report func(int)) (wire.Status, error) {
		if attempts++; attempts > 1 && tree != nil {
			tree.spoil()
		}
		if f := handOverFile(src, t.Length); f != nil && conn.HandsOver() {
			req.Source = &part
			return conn.WriteFile(ctx, req, f, report)
		}
		return conn.Write(ctx, req, wire.NewStripeReader(src, part), *bp, report)
	})
}

// sendStripe stores stripe target t with send, on a pooled connection to
// its mover, retrying what may succeed on another attempt.
func (c *Client) sendStripe(ctx context.Context, t api.StripeTarget, progress func(int64), send func(*moverconn.Conn, wire.Request, func(int)) (wire.Status, error)) (api.SegmentReceipt, error) {
	req := wire.Request{Op: token.OpWrite, Token: t.Token, Device: t.Device, Object: t.Object}
	var attempts []error // every attempt's failure, so a retried failure explains itself
	for attempt := 0; attempt <= c.Retries; attempt++ {
		if attempt > 0 {
			if err := backoff(ctx, attempt); err != nil {
				return api.SegmentReceipt{}, err
			}
		}
		var sent int64
		report := func(n int) {
			sent += int64(n)
			if progress != nil {
				progress(int64(n))
			}
		}
		conn, err := c.pool.Get(ctx, endpoint(t))
		if err == nil {
			var st wire.Status
			st, err = send(conn, req, report)
			c.pool.Put(conn)
			if err == nil {
				if st.Length != t.Length {
					return api.SegmentReceipt{}, api.Errorf(api.ErrInvalid, "stripe %d: wrote %d bytes, layout wants %d (did the source change size?)", t.Stripe, st.Length, t.Length)
				}
				return api.SegmentReceipt{Stripe: t.Stripe, Length: st.Length, CRC32C: st.CRC32C, Receipt: st.Receipt}, nil
			}
		}
		if progress != nil && sent > 0 {
			progress(-sent) // the retry resends it
		}
		attempts = append(attempts, err)
		if !retryable(err) {
			break
		}
	}
	err := attemptsError(attempts)
	if moverconn.IsDialError(attempts[len(attempts)-1]) {
		return api.SegmentReceipt{}, &moverDown{device: t.Device, err: err}
	}
	return api.SegmentReceipt{}, err
}

// moverDown is a stripe whose mover could not be connected to at the end.
type moverDown struct {
	device string
	err    error
}

func (e *moverDown) Error() string { return e.err.Error() }
func (e *moverDown) Unwrap() error { return e.err }

// replace reports a mover a put could not reach (err, a moverDown) and
// says whether the put may begin again elsewhere: the core could not reach
// it either and places no new data on it.
func (c *Client) replace(ctx context.Context, err error) bool {
	var md *moverDown
	if !errors.As(err, &md) {
		return false
	}
	var r api.UnreachableReply
	return c.do(ctx, "POST", "/v1/unreachable", nil, api.UnreachableReport{Device: md.device}, &r) == nil && !r.Reachable
}
