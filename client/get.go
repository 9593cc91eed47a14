package client

import (
	"context"
	"errors"
	"fmt"
	"hash"
	"hash/crc32"
	"io"
	"sync"

	"github.com/strata-storage/strata/internal/api"
	"github.com/strata-storage/strata/internal/moverconn"
	"github.com/strata-storage/strata/internal/token"
	"github.com/strata-storage/strata/internal/wire"
)

// GetOptions tune a Get.
type GetOptions struct {
	// VerifyFixity recomputes the whole-file hash recorded at put (BLAKE3
	// or SHA-256) and fails if it differs. (CRC32C is always verified.)
	VerifyFixity bool
	// Progress is called with byte counts as data is written to dst.
	Progress func(n int64)
	// NoWait makes a get of a file that is on tape only queue its recall
	// and fail at once (errors.Is(err, ErrOffline)) instead of waiting.
	NoWait bool
	// NoRecall makes a get of a file on tape only fail at once with
	// ErrOffline and queue nothing: S3's GET of an archived object, which
	// only an explicit restore recalls.
	NoRecall bool
	// Staging is called while a get waits for a recall, each time the
	// recall's state is polled.
	Staging func(StageStatus)
}

// readAhead is how many frames each stripe may run ahead of the writer.
const readAhead = 8

// Get writes the file at path to dst in order, reading all stripes in
// parallel. Corrupt data is never written: a checksum failure stops the
// transfer with an error naming the file and segment.
func (c *Client) Get(ctx context.Context, path string, dst io.Writer, o GetOptions) (*FileInfo, error) {
	or, err := c.open(ctx, path, o)
	if err != nil {
		return nil, err
	}
	fi := or.File
	if fi.Size == 0 {
		return &fi, nil
	}
	var h hash.Hash
	var alg string
	if o.VerifyFixity && fi.Fixity != "" {
		if h, alg, err = recordedHash(fi.Fixity); err != nil {
			return nil, fmt.Errorf("get %s: %w", path, err)
		}
	}
	out := &moverconn.CountingWriter{W: dst}
	err = c.get(ctx, path, or, out, h, o.Progress)
	// A copy damaged at rest: once the core has it repaired (see repair),
	// the rest comes from the good copy.
	for tries := 0; err != nil && tries < maxRepairs; tries++ {
		if or, err = c.repair(ctx, path, or, err, o); err == nil {
			err = c.resume(ctx, path, or, out.N, &hashWriter{w: out, h: h, progress: o.Progress}, o)
		}
	}
	if err != nil {
		return nil, err
	}
	return &fi, checkFixity(path, &fi, alg, h)
}

// get writes the file laid out as or to dst, all stripes read in parallel.
func (c *Client) get(ctx context.Context, path string, or api.OpenResponse, dst io.Writer, h hash.Hash, progress func(int64)) error {
	fi := or.File
	if len(or.Stripes) == 1 {
		t := or.Stripes[0]
		if err := c.readSegment(ctx, t, &directSink{dst: dst, h: h, progress: progress}); err != nil {
			return fmt.Errorf("get %s: segment 0 (device %s, object %s): %w", path, t.Device, t.Object, err)
		}
		return nil
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	w := len(or.Stripes)
	streams := make([]chan []byte, w)
	errs := make([]error, w)
	lengths := make([]int64, w)
	for k, t := range or.Stripes {
		streams[k] = make(chan []byte, readAhead)
		lengths[k] = t.Length
	}
	limit := 0 // every stripe at once
	if moverconn.OneUnitEach(lengths, or.StripeUnit) {
		limit = moverconn.MaxStripeReaders
	}
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		moverconn.InOrder(ctx, w, limit, func(k int) {
			defer close(streams[k])
			errs[k] = c.getStripe(ctx, or.Stripes[k], streams[k])
			if errs[k] != nil {
				cancel()
			}
		})
	}()
	werr := assemble(ctx, dst, streams, fi.Size, or.StripeUnit, h, progress)
	if werr != nil {
		// Stop the stripes still reading. After a whole file they are all
		// finishing on their own: cancelling then would catch some at
		// their last frame and cost their pooled connections.
		cancel()
	}
	// Drain so stripe goroutines blocked on a full channel can exit.
	for _, s := range streams {
		for range s {
		}
	}
	wg.Wait()
	for k, err := range errs {
		if err != nil && !errors.Is(err, context.Canceled) {
			t := or.Stripes[k]
			return fmt.Errorf("get %s: segment %d (device %s, object %s): %w", path, k, t.Device, t.Object, err)
		}
	}
	if werr != nil {
		return fmt.Errorf("get %s: %w", path, werr)
	}
	return nil
}

