package client

import (
	"context"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"sync"

	"github.com/strata-storage/strata/internal/api"
	"github.com/strata-storage/strata/internal/wire"
)

// Reader reads a stored file at any offset. Each read fetches just the
// ranges it needs from the movers, from all the stripes it spans in
// parallel, and checks every frame's CRC32C; the whole-segment checksums
// and the fixity digest need whole reads, which Get does.
type Reader struct {
	c    *Client
	ctx  context.Context
	path string
	o    GetOptions
	off  int64 // position of Read

	mu sync.Mutex
	or api.OpenResponse // replaced when a damaged copy is repaired
}

// Open prepares path for reading, waiting for its recall from tape as Get
// does (o.NoWait and o.Staging apply; the other options do not).
func (c *Client) Open(ctx context.Context, path string, o GetOptions) (*Reader, error) {
	or, err := c.open(ctx, path, o)
	if err != nil {
		return nil, err
	}
	return &Reader{c: c, ctx: ctx, path: path, o: o, or: or}, nil
}

// Info describes the file as it was opened.
func (r *Reader) Info() *FileInfo { fi := r.layout().File; return &fi }

// Width is the file's stripe width and stripe unit: a reader that reads
// ahead fetches width × unit at a time to keep every stripe busy.
func (r *Reader) Width() (stripes int, unit int64) {
	or := r.layout()
	return len(or.Stripes), or.StripeUnit
}

// Size is the file's length.
func (r *Reader) Size() int64 { return r.layout().File.Size }

// layout is the file's read layout as of now.
func (r *Reader) layout() api.OpenResponse {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.or
}

// Close releases the reader (connections stay pooled in the client).
func (r *Reader) Close() error { return nil }

// Read reads from the current position, as io.Reader.
func (r *Reader) Read(p []byte) (int, error) {
	n, err := r.ReadAt(p, r.off)
	r.off += int64(n)
	if err == io.EOF && n > 0 {
		err = nil
	}
	return n, err
}

// ReadAt reads len(p) bytes at off, as io.ReaderAt: fewer only at the end
// of the file, with io.EOF.
func (r *Reader) ReadAt(p []byte, off int64) (int, error) {
	or := r.layout()
	n, err := r.readAt(p, off, or)
	// A copy damaged at rest: read again from the good copy the core
	// repaired it from (see repair).
	for tries := 0; err != nil && tries < maxRepairs; tries++ {
		if or, err = r.c.repair(r.ctx, r.path, or, err, r.o); err == nil {
			r.mu.Lock()
			r.or = or
			r.mu.Unlock()
			n, err = r.readAt(p, off, or)
		}
	}
	return n, err
}

// readAt is ReadAt on layout or.
func (r *Reader) readAt(p []byte, off int64, or api.OpenResponse) (int, error) {
	size := or.File.Size
	if off < 0 {
		return 0, api.Errorf(api.ErrInvalid, "read %s: negative offset %d", r.path, off)
	}
	if off >= size {
		return 0, io.EOF
	}
	n := int(min(int64(len(p)), size-off))
	ranges := plan(or, p[:n], off)
	errs := make([]error, len(ranges))
	if len(ranges) == 1 {
		errs[0] = ranges[0].read(r.ctx, r.c)
	} else {
		var wg sync.WaitGroup
		for i := range ranges {
			wg.Add(1)
			go func() {
				defer wg.Done()
				errs[i] = ranges[i].read(r.ctx, r.c)
			}()
		}
		wg.Wait()
	}
	for i, err := range errs {
		if err != nil {
			t := ranges[i].t
			return 0, fmt.Errorf("read %s at %d: segment %d (device %s, object %s): %w", r.path, off, t.Stripe, t.Device, t.Object, err)
		}
	}
	if n < len(p) {
		return n, io.EOF
	}
	return n, nil
}

// stripeRange is the part of a read that one stripe serves: a contiguous
// range of its object (stripe k holds the file's units k, k+w, k+2w … back
// to back), scattered into the caller's buffer.
type stripeRange struct {
	t        api.StripeTarget
	off, len int64
	dst      [][]byte
}

// plan maps the file range [off, off+len(p)) onto the stripes.
func plan(or api.OpenResponse, p []byte, off int64) []*stripeRange {
	w, unit := int64(len(or.Stripes)), or.StripeUnit
	if w == 1 {
		return []*stripeRange{{t: or.Stripes[0], off: off, len: int64(len(p)), dst: [][]byte{p}}}
	}
	byStripe := make([]*stripeRange, w)
	var out []*stripeRange
	for pos, end := off, off+int64(len(p)); pos < end; {
		u := pos / unit
		in := pos % unit
		n := min(unit-in, end-pos)
		k := u % w
		sr := byStripe[k]
		if sr == nil {
			sr = &stripeRange{t: or.Stripes[k], off: (u/w)*unit + in}
			byStripe[k] = sr
			out = append(out, sr)
		}
		sr.dst = append(sr.dst, p[pos-off:pos-off+n])
		sr.len += n
		pos += n
	}
	return out
}

func (sr *stripeRange) read(ctx context.Context, c *Client) error {
	return c.readRange(ctx, sr.t, sr.off, sr.len, &scatterSink{dst: sr.dst})
}

// scatterSink writes a stream across a list of buffers in turn. As a
// moverconn.FrameSink it has each frame or chunk read straight into its place
// in the caller's buffer when the place is contiguous (a stripe unit is a
// whole number of chunks and frames, so all but a range's ragged ends
// are): a read through the mount copied every byte once more than its
// reading needed.
type scatterSink struct {
	dst     [][]byte
	total   int64
	crc     uint32
	scratch []byte // for a frame that spans two places
}

// Buffer implements moverconn.FrameSink.
func (s *scatterSink) Buffer(n int) []byte {
	if len(s.dst) > 0 && len(s.dst[0]) >= n {
		return s.dst[0][:n]
	}
	if cap(s.scratch) < n {
		s.scratch = make([]byte, n)
	}
	return s.scratch[:n]
}

// Deliver implements moverconn.FrameSink: p is where Buffer placed it, or in
// the scratch buffer to be scattered.
func (s *scatterSink) Deliver(p []byte, crc uint32) error {
	if len(p) > 0 && len(s.dst) > 0 && len(s.dst[0]) >= len(p) && &s.dst[0][0] == &p[0] {
		s.crc = wire.CombineCRC(s.crc, crc, int64(len(p)))
		s.total += int64(len(p))
		if s.dst[0] = s.dst[0][len(p):]; len(s.dst[0]) == 0 {
			s.dst = s.dst[1:]
		}
		return nil
	}
	return s.WriteCRC(p, crc)
}

func (s *scatterSink) Write(p []byte) (int, error) {
	return len(p), s.WriteCRC(p, crc32.Checksum(p, wire.Castagnoli))
}

// WriteCRC takes a frame whose CRC was checked on arrival.
func (s *scatterSink) WriteCRC(p []byte, crc uint32) error {
	s.crc = wire.CombineCRC(s.crc, crc, int64(len(p)))
	s.total += int64(len(p))
	for len(p) > 0 {
		if len(s.dst) == 0 {
			return errors.New("mover sent more than asked for")
		}
		n := copy(s.dst[0], p)
		s.dst[0] = s.dst[0][n:]
		if len(s.dst[0]) == 0 {
			s.dst = s.dst[1:]
		}
		p = p[n:]
	}
	return nil
}

func (s *scatterSink) delivered() (int64, uint32) { return s.total, s.crc }
