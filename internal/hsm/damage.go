package hsm

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/strata-storage/strata/internal/api"
	"github.com/strata-storage/strata/internal/catalog"
)

// The tape side of self-healing copies (see package core's integrity.go
// for the whole rule). A disk copy the core drops as damaged or
// unreachable is made again by a recall (Repair); a tape copy found
// damaged — by a recall or by a scrub — is dropped when the file has
// another copy and made again by migration once the file is on disk; a
// file whose only copy is damaged is lost, which the core records.

// Repair queues the recall that re-makes a dropped disk copy; its success
// counts as a repair.
func (h *Engine) Repair(ctx context.Context, bitfile int64, path, pool string) error {
	return h.recallFor(ctx, bitfile, path, pool, func(r *recall) { r.repair = true })
}

// recallFor queues a recall of bitfile for the engine's own purpose, marked
// on the recall by mark.
func (h *Engine) recallFor(ctx context.Context, bitfile int64, path, pool string, mark func(*recall)) error {
	b, err := h.store.Bitfile(ctx, bitfile)
	if err != nil {
		return err
	}
	now := h.clk.Now()
	if _, err := h.store.QueueRecall(ctx, catalog.Recall{Bitfile: b.ID, Queued: now.UnixNano()}); err != nil {
		return err
	}
	if err := h.enqueue(b, now, 0, path, pool); err != nil {
		h.store.DoneRecall(ctx, b.ID)
		return err
	}
	h.mu.Lock()
	if r := h.recalls[b.ID]; r != nil {
		mark(r)
	}
	h.mu.Unlock()
	return nil
}

// recallDamaged acts on a tape copy a recall found damaged (tapeDamaged),
// the path being the recall's.
func (h *Engine) recallDamaged(ctx context.Context, bitfile int64, copy int, volume string, cause error) {
	b, err := h.store.Bitfile(ctx, bitfile)
	if err != nil {
		return // removed meanwhile
	}
	path := fmt.Sprintf("<bitfile %d>", bitfile)
	h.mu.Lock()
	if r := h.recalls[bitfile]; r != nil {
		path = r.path
	}
	h.mu.Unlock()
	h.tapeDamaged(ctx, b, path, "", copy, volume, cause)
}

// tapeDamaged acts on a damaged tape copy of b and says what it did. The
// copy is dropped if the file has another one, and made again by
// migration once the file is on disk: at once if it is, after the recall
// under way or queued here (from another copy) if not. With no other
// copy, the file is lost. The cartridge it was read from (volume) takes
// no more writes (cartridgeDamaged), before anything is made again.
func (h *Engine) tapeDamaged(ctx context.Context, b catalog.Bitfile, path, cos string, copy int, volume string, cause error) string {
	c := h.c
	c.TapeDamaged()
	h.cartridgeDamaged(ctx, volume, cause)
	copies := map[int]bool{}
	for _, tc := range b.Tapes {
		copies[tc.Copy] = true
	}
	if !b.OnDisk && len(copies) <= 1 {
		why := fmt.Sprintf("its only copy, on tape, is damaged (%v)", cause)
		c.MarkLost(b, path, why)
		return path + " is lost: " + why
	}
	h.log.Error("integrity: tape copy damaged; dropping it (migration makes it again)", "path", path, "bitfile", b.ID, "copy", copy, "err", cause)
	if err := h.store.DropTapeCopy(ctx, b.ID, copy); err != nil && !errors.Is(err, api.ErrNotFound) {
		h.log.Warn("integrity: the damaged tape copy stays recorded", "path", path, "copy", copy, "err", err)
		return fmt.Sprintf("%s: tape copy %d damaged; it stays recorded: %v", path, copy, err)
	}
	h.mu.Lock()
	r := h.recalls[b.ID]
	if r != nil {
		r.remake = true
	}
	h.mu.Unlock()
	switch {
	case r != nil:
	case b.OnDisk:
		h.remake(path)
	default:
		if err := h.recallFor(ctx, b.ID, path, c.PoolOf(cos), func(r *recall) { r.remake = true }); err != nil {
			return fmt.Sprintf("%s: tape copy %d damaged and dropped; recalling the file to make it again failed: %v", path, copy, err)
		}
	}
	return fmt.Sprintf("%s: tape copy %d damaged; dropped, and made again from a good copy", path, copy)
}

// repaired runs when a recall that re-makes a damaged copy, or that
// found a damaged tape copy on its way, has brought the file back to
// disk: it counts the repair and makes the missing tape copy again.
func (h *Engine) repaired(r *recall) {
	if r.repair {
		h.c.Repaired()
		h.log.Info("integrity: disk copy re-made from tape", "path", r.path, "bitfile", r.bitfile)
	}
	if r.remake {
		h.remake(r.path)
	}
}

// remake queues path for the remaker, which makes the tape copies it
// lacks.
func (h *Engine) remake(path string) {
	if strings.HasPrefix(path, "<") { // a recall resumed after a restart: no path at hand
		h.log.Warn("integrity: a damaged tape copy is left to the migration policy to make again", "file", path)
		return
	}
	select {
	case h.remakes <- path:
	default:
		h.log.Warn("integrity: too many tape copies to make again at once; the migration policy will make this one", "path", path)
	}
}

// remaker makes again the tape copies dropped as damaged, one file after
// another, for as long as the HSM runs.
func (h *Engine) remaker(ctx context.Context) {
	for {
		var path string
		select {
		case <-ctx.Done():
			return
		case path = <-h.remakes:
		}
		res, err := h.migrate(ctx, []string{path}, 0)
		switch {
		case err != nil:
			h.log.Warn("integrity: a damaged tape copy is not made again yet; the migration policy will", "path", path, "err", err)
		case res.Files > 0:
			h.c.Repaired()
			h.log.Info("integrity: tape copy made again", "path", path)
		}
	}
}
