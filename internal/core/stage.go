package core

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/strata-storage/strata/internal/api"
	"github.com/strata-storage/strata/internal/auth"
	"github.com/strata-storage/strata/internal/catalog"
)

// Stage queues recalls of the named files (see api.StageRequest) and
// reports where each stands. A caller may stage what it may read.
func (c *Core) Stage(ctx context.Context, r api.StageRequest) (api.StageResponse, error) {
	var out api.StageResponse
	var ids []int64
	who, err := caller(ctx)
	if err != nil {
		return out, err
	}
	if r.Priority > 0 && !who.Admin {
		// A raised priority jumps every other user's queue.
		return out, fmt.Errorf("stage --priority: %w (%s is not an admin)", api.ErrDenied, who.User)
	}
	for _, p := range r.Paths {
		st, id, err := c.stageOne(ctx, who, p, r.Priority, true)
		if err == nil && r.Pin > 0 {
			err = c.pin(ctx, who, p, time.Duration(r.Pin*float64(time.Second)), &st)
		}
		if err != nil {
			return out, err
		}
		out.Files = append(out.Files, st)
		ids = append(ids, id)
	}
	c.hsm.Statuses(out.Files, ids) // one pass over the queue for all of them
	return out, nil
}

// StageStatus reports one file's recall without queueing one.
func (c *Core) StageStatus(ctx context.Context, p string) (api.StageStatus, error) {
	who, err := caller(ctx)
	if err != nil {
		return api.StageStatus{}, err
	}
	st, id, err := c.stageOne(ctx, who, p, 0, false)
	if err != nil {
		return st, err
	}
	sts := []api.StageStatus{st}
	c.hsm.Statuses(sts, []int64{id})
	return sts[0], nil
}

// MaxStageWait bounds how long one status request waits for a recall.
const MaxStageWait = time.Minute

// StageWait is StageStatus that, while p's recall is queued or running,
// first waits up to wait (at most MaxStageWait) for it to end: a reader
// blocked in open(2) learns at once that its file is back, which polling
// would tell it up to a poll interval later — time in which the drive
// might have let the cartridge go.
func (c *Core) StageWait(ctx context.Context, p string, wait time.Duration) (api.StageStatus, error) {
	who, err := caller(ctx)
	if err != nil {
		return api.StageStatus{}, err
	}
	_, id, err := c.stageOne(ctx, who, p, 0, false)
	if err != nil {
		return api.StageStatus{}, err
	}
	if done := c.hsm.Done(id); done != nil && wait > 0 {
		t := time.NewTimer(min(wait, MaxStageWait))
		defer t.Stop()
		select {
		case <-done:
		case <-t.C:
		case <-ctx.Done():
			return api.StageStatus{}, ctx.Err()
		}
	}
	return c.StageStatus(ctx, p)
}

// stageOne resolves p and queues its recall if asked and needed. It
// returns the file's state if it is settled (resident), else the bitfile
// whose recall status statuses fills in.
func (c *Core) stageOne(ctx context.Context, who *auth.Identity, p string, prio int, queue bool) (api.StageStatus, int64, error) {
	op := auth.ScopeRead
	if queue {
		op = auth.ScopeStage
	}
	// Who may stage a file may ask how its recall goes.
	if err := scoped(who, op, p); err != nil && (queue || !who.Allows(auth.ScopeStage, p)) {
		return api.StageStatus{}, 0, err
	}
	comps, in, err := c.statPath(ctx, who, p)
	if err != nil {
		return api.StageStatus{}, 0, fmt.Errorf("stage: %w", err)
	}
	path := joinPath(comps)
	if in.Kind == catalog.KindDir {
		return api.StageStatus{}, 0, api.Errorf(api.ErrIsDir, "stage %s", path)
	}
	if queue {
		if err := may(who, in, path, path, auth.Read); err != nil {
			return api.StageStatus{}, 0, err
		}
	}
	st := api.StageStatus{Path: path, State: api.StageResident}
	if in.Bitfile == 0 {
		return st, 0, nil
	}
	b, err := c.store.Bitfile(ctx, in.Bitfile)
	if err != nil {
		return st, 0, fmt.Errorf("stage %s: %w", path, err)
	}
	st.PinnedUntil = pinTime(b.PinnedUntil, c.now())
	if b.OnDisk {
		return st, 0, nil
	}
	if why := c.lostFile(b.ID); why != "" {
		return st, 0, api.Errorf(api.ErrCorrupt, "stage %s: lost: %s", path, why)
	}
	h := c.hsm
	if h == nil {
		return st, 0, api.Errorf(api.ErrOffline, "stage %s: on tape, and no tape library is configured", path)
	}
	if queue {
		if err := h.Stage(ctx, b, prio, path, c.poolOf(in.COS)); err != nil {
			return st, 0, fmt.Errorf("stage %s: %w", path, err)
		}
	}
	return st, b.ID, nil
}

// poolOf is the disk pool a class of service writes to.
func (c *Core) poolOf(cos string) string {
	if k, ok := c.class(cos); ok {
		return k.Pool
	}
	return c.defaultPool()
}

// release ends a recall's placement on dev: its load, and the held bytes
// (by now in the catalog, or never to be written).
func (c *Core) release(dev string, held int64) {
	c.mu.Lock()
	if c.load[dev]--; c.load[dev] <= 0 {
		delete(c.load, dev)
	}
	if c.held[dev] -= held; c.held[dev] <= 0 {
		delete(c.held, dev)
	}
	c.mu.Unlock()
}

// pinTime is a pin's end as the API reports it: nil if there is none or
// it has passed.
func pinTime(until int64, now time.Time) *time.Time {
	if until <= now.UnixNano() {
		return nil
	}
	t := time.Unix(0, until).UTC()
	return &t
}

// pin extends p's pin to d from now (a longer one is kept); stageOne
// has checked the caller may.
func (c *Core) pin(ctx context.Context, who *auth.Identity, p string, d time.Duration, st *api.StageStatus) error {
	_, in, err := c.statPath(ctx, who, p)
	if err != nil || in.Bitfile == 0 {
		return err // an empty file has nothing on disk to keep
	}
	until := c.now().Add(d).UnixNano()
	if st.PinnedUntil != nil && st.PinnedUntil.UnixNano() >= until {
		return nil
	}
	if err := c.store.Pin(ctx, in.Bitfile, until); err != nil {
		return fmt.Errorf("stage %s: pin: %w", p, err)
	}
	st.PinnedUntil = pinTime(until, c.now())
	return nil
}

// Release drops the pins of files' disk copies. It asks what staging
// does: the stage scope and read permission.
func (c *Core) Release(ctx context.Context, r api.ReleaseRequest) (struct{}, error) {
	who, err := caller(ctx)
	if err != nil {
		return struct{}{}, err
	}
	for _, p := range r.Paths {
		if err := scoped(who, auth.ScopeStage, p); err != nil {
			return struct{}{}, err
		}
		comps, in, err := c.statPath(ctx, who, p)
		if err != nil {
			return struct{}{}, fmt.Errorf("release: %w", err)
		}
		path := joinPath(comps)
		if err := may(who, in, path, path, auth.Read); err != nil {
			return struct{}{}, err
		}
		if in.Bitfile == 0 {
			continue
		}
		if err := c.store.Pin(ctx, in.Bitfile, 0); err != nil && !errors.Is(err, api.ErrNotFound) {
			return struct{}{}, fmt.Errorf("release %s: %w", path, err)
		}
	}
	return struct{}{}, nil
}
