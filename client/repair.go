package client

import (
	"context"
	"errors"
	"fmt"
	"io"

	"github.com/strata-storage/strata/internal/api"
)

// A copy damaged at rest is not the end of a read. The reader reports it
// to the core (POST /v1/damaged), which verifies it and, when the file has
// a good tape copy, drops the damaged disk copy and recalls the file; the
// reader then opens the file again (waiting for the recall, as for any
// file on tape unless GetOptions.NoWait) and goes on from where it was. A
// file with no good copy left fails with the core's ErrCorrupt naming it
// lost. A copy whose mover cannot be reached is reported the same way: if
// the core cannot reach it either, a tape copy replaces it likewise, and
// without one the read fails with ErrUnavailable (the file is not lost).

// maxRepairs bounds how many damaged copies one read gets past.
const maxRepairs = 3

// damagedCopy is a stripe of a disk copy that its mover, asked to verify
// what it read, found damaged at rest, or whose mover could not be reached
// at all (the core verifies either way).
type damagedCopy struct {
	t   api.StripeTarget
	err error
}

func (e *damagedCopy) Error() string { return e.err.Error() }
func (e *damagedCopy) Unwrap() error { return e.err }

// repair reports the damaged copy behind err (if err is one) and opens
// path again. It returns the new layout, or err itself when err is not a
// damaged copy.
//
// A layout whose tokens a mover refuses because they come from a core that
// has since stopped (a standby took over) is opened again the same way,
// from the core serving now, with nothing to report.
func (c *Client) repair(ctx context.Context, path string, had api.OpenResponse, err error, o GetOptions) (api.OpenResponse, error) {
	var dc *damagedCopy
	if !errors.As(err, &dc) {
		if errors.Is(err, api.ErrRestarted) {
			return c.reopen(ctx, path, had, err, o)
		}
		return had, err
	}
	var reply api.DamageReply
	if rerr := c.do(ctx, "POST", "/v1/damaged", nil, api.DamageReport{Path: path, Device: dc.t.Device, Object: dc.t.Object}, &reply); rerr != nil {
		if errors.Is(rerr, api.ErrCorrupt) || errors.Is(rerr, api.ErrUnavailable) {
			return had, rerr // lost, or no copy to read for now: the core says why
		}
		return had, fmt.Errorf("%w (and reporting the damage failed: %v)", err, rerr)
	}
	return c.reopen(ctx, path, had, err, o)
}

// reopen opens path again after err, for the same version of the file.
func (c *Client) reopen(ctx context.Context, path string, had api.OpenResponse, err error, o GetOptions) (api.OpenResponse, error) {
	or, oerr := c.open(ctx, path, o)
	if oerr != nil {
		return had, oerr
	}
	f, g := had.File, or.File
	if f.Size != g.Size || !f.Mtime.Equal(g.Mtime) || f.Fixity != g.Fixity {
		return had, fmt.Errorf("read %s: the file changed before it could be read again: %w", path, err)
	}
	return or, nil
}

// resume writes the rest of the file, from off, to dst through a Reader on
// layout or, a stripe width at a time.
func (c *Client) resume(ctx context.Context, path string, or api.OpenResponse, off int64, dst io.Writer, o GetOptions) error {
	r := &Reader{c: c, ctx: ctx, path: path, o: o, or: or}
	w, unit := r.Width()
	buf := make([]byte, min(int64(w)*max(unit, 1<<20), 64<<20))
	_, err := io.CopyBuffer(dst, io.NewSectionReader(r, off, or.File.Size-off), buf)
	return err
}