// hashWriter passes bytes on, adding them to a fixity hash (if any) and
// reporting progress (if asked).
type hashWriter struct {
	w        io.Writer
	h        hash.Hash
	progress func(int64)
}

func (hw *hashWriter) Write(p []byte) (int, error) {
	n, err := hw.w.Write(p)
	if hw.h != nil {
		hw.h.Write(p[:n])
	}
	if hw.progress != nil {
		hw.progress(int64(n))
	}
	return n, err
}

// open fetches a file's read layout, waiting for its recall from tape
// unless o.NoWait.
func (c *Client) open(ctx context.Context, path string, o GetOptions) (api.OpenResponse, error) {
	var or api.OpenResponse
	err := c.do(ctx, "GET", "/v1/open", pathQuery(path), nil, &or)
	if errors.Is(err, api.ErrOffline) && !o.NoRecall {
		if err = c.awaitRecall(ctx, path, o); err == nil {
			err = c.do(ctx, "GET", "/v1/open", pathQuery(path), nil, &or)
		}
	}
	return or, err
}

// checkFixity compares the recomputed whole-file digest, if any, with the
// one recorded at put.
func checkFixity(path string, fi *FileInfo, alg string, h hash.Hash) error {
	if h == nil {
		return nil
	}
	if got := fixityString(alg, h); got != fi.Fixity {
		return api.Errorf(api.ErrCorrupt, "get %s: fixity %s, recorded %s", path, got, fi.Fixity)
	}
	return nil
}

// assemble writes stripe units to dst in file order.
func assemble(ctx context.Context, dst io.Writer, streams []chan []byte, size, unit int64, h hash.Hash, progress func(int64)) error {
	cur := make([][]byte, len(streams)) // unread rest of each stripe's current frame
	bufs := make([]*[]byte, len(streams))
	defer func() {
		for _, b := range bufs {
			if b != nil {
				bufPool.Put(b)
			}
		}
	}()
	for off, i := int64(0), 0; off < size; i++ {
		k := i % len(streams)
		need := min(unit, size-off)
		for need > 0 {
			if len(cur[k]) == 0 {
				if bufs[k] != nil {
					bufPool.Put(bufs[k])
					bufs[k] = nil
				}
				p, ok := <-streams[k]
				if !ok {
					if ctx.Err() != nil {
						return ctx.Err()
					}
					return fmt.Errorf("stripe %d ended early at file offset %d", k, off)
				}
				b := p[:cap(p)]
				bufs[k] = &b
				cur[k] = p
			}
			n := min(need, int64(len(cur[k])))
			p := cur[k][:n]
			if _, err := dst.Write(p); err != nil {
				return err
			}
			if h != nil {
				h.Write(p)
			}
			if progress != nil {
				progress(n)
			}
			cur[k] = cur[k][n:]
			need -= n
			off += n
		}
	}
	return nil
}

// frameSink copies each received frame into a pooled buffer and queues it.
type frameSink struct {
	ctx   context.Context
	out   chan<- []byte
	crc   uint32
	total int64
}

// Buffer implements moverconn.FrameSink: frames are read straight into pooled
// buffers that travel to the assembler.
func (s *frameSink) Buffer(n int) []byte {
	if n > moverconn.FrameSize {
		return make([]byte, n)
	}
	return (*bufPool.Get().(*[]byte))[:n]
}

// Deliver implements moverconn.FrameSink. The frame's CRC was verified on
// arrival, so the segment CRC is derived from it rather than rescanned.
func (s *frameSink) Deliver(p []byte, crc uint32) error {
	select {
	case s.out <- p:
	case <-s.ctx.Done():
		return s.ctx.Err()
	}
	s.crc = wire.CombineCRC(s.crc, crc, int64(len(p)))
	s.total += int64(len(p))
	return nil
}

// Write takes frames from readers that do not hand over buffers.
func (s *frameSink) Write(p []byte) (int, error) {
	b := s.Buffer(len(p))
	copy(b, p)
	if err := s.Deliver(b, crc32.Checksum(p, wire.Castagnoli)); err != nil {
		return 0, err
	}
	return len(p), nil
}

