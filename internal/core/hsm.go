package core

import (
	"context"
	"fmt"
	"time"

	"github.com/strata-storage/strata/internal/api"
	"github.com/strata-storage/strata/internal/auth"
	"github.com/strata-storage/strata/internal/catalog"
	"github.com/strata-storage/strata/internal/hsm"
	"github.com/strata-storage/strata/internal/tapeserver"
	"github.com/strata-storage/strata/internal/token"
)

// The tape tier's requests. The HSM engine (package hsm) does the work;
// the core checks who may ask, resolves paths, and lends the engine what
// it needs of the namespace and the movers (hsmCore).

// noLibrary is the error of a tape request to a core without a library.
func noLibrary(what string) error {
	return api.Errorf(api.ErrInvalid, "%s: no tape library configured", what)
}

// Migrate copies files to tape now (see api.MigrateRequest).
// Admin only: it overrides the policy for files that are not the caller's.
func (c *Core) Migrate(ctx context.Context, r api.MigrateRequest) (api.HSMResult, error) {
	if _, err := admin(ctx, "migrate"); err != nil {
		return api.HSMResult{}, err
	}
	if c.hsm == nil {
		return api.HSMResult{}, noLibrary("migrate")
	}
	return c.hsm.Migrate(ctx, r.Paths)
}

