package hsm

import (
	"context"
	"errors"

	"github.com/strata-storage/strata/internal/api"
)

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

// PurgePolicy evicts files from every disk pool above its high-water mark,
// least recently accessed first and only those with a verified tape copy,
// until the pool is below its low-water mark. Space counts as used until
// the reclaimer has deleted the objects, so a pass never over-purges by
// counting the same space twice.
func (h *Engine) PurgePolicy(ctx context.Context) (api.HSMResult, error) {
	var res api.HSMResult
	devs, err := h.store.Devices(ctx)
	if err != nil {
		return res, err
	}
	garbage, err := h.store.Garbage(ctx, 1<<20)
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
	for p, fs := range h.c.PoolFS(devs) {
		pools[p].fsSize, pools[p].fsUsed = fs.Size, fs.Size-fs.Free
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
	cands, err := h.store.PurgeCandidates(ctx, h.c.Now().UnixNano(), 100000)
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
		h.c.DiskChanged() // what is on disk changes
		if err := h.store.DropDiskCopy(ctx, cd.Bitfile.ID); err != nil {
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
		h.log.Info("hsm: purged", "files", res.Files, "bytes", res.Bytes)
	}
	return res, nil
}
