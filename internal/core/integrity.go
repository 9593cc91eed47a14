package core

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/strata-storage/strata/internal/api"
	"github.com/strata-storage/strata/internal/auth"
	"github.com/strata-storage/strata/internal/catalog"
	"github.com/strata-storage/strata/internal/moverconn"
	"github.com/strata-storage/strata/internal/token"
	"github.com/strata-storage/strata/internal/wire"
)

// Self-healing copies. A copy found damaged at rest — by a reader (a get,
// the mount), by migration reading a disk copy, or by a recall reading a
// tape copy — is verified, dropped when another good copy exists and made
// again from that copy:
//
//   - a damaged disk copy of a file with a tape copy is dropped (its
//     objects become garbage, reclaimed as after a purge) and the file is
//     recalled; readers wait for the recall and go on from where they
//     were, as for any file on tape;
//   - a damaged tape copy is dropped when the file has another copy, and
//     made again by migration once the file is on disk (the HSM engine
//     does this: package hsm, damage.go);
//   - a file whose only copy is damaged is lost: it is reported (an
//     ErrCorrupt error naming it, the log, /metrics), its data is kept for
//     an administrator, and neither migration nor recall tries it again
//     until the server restarts.
//
// Movers check data at rest themselves (wire.OpVerify), so verifying a
// disk copy moves no data off its mover's host.

// integrity is the core's record of damage found and repaired.
type integrity struct {
	mu       sync.Mutex
	checking map[int64]*check // bitfile → its verification in progress
	lost     map[int64]string // bitfile → why it is lost

	damagedDisk, damagedTape, repaired, lostFiles atomic.Int64
}

// check is one verification of a bitfile's disk copy, shared by every
// reader that reports it meanwhile.
type check struct {
	done  chan struct{}
	reply api.DamageReply
	err   error
}

// Integrity reports what the checks of stored data found and repaired
// since the server started.
func (c *Core) Integrity() api.Integrity {
	g := &c.integ
	return api.Integrity{DamagedDisk: g.damagedDisk.Load(), DamagedTape: g.damagedTape.Load(), Repaired: g.repaired.Load(), Lost: g.lostFiles.Load()}
}

// ReportDamage acts on a reader's report that a stripe of p's disk copy is
// damaged at rest. The caller must be able to read p; the core verifies
// the object itself, so a report cannot make it drop a good copy.
func (c *Core) ReportDamage(ctx context.Context, r api.DamageReport) (api.DamageReply, error) {
	_, path, in, err := c.readable(ctx, r.Path, "report damage")
	if err != nil {
		return api.DamageReply{}, err
	}
	if in.Bitfile == 0 {
		return api.DamageReply{State: api.DamageStale}, nil
	}
	b, err := c.store.Bitfile(ctx, in.Bitfile)
	if err != nil {
		return api.DamageReply{}, fmt.Errorf("report damage %s: %w", path, err)
	}
	if why := c.lostFile(b.ID); why != "" {
		return api.DamageReply{}, api.Errorf(api.ErrCorrupt, "%s is lost: %s", path, why)
	}
	for _, s := range b.Segments {
		if s.Device == r.Device && s.Object == r.Object {
			return c.verifyDiskCopy(ctx, path, in.COS, b, []catalog.Segment{s})
		}
	}
	return api.DamageReply{State: api.DamageStale}, nil
}

// ReportUnreachable acts on a client's report that it could not connect
// to the mover of device: the core connects itself (a new connection, not
// a pooled one) and, if it cannot either, takes the mover out of service
// until it registers again. Any caller may report; only the core's own
// failure counts.
func (c *Core) ReportUnreachable(ctx context.Context, r api.UnreachableReport) (api.UnreachableReply, error) {
	if _, err := caller(ctx); err != nil {
		return api.UnreachableReply{}, err
	}
	ep, err := c.moverFor(r.Device)
	if errors.Is(err, api.ErrNotFound) {
		return api.UnreachableReply{}, err
	}
	if err != nil {
		return api.UnreachableReply{}, nil // offline already
	}
	d := moverconn.Dialer()
	conn, err := d.DialContext(ctx, "tcp", ep.Addr)
	if err == nil {
		conn.Close()
		return api.UnreachableReply{Reachable: true}, nil
	}
	if ctx.Err() != nil {
		return api.UnreachableReply{}, ctx.Err()
	}
	c.log.Warn("core: a client cannot reach a mover, nor can the core; it takes no new data until it registers again", "device", r.Device, "mover", ep.Addr, "err", err)
	c.moverLost(r.Device)
	return api.UnreachableReply{}, nil
}

// lostFile reports why bitfile is lost, or "" if it is not known to be.
func (c *Core) lostFile(bitfile int64) string {
	c.integ.mu.Lock()
	defer c.integ.mu.Unlock()
	return c.integ.lost[bitfile]
}

