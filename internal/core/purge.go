package core

import (
	"context"
	"errors"
	"fmt"

	"github.com/strata-storage/strata/internal/api"
	"github.com/strata-storage/strata/internal/catalog"
)

// Purge drops disk copies now (see api.PurgeRequest).
// Admin only.
func (c *Core) Purge(ctx context.Context, r api.PurgeRequest) (api.HSMResult, error) {
	if _, err := admin(ctx, "purge"); err != nil {
		return api.HSMResult{}, err
	}
	if c.hsm == nil {
		return api.HSMResult{}, api.Errorf(api.ErrInvalid, "purge: no tape library configured")
	}
	if len(r.Paths) == 0 {
		return c.hsm.purgePolicy(ctx)
	}
	var res api.HSMResult
	for _, p := range r.Paths {
		comps, in, err := c.statPath(ctx, nil, p)
		if err != nil {
			return res, fmt.Errorf("purge: %w", err)
		}
		if in.Kind == catalog.KindDir {
			return res, api.Errorf(api.ErrIsDir, "purge %s", joinPath(comps))
		}
		if in.Bitfile == 0 {
			continue
		}
		b, err := c.store.Bitfile(ctx, in.Bitfile)
		if err != nil {
			return res, fmt.Errorf("purge %s: %w", joinPath(comps), err)
		}
		if !b.OnDisk {
			continue
		}
		c.quota.markStale() // what is on disk changes
		if err := c.store.DropDiskCopy(ctx, b.ID); err != nil {
			return res, fmt.Errorf("purge %s: %w", joinPath(comps), err)
		}
		res.Files++
		res.Bytes += b.Size
	}
	return res, nil
}

// poolUse is a disk pool's fill as the purge policy sees it: by its
// configured capacity, and by the file systems under it, whoever filled
// them. The fuller of the two drives the watermarks: a pool within its
// configured size on a file system that is full must still purge.
type poolUse struct {
	capacity, used int64 // configured, and what Strata holds there
	fsSize, fsUsed int64 // the file systems', each counted once (0: not reported)
}

func (u *poolUse) fill() float64 {
	f := 0.0
	if u.capacity > 0 {
		f = float64(u.used) / float64(u.capacity)
	}
	if u.fsSize > 0 {
		f = max(f, float64(u.fsUsed)/float64(u.fsSize))
	}
	return f
}

// drop counts n bytes as gone (purged, or being deleted).
func (u *poolUse) drop(n int64) {
	u.used -= n
	u.fsUsed -= n
}

// purgePolicy evicts files from every disk pool above its high-water mark,
// least recently accessed first and only those with a verified tape copy,
// until the pool is below its low-water mark. Space counts as used until
// the reclaimer has deleted the objects, so a pass never over-purges by
// counting the same space twice.
func (h *hsm) purgePolicy(ctx context.Context) (api.HSMResult, error) {
	var res api.HSMResult
	c := h.c
	devs, err := c.store.Devices(ctx)
	if err != nil {
		return res, err
	}
	garbage, err := c.store.Garbage(ctx, 1<<20)
	if err != nil {
		return res, err
	}
	pools := map[string]*poolUse{}
	poolOf := map[string]string{}
	for _, d := range devs {
		u := pools[d.Pool]
		if u == nil {
			u = &poolUse{}
			pools[d.Pool] = u
		}
		u.capacity += d.Capacity
		u.used += d.Used
		poolOf[d.ID] = d.Pool
	}
	for p, fs := range c.fsOfPools(devs) {
		pools[p].fsSize, pools[p].fsUsed = fs.size, fs.size-fs.free
	}
	for _, g := range garbage {
		if u := pools[poolOf[g.Device]]; u != nil {
			u.drop(g.Length) // being deleted already
		}
	}
	over := func(pool string) bool {
		u := pools[pool]
		return u != nil && u.fill() > h.cfg.LowWater
	}
	active := map[string]bool{}
	for p, u := range pools {
		if u.fill() > h.cfg.HighWater {
			active[p] = true
		}
	}
	if len(active) == 0 {
		return res, nil
	}
	cands, err := c.store.PurgeCandidates(ctx, c.now().UnixNano(), 100000)
	if err != nil {
		return res, err
	}
	for _, cd := range cands {
		if len(cd.Bitfile.Segments) == 0 {
			continue
		}
		pool := poolOf[cd.Bitfile.Segments[0].Device]
		if !active[pool] || !over(pool) {
			continue
		}
		c.quota.markStale() // what is on disk changes
		if err := c.store.DropDiskCopy(ctx, cd.Bitfile.ID); err != nil {
			if errors.Is(err, api.ErrNotFound) || errors.Is(err, api.ErrInvalid) {
				continue // removed, or purged by someone else meanwhile
			}
			return res, err
		}
		for _, s := range cd.Bitfile.Segments {
			pools[poolOf[s.Device]].drop(s.Length)
		}
		res.Files++
		res.Bytes += cd.Bitfile.Size
	}
	if res.Files > 0 {
		c.log.Info("hsm: purged", "files", res.Files, "bytes", res.Bytes)
	}
	return res, nil
}