// getStripe streams one segment into out, resuming after transport errors
// from the last byte delivered, and checks the segment's CRC32C against the
// catalog's at the end.
func (c *Client) getStripe(ctx context.Context, t api.StripeTarget, out chan<- []byte) error {
	return c.readSegment(ctx, t, &frameSink{ctx: ctx, out: out})
}

// segmentSink receives one segment's bytes in order and tracks how many it
// has taken and their CRC32C.
type segmentSink interface {
	io.Writer
	delivered() (int64, uint32)
}

func (s *frameSink) delivered() (int64, uint32) { return s.total, s.crc }

// readSegment streams one segment into sink, resuming after transport
// errors from the last byte delivered, and checks the segment's CRC32C
// against the catalog's at the end.
func (c *Client) readSegment(ctx context.Context, t api.StripeTarget, sink segmentSink) error {
	if err := c.readRange(ctx, t, 0, t.Length, sink); err != nil {
		return err
	}
	if _, crc := sink.delivered(); crc != t.CRC32C {
		return api.Errorf(api.ErrCorrupt, "segment crc32c %08x, catalog records %08x", crc, t.CRC32C)
	}
	return nil
}

// readRange streams length bytes of a segment from offset off into sink,
// resuming after transport errors from the last byte delivered. Every
// frame is checked against its CRC32C on arrival; a frame that fails makes
// the next attempt ask the mover to verify what it reads at rest.
func (c *Client) readRange(ctx context.Context, t api.StripeTarget, off, length int64, sink segmentSink) error {
	bp := bufPool.Get().(*[]byte)
	defer bufPool.Put(bp)
	total := func() int64 { n, _ := sink.delivered(); return n }
	var attempts []error
	verify := false
	dialFailures := 0
	for attempt := 0; attempt <= c.Retries && total() < length; attempt++ {
		if attempt > 0 {
			if err := backoff(ctx, attempt); err != nil {
				return err
			}
		}
		conn, err := c.pool.Get(ctx, endpoint(t))
		if err != nil {
			attempts = append(attempts, err)
			if moverconn.IsDialError(err) {
				if dialFailures++; dialFailures == 2 {
					break // the mover is not there: another copy may be
				}
			}
			continue
		}
		req := wire.Request{Op: token.OpRead, Token: t.Token, Device: t.Device, Object: t.Object, Offset: off + total(), Length: length - total(), Verify: verify}
		_, err = conn.Read(ctx, req, sink, *bp)
		c.pool.Put(conn)
		if err == nil {
			break
		}
		attempts = append(attempts, err)
		var de *moverconn.DamagedError
		if errors.As(err, &de) {
			verify = true // damaged at rest or in transit: the mover checks
			continue
		}
		if errors.Is(err, api.ErrCorrupt) {
			// The mover read the object and found it damaged at rest:
			// asking again will not help, another copy may.
			return &damagedCopy{t: t, err: err}
		}
		if !retryable(err) || errors.Is(err, api.ErrExist) {
			return attemptsError(attempts)
		}
	}
	if n := total(); n < length {
		err := fmt.Errorf("%d of %d bytes read: %w", n, length, attemptsError(attempts))
		if ctx.Err() == nil && moverconn.IsDialError(attempts[len(attempts)-1]) {
			// Its mover cannot be reached now: the core may have this
			// copy replaced from another (see repair).
			return &damagedCopy{t: t, err: err}
		}
		return err
	}
	return nil
}

// directSink writes a single-stripe file straight to the destination: with
// one stripe there is nothing to reorder, so frames skip the assembler and
// its goroutine hand-off.
type directSink struct {
	dst      io.Writer
	h        hash.Hash
	progress func(int64)
	total    int64
	crc      uint32
}

func (s *directSink) WriteCRC(p []byte, crc uint32) error {
	if _, err := s.dst.Write(p); err != nil {
		return err
	}
	if s.h != nil {
		s.h.Write(p)
	}
	if s.progress != nil {
		s.progress(int64(len(p)))
	}
	s.crc = wire.CombineCRC(s.crc, crc, int64(len(p)))
	s.total += int64(len(p))
	return nil
}

func (s *directSink) Write(p []byte) (int, error) {
	return len(p), s.WriteCRC(p, crc32.Checksum(p, wire.Castagnoli))
}

func (s *directSink) delivered() (int64, uint32) { return s.total, s.crc }