// markLost records a file with no good copy left, in the catalog too, so
// that the mark outlives a restart.
func (c *Core) markLost(b catalog.Bitfile, path, why string) {
	g := &c.integ
	g.mu.Lock()
	_, had := g.lost[b.ID]
	if g.lost == nil {
		g.lost = map[int64]string{}
	}
	g.lost[b.ID] = why
	g.mu.Unlock()
	if had {
		return
	}
	g.lostFiles.Add(1)
	c.log.Error("integrity: file lost: no good copy left", "path", path, "bitfile", b.ID, "why", why)
	// Not under a request's context: a reader that hung up must not
	// leave the mark unrecorded.
	if err := c.store.MarkLost(context.Background(), catalog.Lost{Bitfile: b.ID, Why: why, Since: c.now().UnixNano()}); err != nil {
		c.log.Warn("integrity: the lost mark is not recorded in the catalog; it holds until the server restarts", "path", path, "err", err)
	}
}

// loadLost reads the lost marks the catalog holds (a previous run's).
func (c *Core) loadLost(ctx context.Context) error {
	ls, err := c.store.LostFiles(ctx)
	if err != nil {
		return fmt.Errorf("core: lost files: %w", err)
	}
	g := &c.integ
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.lost == nil {
		g.lost = map[int64]string{}
	}
	for _, l := range ls {
		g.lost[l.Bitfile] = l.Why
	}
	return nil
}

// LostFiles lists the files with no good copy left, with why and since
// when. Admin only.
func (c *Core) LostFiles(ctx context.Context) ([]api.LostFile, error) {
	if _, err := admin(ctx, "lost"); err != nil {
		return nil, err
	}
	ls, err := c.store.LostFiles(ctx)
	if err != nil {
		return nil, fmt.Errorf("lost files: %w", err)
	}
	out := make([]api.LostFile, 0, len(ls))
	for _, l := range ls {
		p, err := c.store.Path(ctx, l.Inode)
		if err != nil {
			continue // removed meanwhile
		}
		out = append(out, api.LostFile{Path: p, Why: l.Why, Since: time.Unix(0, l.Since).UTC()})
	}
	return out, nil
}

// verifyDiskCopy verifies segs of b's disk copy (one verification per
// bitfile at a time; reports meanwhile share its outcome) and, if one is
// damaged, acts on it (diskDamaged).
func (c *Core) verifyDiskCopy(ctx context.Context, path, cos string, b catalog.Bitfile, segs []catalog.Segment) (api.DamageReply, error) {
	g := &c.integ
	g.mu.Lock()
	if ch := g.checking[b.ID]; ch != nil {
		g.mu.Unlock()
		select {
		case <-ch.done:
			return ch.reply, ch.err
		case <-ctx.Done():
			return api.DamageReply{}, ctx.Err()
		}
	}
	if g.checking == nil {
		g.checking = map[int64]*check{}
	}
	ch := &check{done: make(chan struct{}), reply: api.DamageReply{State: api.DamageGood}}
	g.checking[b.ID] = ch
	g.mu.Unlock()
	defer func() {
		g.mu.Lock()
		delete(g.checking, b.ID)
		g.mu.Unlock()
		close(ch.done)
	}()
	for _, s := range segs {
		err := c.verifySegment(ctx, s)
		if err == nil {
			continue
		}
		switch {
		case errors.Is(err, api.ErrCorrupt):
			ch.reply, ch.err = c.diskDamaged(ctx, path, cos, b, s, err)
		case unreachable(ctx, err):
			ch.reply, ch.err = c.diskUnreachable(ctx, path, cos, b, s, err)
		default:
			ch.err = err
		}
		break
	}
	return ch.reply, ch.err
}

// verifySegment has s's mover read and check its object, and checks its
// length and CRC32C against the catalog's.
func (c *Core) verifySegment(ctx context.Context, s catalog.Segment) error {
	conn, err := c.moverConn(ctx, s.Device)
	if err != nil {
		return err
	}
	st, err := conn.Do(ctx, wire.Request{Op: wire.OpVerify, Token: c.sign(auth.Root, token.OpRead, s.Device, s.Object, 0, c.cfg.TokenTTL),
		Device: s.Device, Object: s.Object})
	c.pool.Put(conn)
	if err != nil {
		return fmt.Errorf("verify %s/%s: %w", s.Device, s.Object, err)
	}
	if st.Length != s.Length || st.CRC32C != s.CRC32C {
		return api.Errorf(api.ErrCorrupt, "verify %s/%s: %d bytes crc32c %08x, the catalog records %d bytes %08x", s.Device, s.Object, st.Length, st.CRC32C, s.Length, s.CRC32C)
	}
	return nil
}

