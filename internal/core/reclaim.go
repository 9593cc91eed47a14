package core

import (
	"context"
	"errors"
	"time"

	"github.com/strata-storage/strata/internal/api"
	"github.com/strata-storage/strata/internal/auth"
	"github.com/strata-storage/strata/internal/catalog"
	"github.com/strata-storage/strata/internal/token"
	"github.com/strata-storage/strata/internal/wire"
)

// Run does the core's background work until ctx ends: reclaim (at once,
// then every ReclaimEvery) and the access-time updates queued by Open.
func (c *Core) Run(ctx context.Context) {
	if c.hsm != nil {
		done := make(chan struct{})
		go func() { defer close(done); c.hsm.Run(ctx) }()
		defer func() { <-done }()
	}
	if c.cfg.ScrubRate > 0 {
		done := make(chan struct{})
		go func() { defer close(done); c.scrubber(ctx) }()
		defer func() { <-done }()
	}
	t := time.NewTicker(c.cfg.ReclaimEvery)
	defer t.Stop()
	for {
		if err := c.quota.refresh(ctx, c.store); err != nil && ctx.Err() == nil {
			c.log.Warn("core: quota usage", "err", err)
		}
		if n, err := c.Reclaim(ctx); err != nil && ctx.Err() == nil {
			c.log.Warn("core: reclaim", "err", err)
		} else if n > 0 {
			c.log.Info("core: reclaimed", "bitfiles", n)
		}
		for wait := true; wait; {
			select {
			case <-ctx.Done():
				return
			case <-t.C:
				wait = false
			case in := <-c.atimes:
				now := c.now().UnixNano()
				c.store.SetAttr(ctx, in.ID, catalog.Attr{Atime: &now, Ctime: in.Ctime})
			}
		}
	}
}

// xattrSweepEvery is how often Reclaim drops removed entries' attributes.
const xattrSweepEvery = 10 * time.Minute

// Reclaim kills expired pending writes, deletes the objects of dead
// bitfiles from their movers and forgets them. A bitfile whose mover is
// unreachable stays dead and is retried next time; deletes are idempotent,
// so a crash halfway through is harmless.
func (c *Core) Reclaim(ctx context.Context) (int, error) {
	if _, err := c.store.ExpirePending(ctx, c.epoch, c.now().UnixNano()); err != nil {
		return 0, err
	}
	if err := c.collectGarbage(ctx); err != nil {
		return 0, err
	}
	// The attributes of removed entries: one scan of the attribute table,
	// so not on every pass.
	if now, last := c.now().UnixNano(), c.xattrSweep.Load(); time.Duration(now-last) >= xattrSweepEvery && c.xattrSweep.CompareAndSwap(last, now) {
		if _, err := c.store.DropOrphanXattrs(ctx); err != nil {
			return 0, err
		}
	}
	done := 0
	for {
		dead, err := c.store.DeadBitfiles(ctx, c.now().Add(-c.cfg.ReclaimGrace).UnixNano(), 128)
		if err != nil {
			return done, err
		}
		progress := 0
		for _, b := range dead {
			ok := true
			for _, s := range b.Segments {
				if err := c.deleteObject(ctx, s.Device, s.Object); err != nil {
					c.log.Debug("core: reclaim: delete failed", "device", s.Device, "object", s.Object, "err", err)
					ok = false
				}
			}
			if !ok {
				continue
			}
			if err := c.store.Purge(ctx, b.ID); err != nil {
				return done, err
			}
			c.settle(b.ID)
			progress++
		}
		done += progress
		if progress == 0 || len(dead) < 128 {
			return done, nil
		}
	}
}

func (c *Core) deleteObject(ctx context.Context, device, object string) error {
	conn, err := c.moverConn(ctx, device)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	_, err = conn.Do(ctx, wire.Request{Op: token.OpDelete, Token: c.sign(auth.Root, token.OpDelete, device, object, 0, c.cfg.TokenTTL), Device: device, Object: object})
	c.pool.Put(conn)
	return err
}

// collectGarbage deletes the objects of purged disk copies.
func (c *Core) collectGarbage(ctx context.Context) error {
	for {
		gs, err := c.store.Garbage(ctx, 256)
		if err != nil {
			return err
		}
		progress := 0
		for _, g := range gs {
			if err := c.deleteObject(ctx, g.Device, g.Object); err != nil && !errors.Is(err, api.ErrNotFound) {
				c.log.Debug("core: garbage: delete failed", "device", g.Device, "object", g.Object, "err", err)
				continue
			}
			if err := c.store.ForgetGarbage(ctx, g); err != nil {
				return err
			}
			progress++
		}
		if progress == 0 || len(gs) < 256 {
			return nil
		}
	}
}
