package hsm

import (
	"context"
	"errors"
	"fmt"
	"slices"

	"github.com/strata-storage/strata/internal/api"
	"github.com/strata-storage/strata/internal/catalog"
)

// Repack moves every live copy off a cartridge and then erases it, so the
// space of files deleted since they were written (tape is append-only) can
// be used again. Each file's copy is rewritten to another cartridge from
// its disk copy; a file that is on tape only is recalled first (from any of
// its copies) and dropped from disk again afterwards. A copy on the
// cartridge is forgotten only once its replacement is verified and
// flushed, so a crash halfway loses nothing and the repack can be run
// again.
func (h *Engine) Repack(ctx context.Context, r api.RepackRequest) (api.HSMResult, error) {
	if !h.hasVolume(r.Volume) {
		return api.HSMResult{}, api.Errorf(api.ErrNotFound, "repack: no cartridge %q", r.Volume)
	}
	h.migrateMu.Lock()
	defer h.migrateMu.Unlock()
	h.mu.Lock()
	h.draining[r.Volume] = true // nothing new is written to it meanwhile
	h.mu.Unlock()
	defer func() {
		h.mu.Lock()
		delete(h.draining, r.Volume)
		h.mu.Unlock()
	}()
	var total api.HSMResult
	for {
		cands, err := h.store.CopiesOn(ctx, r.Volume, 0, 1000)
		if err != nil || len(cands) == 0 {
			if err != nil {
				return total, err
			}
			break
		}
		recalled := map[int64]bool{}
		for i, cd := range cands {
			if cd.Bitfile.OnDisk {
				continue
			}
			if err := h.recallWait(ctx, cd.Bitfile, h.pathOf(ctx, cd.Inode), h.c.PoolOf(cd.Inode.COS)); err != nil {
				return total, fmt.Errorf("repack %s: recall %s: %w", r.Volume, h.pathOf(ctx, cd.Inode), err)
			}
			recalled[cd.Bitfile.ID] = true
			if cands[i].Bitfile, err = h.store.Bitfile(ctx, cd.Bitfile.ID); err != nil {
				return total, err
			}
		}
		res, err := h.migratePass(ctx, slices.Values(cands))
		if err != nil {
			return total, fmt.Errorf("repack %s: %w", r.Volume, err)
		}
		moved := 0
		for _, cd := range cands {
			b, err := h.store.Bitfile(ctx, cd.Bitfile.ID)
			if err != nil {
				continue // removed meanwhile
			}
			if len(b.Tapes) <= len(cd.Bitfile.Tapes) {
				continue // not rewritten
			}
			for _, tc := range b.Tapes {
				if tc.Volume == r.Volume {
					if err := h.store.DropTapeCopy(ctx, b.ID, tc.Copy); err != nil && !errors.Is(err, api.ErrNotFound) {
						return total, err
					}
				}
			}
			if recalled[b.ID] {
				h.c.DiskChanged() // what is on disk changes
				if err := h.store.DropDiskCopy(ctx, b.ID); err != nil && !errors.Is(err, api.ErrNotFound) {
					return total, err
				}
			}
			moved++
		}
		total.Files += moved
		total.Bytes += res.Bytes
		total.TapeFiles += res.TapeFiles
		if moved == 0 {
			return total, fmt.Errorf("repack %s: no copy could be moved off it", r.Volume)
		}
	}
	return total, h.erase(ctx, r.Volume)
}

// erase empties volume on a free drive.
func (h *Engine) erase(ctx context.Context, volume string) error {
	drive, have, ok := h.takeDrive("repack", func(_, v string) bool { return v == volume })
	if !ok {
		return h.errNoUsableDrive("repack: erase " + volume)
	}
	defer h.releaseDrive(drive)
	if err := h.mountOn(ctx, drive, have, volume); err != nil {
		return fmt.Errorf("repack: erase %s: %w", volume, err)
	}
	if err := h.lib.Erase(ctx, drive); err != nil {
		return fmt.Errorf("repack: erase %s: %w", volume, err)
	}
	h.log.Info("hsm: cartridge repacked and erased", "volume", volume)
	return nil
}

// errNoDrive: every drive is busy or failed.
var errNoDrive = errors.New("no tape drive free")

// recallWait recalls b and waits until it is on disk.
func (h *Engine) recallWait(ctx context.Context, b catalog.Bitfile, path, pool string) error {
	if _, err := h.store.QueueRecall(ctx, catalog.Recall{Bitfile: b.ID, Queued: h.clk.Now().UnixNano(), Priority: 1}); err != nil {
		return err
	}
	if err := h.enqueue(b, h.clk.Now(), 1, path, pool); err != nil {
		h.store.DoneRecall(ctx, b.ID)
		return err
	}
	h.mu.Lock()
	r := h.recalls[b.ID]
	h.mu.Unlock()
	if r == nil {
		return nil // already done
	}
	select {
	case <-r.done:
		return r.err
	case <-ctx.Done():
		return ctx.Err()
	}
}
