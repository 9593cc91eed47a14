package hsm

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"time"

	"github.com/strata-storage/strata/internal/api"
	"github.com/strata-storage/strata/internal/catalog"
	"github.com/strata-storage/strata/internal/tape"
)

// RebuildResult counts what Rebuild found.
type RebuildResult struct {
	Cartridges, TapeFiles, Files, Copies int
}

// Rebuild recreates the namespace of every file on tape in store (a new,
// empty catalog) from the cartridges' self-describing tape files alone:
// directories, files with their attributes and fixity, and each file's tape
// copies; the files are on tape only. A path written more than once keeps
// its newest version (the highest bitfile number). Tape does not record
// deletions, so files removed since they were migrated come back, as they
// would from HPSS or CTA tapes; repack removes them for good.
func Rebuild(ctx context.Context, lib tape.Library, store catalog.Store, log *slog.Logger) (RebuildResult, error) {
	var res RebuildResult
	// A copy is one entry, or the entries of a striped copy (same CopyID).
	type copyOf struct {
		id      string
		stripes []catalog.TapeCopy
		written time.Time
	}
	type found struct {
		e      tape.Entry
		copies []*copyOf
	}
	files := map[int64]*found{} // by original bitfile
	var order []int64
	for _, ci := range lib.Cartridges() {
		if ci.Files == 0 {
			continue
		}
		drive, err := driveFor(ctx, lib, ci)
		if err != nil {
			return res, err
		}
		res.Cartridges++
		for seq := 1; seq <= ci.Files; seq++ {
			h, err := lib.ReadHeader(ctx, drive, seq)
			if err != nil {
				return res, fmt.Errorf("rebuild: %s tape file %d: %w", ci.Volume, seq, err)
			}
			tr, err := lib.ReadTrailer(ctx, drive, seq)
			if err != nil {
				return res, fmt.Errorf("rebuild: %s tape file %d: %w", ci.Volume, seq, err)
			}
			if len(tr.Entries) != len(h.Entries) {
				return res, fmt.Errorf("rebuild: %s tape file %d: %d entries, %d checksums", ci.Volume, seq, len(h.Entries), len(tr.Entries))
			}
			res.TapeFiles++
			for i, e := range h.Entries {
				f := files[e.Bitfile]
				if f == nil {
					f = &found{e: e}
					files[e.Bitfile] = f
					order = append(order, e.Bitfile)
				}
				tc := catalog.TapeCopy{Stripe: e.Stripe, Volume: ci.Volume, Seq: seq, Position: h.Start, Offset: e.Offset, Length: e.Size, CRC32C: tr.Entries[i]}
				var cp *copyOf
				for _, o := range f.copies {
					if e.CopyID != "" && o.id == e.CopyID {
						cp = o
					}
				}
				if cp == nil {
					// Copies are numbered in the order they were written.
					cp = &copyOf{id: e.CopyID, written: h.Written}
					k := len(f.copies)
					for k > 0 && f.copies[k-1].written.After(h.Written) {
						k--
					}
					f.copies = slices.Insert(f.copies, k, cp)
				}
				cp.stripes = append(cp.stripes, tc)
			}
		}
	}
	// Newest version of each path.
	byPath := map[string]int64{}
	for _, id := range order {
		p := files[id].e.Path
		if old, ok := byPath[p]; !ok || id > old {
			byPath[p] = id
		}
	}
	dirs := map[string]int64{"/": catalog.RootID}
	for _, id := range order {
		f := files[id]
		if byPath[f.e.Path] != id {
			continue
		}
		comps, err := catalog.SplitPath(f.e.Path)
		if err != nil || len(comps) == 0 {
			log.Warn("rebuild: entry with a bad path skipped", "path", f.e.Path)
			continue
		}
		parent, err := mkdirAll(ctx, store, dirs, comps[:len(comps)-1], f.e)
		if err != nil {
			return res, err
		}
		size, width, unit := f.e.Size, 1, int64(4<<20)
		if f.e.Stripes > 1 {
			size, width, unit = f.e.FileSize, f.e.Stripes, f.e.StripeUnit
		}
		b, err := store.CreatePending(ctx, catalog.Bitfile{Size: size, StripeWidth: width, StripeUnit: unit, Lease: 1 << 62})
		if err != nil {
			return res, err
		}
		b.Fixity = f.e.Fixity
		in := catalog.Inode{Parent: parent, Name: comps[len(comps)-1], Mode: f.e.Mode, UID: f.e.UID, GID: f.e.GID, Size: size,
			Mtime: f.e.Mtime, Ctime: f.e.Mtime, Atime: f.e.Mtime, COS: f.e.COS}
		if _, err := store.Commit(ctx, in, &b, false); err != nil {
			return res, fmt.Errorf("rebuild %s: %w", f.e.Path, err)
		}
		for _, cp := range f.copies {
			if f.e.Stripes > 1 && len(cp.stripes) != f.e.Stripes {
				log.Warn("rebuild: striped copy incomplete on tape, skipped", "path", f.e.Path, "have", len(cp.stripes), "stripes", f.e.Stripes)
				continue
			}
			slices.SortFunc(cp.stripes, func(a, b catalog.TapeCopy) int { return a.Stripe - b.Stripe })
			if err := store.AddTapeCopy(ctx, b.ID, cp.stripes...); err != nil {
				return res, fmt.Errorf("rebuild %s: %w", f.e.Path, err)
			}
			res.Copies++
		}
		if err := store.DropDiskCopy(ctx, b.ID); err != nil {
			return res, fmt.Errorf("rebuild %s: %w", f.e.Path, err)
		}
		res.Files++
	}
	return res, nil
}

// driveFor mounts ci on a drive (the one holding it, or the first free).
func driveFor(ctx context.Context, lib tape.Library, ci tape.CartridgeInfo) (string, error) {
	for _, now := range lib.Cartridges() { // where it is now, not when listed
		if now.Volume == ci.Volume && now.Drive != "" {
			return now.Drive, nil
		}
	}
	var last error = errors.New("no working drive")
	for _, d := range lib.Drives() {
		if d.Failed || d.Busy {
			continue
		}
		if d.Volume != "" {
			if err := lib.Dismount(ctx, d.ID); err != nil {
				last = err
				continue
			}
		}
		if err := lib.Mount(ctx, d.ID, ci.Volume); err != nil {
			last = err
			continue
		}
		return d.ID, nil
	}
	return "", fmt.Errorf("rebuild: mount %s: %w", ci.Volume, last)
}

func mkdirAll(ctx context.Context, store catalog.Store, dirs map[string]int64, comps []string, e tape.Entry) (int64, error) {
	parent := catalog.RootID
	path := ""
	for _, c := range comps {
		path += "/" + c
		if id, ok := dirs[path]; ok {
			parent = id
			continue
		}
		in, err := store.Mkdir(ctx, catalog.Inode{Parent: parent, Name: c, Mode: 0o755, UID: e.UID, GID: e.GID, Mtime: e.Mtime, Ctime: e.Mtime, Atime: e.Mtime})
		if errors.Is(err, api.ErrExist) {
			in, err = store.Lookup(ctx, parent, c)
		}
		if err != nil {
			return 0, fmt.Errorf("rebuild: mkdir %s: %w", path, err)
		}
		dirs[path] = in.ID
		parent = in.ID
	}
	return parent, nil
}
