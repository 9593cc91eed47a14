package moverconn

import (
	"context"
	"fmt"
	"net"
	"os"

	"github.com/strata-storage/strata/internal/wire"
)

// HandsOver reports whether files may pass on this connection: it is a
// mover's Unix socket and the pool allows handles.
func (c *Conn) HandsOver() bool { return c.handles }

// WriteFile stores the part of f that req.Source names by passing f to the
// mover, which reads it itself (see wire.Request.Source), and returns the
// mover's final status with its receipt. progress, if set, is called as
// the mover reports bytes stored. Only for a connection that HandsOver.
func (c *Conn) WriteFile(ctx context.Context, req wire.Request, f *os.File, progress func(int)) (wire.Status, error) {
	uc, ok := c.c.(*net.UnixConn)
	if !ok || !c.handles || req.Source == nil {
		return wire.Status{}, fmt.Errorf("mover %s: a write from a file needs the mover's Unix socket and a source", c.addr)
	}
	defer c.watch(ctx)()
	if _, err := c.request(ctx, req); err != nil {
		return wire.Status{}, err // refused: the connection is in step
	}
	if err := wire.SendFile(uc, wire.SourceFile, f); err != nil {
		return wire.Status{}, c.fail(ctx, fmt.Errorf("mover %s: send source file: %w", c.addr, err))
	}
	var done int64
	for {
		st, err := c.status(ctx)
		if err != nil {
			return st, err
		}
		if progress != nil && st.Length > done {
			progress(int(st.Length - done))
			done = st.Length
		}
		if !st.More {
			return st, nil
		}
	}
}