// unreachable reports whether err, from verifying a copy, says its mover
// could not be reached (or broke off): not an answer from it.
func unreachable(ctx context.Context, err error) bool {
	var ae *api.Error
	return ctx.Err() == nil && !errors.As(err, &ae) && !errors.Is(err, api.ErrCorrupt)
}

// diskUnreachable acts on a disk copy whose mover neither a reader nor the
// core can reach (its host down, its link cut): with a tape copy and a
// library, the disk copy is dropped (reclaimed when its mover is back)
// and the file recalled to a device that can be reached, as a damaged one
// would be; without, the reader is told to wait for the mover: the file
// is not lost.
func (c *Core) diskUnreachable(ctx context.Context, path, cos string, b catalog.Bitfile, s catalog.Segment, cause error) (api.DamageReply, error) {
	c.moverLost(s.Device) // no new data goes there until it is back
	if len(b.Tapes) == 0 || c.hsm == nil {
		return api.DamageReply{}, api.Errorf(api.ErrUnavailable, "%s: the mover of its disk copy is unreachable (%v), and it has no other copy to read", path, cause)
	}
	c.log.Warn("integrity: disk copy unreachable; dropping it and recalling the file from tape", "path", path, "bitfile", b.ID,
		"device", s.Device, "err", cause)
	return c.recallInstead(ctx, path, cos, b, "unreachable")
}

// diskDamaged acts on a damaged stripe s of b's disk copy: with a tape
// copy and a library, the disk copy is dropped and the file recalled;
// else the file is lost.
func (c *Core) diskDamaged(ctx context.Context, path, cos string, b catalog.Bitfile, s catalog.Segment, cause error) (api.DamageReply, error) {
	if c.lostFile(b.ID) == "" { // counted once
		c.integ.damagedDisk.Add(1)
	}
	if len(b.Tapes) == 0 || c.hsm == nil {
		why := fmt.Sprintf("its disk copy is damaged (%v) and it has no tape copy", cause)
		if len(b.Tapes) > 0 {
			why = fmt.Sprintf("its disk copy is damaged (%v) and no tape library is configured to read its tape copy", cause)
		}
		c.markLost(b, path, why)
		return api.DamageReply{}, api.Errorf(api.ErrCorrupt, "%s is lost: %s", path, why)
	}
	c.log.Error("integrity: disk copy damaged; dropping it and recalling the file from tape", "path", path, "bitfile", b.ID,
		"device", s.Device, "object", s.Object, "err", cause)
	return c.recallInstead(ctx, path, cos, b, "damaged")
}

// recallInstead drops b's disk copy (how: damaged, unreachable) and
// recalls the file from tape to make a new one.
func (c *Core) recallInstead(ctx context.Context, path, cos string, b catalog.Bitfile, how string) (api.DamageReply, error) {
	c.quota.markStale() // what is on disk changes
	if err := c.store.DropDiskCopy(ctx, b.ID); err != nil {
		if errors.Is(err, api.ErrNotFound) || errors.Is(err, api.ErrInvalid) {
			return api.DamageReply{State: api.DamageStale}, nil // replaced, removed or purged meanwhile
		}
		return api.DamageReply{}, fmt.Errorf("%s: drop the %s disk copy: %w", path, how, err)
	}
	if err := c.hsm.Repair(ctx, b.ID, path, c.poolOf(cos)); err != nil {
		return api.DamageReply{}, fmt.Errorf("%s: recall to replace the %s disk copy: %w", path, how, err)
	}
	return api.DamageReply{State: api.DamageRecalling}, nil
}

// damageNote says what was done about a disk copy verifyDiskCopy found
// damaged ("" when it found none); errors other than a file lost are
// returned.
func damageNote(path string, reply api.DamageReply, err error) (string, error) {
	switch {
	case errors.Is(err, api.ErrCorrupt):
		return err.Error(), nil // lost
	case err != nil:
		return "", err
	case reply.State == api.DamageRecalling:
		return path + ": disk copy damaged; dropped, and being made again from its tape copy", nil
	}
	return "", nil
}

// damagedInMigration verifies the disk copy of a file migration could not
// read whole. When the copy is damaged at rest it was acted on (the file
// recalled to repair it, or found lost) and the batch goes on without it:
// it returns what was done, for the migration's result. Damage in transit
// only ("") makes the batch fail, to be tried again.
func (c *Core) damagedInMigration(ctx context.Context, cd catalog.Candidate, path string) string {
	reply, err := c.verifyDiskCopy(ctx, path, cd.Inode.COS, cd.Bitfile, cd.Bitfile.Segments)
	note, err := damageNote(path, reply, err)
	if err != nil {
		c.log.Warn("integrity: a disk copy migration could not read is not verified", "path", path, "err", err)
	}
	return note
}
