package core

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/strata-storage/strata/internal/api"
	"github.com/strata-storage/strata/internal/catalog"
)

// Scrubbing: reading copies nobody has asked for, to find damage before a
// reader needs the data (see integrity.go for what is done about it).
// Disk copies are verified by their movers, on demand for named files and
// in the background at [integrity] scrub_rate bytes/s over the whole
// namespace; tape copies a cartridge at a time, on demand, by the HSM
// engine (hsm.Engine.ScrubVolume).

// Scrub verifies and repairs the disk copies of the files named, or every
// copy on a cartridge. Admin only.
func (c *Core) Scrub(ctx context.Context, r api.ScrubRequest) (api.HSMResult, error) {
	var res api.HSMResult
	if _, err := admin(ctx, "scrub"); err != nil {
		return res, err
	}
	if r.Volume != "" {
		if c.hsm == nil {
			return res, api.Errorf(api.ErrInvalid, "scrub: no tape library configured")
		}
		return c.hsm.ScrubVolume(ctx, r.Volume)
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
