package wire

import (
	"io"
)

// NewStripeReader returns a reader of the part of src that s names: the
// bytes of units s.Stripe, s.Stripe+s.Width, … of its first s.Size bytes.
// A source shorter than s.Size ends the stripe with io.ErrUnexpectedEOF.
func NewStripeReader(src io.ReaderAt, s Source) io.Reader {
	return &stripeReader{src: src, size: s.Size, unit: s.Unit, w: s.Width, k: s.Stripe}
}

type stripeReader struct {
	src        io.ReaderAt
	size, unit int64
	w, k       int
	unitIdx    int64 // current unit number within the stripe
	inUnit     int64 // bytes of it already read
}

func (r *stripeReader) Read(p []byte) (int, error) {
	n := 0
	for n < len(p) {
		off := (r.unitIdx*int64(r.w)+int64(r.k))*r.unit + r.inUnit
		if off >= r.size {
			break
		}
		left := min(r.unit-r.inUnit, r.size-off)
		m, err := r.src.ReadAt(p[n:n+int(min(left, int64(len(p)-n)))], off)
		n += m
		r.inUnit += int64(m)
		if r.inUnit == r.unit {
			r.unitIdx, r.inUnit = r.unitIdx+1, 0
		}
		if err != nil && !(err == io.EOF && m > 0) {
			if err == io.EOF {
				err = io.ErrUnexpectedEOF // the source is shorter than it said
			}
			return n, err
		}
	}
	if n == 0 {
		return 0, io.EOF
	}
	return n, nil
}
