package core

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/strata-storage/strata/internal/api"
	"github.com/strata-storage/strata/internal/catalog"
	"github.com/strata-storage/strata/internal/tape"
	"github.com/strata-storage/strata/internal/tapeserver"
)

// Scrubbing: reading copies nobody has asked for, to find damage before a
// reader needs the data (see integrity.go for what is done about it).
// Disk copies are verified by their movers, on demand for named files and
// in the background at [integrity] scrub_rate bytes/s over the whole
// namespace; tape copies a cartridge at a time, on demand, since reading a
// cartridge holds a drive for hours (sites schedule it, as CTA sites
// schedule tape verification).

// Scrub verifies and repairs the disk copies of the files named, or every
// copy on a cartridge. Admin only.
func (c *Core) Scrub(ctx context.Context, r api.ScrubRequest) (api.HSMResult, error) {
	var res api.HSMResult
	if _, err := admin(ctx, "scrub"); err != nil {
		return res, err
	}
	if r.Volume != "" {
		return c.scrubVolume(ctx, r.Volume)
	}
	for _, p := range r.Paths {
		comps, in, err := c.statPath(ctx, nil, p)
		if err != nil {
			return res, fmt.Errorf("scrub: %w", err)
		}
		if in.Kind == catalog.KindFile && in.Bitfile != 0 {
			if _, err := c.scrubFile(ctx, joinPath(comps), in, &res); err != nil {
				return res, err
			}
		}
	}
	return res, nil
}

// scrubFile verifies in's disk copy, if it has one, and returns how many
// bytes were read.
func (c *Core) scrubFile(ctx context.Context, path string, in catalog.Inode, res *api.HSMResult) (int64, error) {
	b, err := c.store.Bitfile(ctx, in.Bitfile)
	if errors.Is(err, api.ErrNotFound) || (err == nil && !b.OnDisk) {
		return 0, nil // removed meanwhile, or on tape only (scrub its cartridges)
	}
	if err != nil {
		return 0, fmt.Errorf("scrub %s: %w", path, err)
	}
	reply, err := c.verifyDiskCopy(ctx, path, in.COS, b, b.Segments)
	note, err := damageNote(path, reply, err)
	if err != nil {
		return 0, fmt.Errorf("scrub %s: %w", path, err)
	}
	res.Files++
	res.Bytes += b.Size
	if note != "" {
		res.Damaged = append(res.Damaged, note)
	}
	return b.Size, nil
}

// scrubber verifies every disk copy in the namespace, pass after pass,
// at ScrubRate bytes/s.
func (c *Core) scrubber(ctx context.Context) {
	for {
		start := time.Now()
		res, err := c.scrubPass(ctx)
		if ctx.Err() != nil {
			return
		}
		if err != nil {
			c.log.Warn("integrity: scrub pass stopped", "files", res.Files, "bytes", res.Bytes, "err", err)
		} else {
			c.log.Info("integrity: scrub pass done", "files", res.Files, "bytes", res.Bytes, "damaged", len(res.Damaged), "took", time.Since(start).Round(time.Second))
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(time.Until(start.Add(c.cfg.ScrubEvery))):
		}
	}
}

// scrubPass walks the namespace depth first, a page of entries at a time,
// verifying each file's disk copy and pausing after each so that the
// pass reads ScrubRate bytes/s.
func (c *Core) scrubPass(ctx context.Context) (api.HSMResult, error) {
	var res api.HSMResult
	type dir struct {
		id   int64
		path string
	}
	stack := []dir{{catalog.RootID, ""}}
	start, read := time.Now(), int64(0)
	for len(stack) > 0 {
		d := stack[len(stack)-1]
		stack = stack[:len(stack)-1]
		for after := ""; ; {
			page, err := c.store.List(ctx, d.id, after, 1000)
			if err != nil {
				if errors.Is(err, api.ErrNotFound) {
					break // removed meanwhile
				}
				return res, err
			}
			for _, in := range page {
				after = in.Name
				switch {
				case in.Kind == catalog.KindDir:
					stack = append(stack, dir{in.ID, d.path + "/" + in.Name})
				case in.Kind == catalog.KindFile && in.Bitfile != 0:
					n, err := c.scrubFile(ctx, d.path+"/"+in.Name, in, &res)
					if err != nil {
						c.log.Warn("integrity: scrub", "err", err) // a mover away: the next pass
					}
					read += n
					ahead := time.Duration(float64(read)/float64(c.cfg.ScrubRate)*float64(time.Second)) - time.Since(start)
					if ahead > 10*time.Millisecond {
						select {
						case <-ctx.Done():
							return res, ctx.Err()
						case <-time.After(ahead):
						}
					}
				}
			}
			if len(page) < 1000 {
				break
			}
		}
	}
	return res, nil
}

// tapeRead is one stripe of a tape copy on the cartridge being scrubbed.
type tapeRead struct {
	cd catalog.Candidate
	tc catalog.TapeCopy
}

// scrubVolume reads every copy on volume on one drive, in tape order a
// page of files at a time, checking each against its CRC32C.
func (c *Core) scrubVolume(ctx context.Context, volume string) (api.HSMResult, error) {
	var res api.HSMResult
	h := c.hsm
	if h == nil {
		return res, api.Errorf(api.ErrInvalid, "scrub: no tape library configured")
	}
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
		page, err := c.store.CopiesOn(ctx, volume, after, 10000)
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
func (h *hsm) scrubCopy(ctx context.Context, drive string, rd tapeRead, res *api.HSMResult) error {
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
	b, err := h.c.store.Bitfile(ctx, rd.cd.Bitfile.ID)
	if err != nil {
		return nil // removed meanwhile
	}
	path := h.pathOf(ctx, rd.cd.Inode)
	res.Damaged = append(res.Damaged, h.tapeDamaged(ctx, b, path, rd.cd.Inode.COS, tc.Copy, cause))
	return nil
}

// hasVolume reports whether the library has the cartridge.
func (h *hsm) hasVolume(volume string) bool {
	for _, ci := range h.lib.Cartridges() {
		if ci.Volume == volume {
			return true
		}
	}
	return false
}
