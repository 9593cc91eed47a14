package hsm

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"

	"github.com/strata-storage/strata/internal/api"
	"github.com/strata-storage/strata/internal/catalog"
	"github.com/strata-storage/strata/internal/tape"
	"github.com/strata-storage/strata/internal/tapeserver"
)

// Tape scrubbing: every copy on a cartridge is read on one drive, in
// tape order, and checked against its CRC32C; damage is acted on as a
// recall finding it would be (tapeDamaged). It is on demand, a cartridge
// at a time, since reading one holds a drive for hours (sites schedule
// it, as CTA sites schedule tape verification).

// tapeRead is one stripe of a tape copy on the cartridge being scrubbed.
type tapeRead struct {
	cd catalog.Candidate
	tc catalog.TapeCopy
}

// ScrubVolume reads every copy on volume on one drive, in tape order a
// page of files at a time, checking each against its CRC32C.
func (h *Engine) ScrubVolume(ctx context.Context, volume string) (api.HSMResult, error) {
	var res api.HSMResult
	if !h.hasVolume(volume) {
		return res, api.Errorf(api.ErrNotFound, "scrub: no cartridge %q", volume)
	}
	drive, have, ok := h.takeDrive("scrub", func(_, v string) bool { return v == volume })
	if !ok {
		return res, h.errNoUsableDrive("scrub " + volume)
	}
	defer h.releaseDrive(drive)
	if err := h.mountOn(ctx, drive, have, volume); err != nil {
		if errors.Is(err, tape.ErrDriveFailed) {
			h.driveFailed(ctx, drive, err)
		}
		return res, fmt.Errorf("scrub %s: %w", volume, err)
	}
	for after := int64(0); ; {
		page, err := h.store.CopiesOn(ctx, volume, after, 10000)
		if err != nil || len(page) == 0 {
			return res, err
		}
		var reads []tapeRead
		for _, cd := range page {
			after = cd.Bitfile.ID
			for _, tc := range cd.Bitfile.Tapes {
				if tc.Volume == volume {
					reads = append(reads, tapeRead{cd, tc})
				}
			}
		}
		slices.SortFunc(reads, func(a, b tapeRead) int { return cmp.Compare(a.tc.Position+a.tc.Offset, b.tc.Position+b.tc.Offset) })
		for _, rd := range reads {
			if err := h.scrubCopy(ctx, drive, rd, &res); err != nil {
				if errors.Is(err, tape.ErrDriveFailed) {
					h.driveFailed(ctx, drive, err)
				}
				return res, fmt.Errorf("scrub %s: %w", volume, err)
			}
		}
	}
}

// scrubCopy reads one stripe of a tape copy and acts on damage
// (tapeDamaged).
func (h *Engine) scrubCopy(ctx context.Context, drive string, rd tapeRead, res *api.HSMResult) error {
	tc := rd.tc
	v, err := h.jobs.Verify(ctx, tapeserver.VerifyJob{Drive: drive, Seq: tc.Seq, Offset: tc.Offset, Length: tc.Length})
	if err != nil {
		return err
	}
	res.Files++
	res.Bytes += v.Length
	if v.Damage == "" && v.Length == tc.Length && v.CRC32C == tc.CRC32C {
		return nil
	}
	cause := api.Errorf(api.ErrCorrupt, "%s tape file %d: %d bytes crc32c %08x read, the catalog records %d bytes %08x", tc.Volume, tc.Seq, v.Length, v.CRC32C, tc.Length, tc.CRC32C)
	if v.Damage != "" {
		cause = api.Errorf(api.ErrCorrupt, "%s", v.Damage)
	}
	b, err := h.store.Bitfile(ctx, rd.cd.Bitfile.ID)
	if err != nil {
		return nil // removed meanwhile
	}
	path := h.pathOf(ctx, rd.cd.Inode)
	res.Damaged = append(res.Damaged, h.tapeDamaged(ctx, b, path, rd.cd.Inode.COS, tc.Copy, tc.Volume, cause))
	return nil
}

// hasVolume reports whether the library has the cartridge.
func (h *Engine) hasVolume(volume string) bool {
	for _, ci := range h.lib.Cartridges() {
		if ci.Volume == volume {
			return true
		}
	}
	return false
}