// Purge drops disk copies now (see api.PurgeRequest).
// Admin only.
func (c *Core) Purge(ctx context.Context, r api.PurgeRequest) (api.HSMResult, error) {
	if _, err := admin(ctx, "purge"); err != nil {
		return api.HSMResult{}, err
	}
	if c.hsm == nil {
		return api.HSMResult{}, noLibrary("purge")
	}
	if len(r.Paths) == 0 {
		return c.hsm.PurgePolicy(ctx)
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

// Repack moves every live copy off a cartridge and erases it
// (hsm.Engine.Repack). Admin only.
func (c *Core) Repack(ctx context.Context, r api.RepackRequest) (api.HSMResult, error) {
	if _, err := admin(ctx, "repack"); err != nil {
		return api.HSMResult{}, err
	}
	if c.hsm == nil {
		return api.HSMResult{}, noLibrary("repack")
	}
	return c.hsm.Repack(ctx, r)
}

// Library reports the tape library's state, to admins.
func (c *Core) Library(ctx context.Context) (api.Library, error) {
	if _, err := admin(ctx, "library"); err != nil {
		return api.Library{}, err
	}
	if c.hsm == nil {
		return api.Library{}, api.Errorf(api.ErrNotFound, "no tape library configured")
	}
	return c.hsm.Library(), nil
}

// SetService takes a drive or a cartridge out of service, or puts it
// back. Admin only.
func (c *Core) SetService(ctx context.Context, r api.ServiceChange) (struct{}, error) {
	if _, err := admin(ctx, "library"); err != nil {
		return struct{}{}, err
	}
	if c.hsm == nil {
		return struct{}{}, noLibrary("library")
	}
	return struct{}{}, c.hsm.SetService(ctx, r)
}

// InjectFault sets faults of an emulated library. Admin only.
func (c *Core) InjectFault(ctx context.Context, r api.LibraryFault) (struct{}, error) {
	if _, err := admin(ctx, "library"); err != nil {
		return struct{}{}, err
	}
	if c.hsm == nil {
		return struct{}{}, noLibrary("library")
	}
	return struct{}{}, c.hsm.InjectFault(r)
}

// RegisterTapeServer records a tape server's registration (checked
// against the cluster secret): its drives join the library.
func (c *Core) RegisterTapeServer(ctx context.Context, r tapeserver.Registration) (tapeserver.Registered, error) {
	if c.hsm == nil {
		return tapeserver.Registered{}, api.Errorf(api.ErrInvalid, "register tape server %s: this core's library has no remote drives (set [library] remote = true)", r.ID)
	}
	if err := c.hsm.RegisterTapeServer(r); err != nil {
		return tapeserver.Registered{}, err
	}
	return tapeserver.Registered{Epoch: c.epoch}, nil
}

// hsmCore is what the core lends the HSM engine (hsm.Core).
type hsmCore struct{ c *Core }

var _ hsm.Core = hsmCore{}

func (h hsmCore) Now() time.Time { return h.c.now() }

func (h hsmCore) Stat(ctx context.Context, p string) (catalog.Inode, error) {
	_, in, err := h.c.statPath(ctx, nil, p)
	return in, err
}

func (h hsmCore) Classes() []catalog.COS { return h.c.classList() }

func (h hsmCore) PoolOf(cos string) string { return h.c.poolOf(cos) }

func (h hsmCore) Source(ctx context.Context, s catalog.Segment, op string, maxLen int64, extra time.Duration) (tapeserver.Source, error) {
	c := h.c
	ep, err := c.awaitMover(ctx, s.Device)
	if err != nil {
		return tapeserver.Source{}, fmt.Errorf("%s/%s: %w", s.Device, s.Object, err)
	}
	return tapeserver.Source{Endpoint: ep, Device: s.Device, Object: s.Object, Length: s.Length,
		Token: c.sign(auth.Root, op, s.Device, s.Object, maxLen, c.cfg.TokenTTL+extra)}, nil
}

// RecallTarget names the object a name no attempt used before, recorded
// before it is written: an attempt given up, or cut short by a crash,
// leaves an object that becomes garbage (catalog.Store.AddRecallObject)
// and that no later attempt could be writing when it is reclaimed.
func (h hsmCore) RecallTarget(ctx context.Context, b catalog.Bitfile, stripe int, pool string, length int64) (tapeserver.Source, func(), error) {
	c := h.c
	picked, err := c.place(ctx, pool, 1, length, true)
	if err != nil {
		return tapeserver.Source{}, nil, err
	}
	dev, ep := picked[0].dev.ID, picked[0].ep
	done := func() { c.release(dev, length) }
	obj := fmt.Sprintf("%s.%d-%d", catalog.ObjectName(b.ID, b.DiskGen+1, stripe), c.epoch, c.recallSeq.Add(1))
	if err := c.store.AddRecallObject(ctx, catalog.RecallObject{Bitfile: b.ID, Epoch: c.epoch, Device: dev, Object: obj}); err != nil {
		done()
		return tapeserver.Source{}, nil, err
	}
	return tapeserver.Source{Endpoint: ep, Device: dev, Object: obj, Length: length,
		Token: c.sign(auth.Root, token.OpWrite, dev, obj, length, c.cfg.TokenTTL)}, done, nil
}

func (h hsmCore) CheckReceipt(receipt, device, object string, length int64, crc uint32) bool {
	return h.c.signer.CheckReceipt(receipt, device, object, length, crc)
}

func (h hsmCore) DeleteObject(ctx context.Context, device, object string) {
	h.c.deleteObject(ctx, device, object) // a failure leaves it to reclaim
}

func (h hsmCore) PoolFree(ctx context.Context, pools map[string]bool) int64 {
	c := h.c
	devs, err := c.store.Devices(ctx)
	if err != nil {
		return 0
	}
	var free int64
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, d := range devs {
		if pools[d.Pool] {
			free += c.freeLocked(d)
		}
	}
	return free
}

func (h hsmCore) PoolFS(devs []catalog.Device) map[string]hsm.FS {
	out := map[string]hsm.FS{}
	for p, fs := range h.c.fsOfPools(devs) {
		out[p] = hsm.FS{Size: fs.size, Free: fs.free}
	}
	return out
}

func (h hsmCore) DiskChanged() { h.c.quota.markStale() }

func (h hsmCore) Lost(bitfile int64) string { return h.c.lostFile(bitfile) }

func (h hsmCore) MarkLost(b catalog.Bitfile, path, why string) { h.c.markLost(b, path, why) }

func (h hsmCore) TapeDamaged() { h.c.integ.damagedTape.Add(1) }

func (h hsmCore) Repaired() { h.c.integ.repaired.Add(1) }

func (h hsmCore) VerifyDiskCopy(ctx context.Context, cd catalog.Candidate, path string) string {
	return h.c.damagedInMigration(ctx, cd, path)
}
