package sqlstore

import (
	"context"
	"fmt"

	"github.com/strata-storage/strata/internal/api"
	"github.com/strata-storage/strata/internal/catalog"
)

// Concat implements catalog.Store: the sources' segments move, rows only,
// to a new bitfile whose stripe i is source i's one segment; no byte is
// read or written.
func (s *Store) Concat(ctx context.Context, in catalog.Inode, sources []int64, unit int64, fixity string, replace bool) (catalog.Inode, error) {
	in.Kind = catalog.KindFile
	attrs := in.Xattrs
	in.Xattrs = nil // not for the inode cache
	if len(sources) == 0 || unit <= 0 {
		return in, api.Errorf(api.ErrInvalid, "concat %q: no sources, or unit %d", in.Name, unit)
	}
	err := s.write(ctx, func(t *Tx) error {
		id, err := t.newID(bitfileIDs)
		if err != nil {
			return err
		}
		var size int64
		seen := map[int64]bool{}
		for i, sid := range sources {
			if seen[sid] {
				return api.Errorf(api.ErrInvalid, "concat %q: inode %d is listed twice", in.Name, sid)
			}
			seen[sid] = true
			src, err := t.get(sid)
			if err != nil {
				return err
			}
			if src.Kind != catalog.KindFile || src.Bitfile == 0 || src.Parent == in.Parent && src.Name == in.Name {
				return api.Errorf(api.ErrInvalid, "concat %q: source %q is not another file with data", in.Name, src.Name)
			}
			n, err := t.concatSource(src, id, i, unit, i == len(sources)-1)
			if err != nil {
				return fmt.Errorf("concat %q: source %q: %w", in.Name, src.Name, err)
			}
			size += n
			t.drop(src.Parent, src.Name)
			if _, err := t.Exec("DELETE FROM inodes WHERE id = ?", src.ID); err != nil {
				return err
			}
			if err := t.touchDir(src.Parent, in.Ctime); err != nil {
				return err
			}
		}
		if _, err := t.Exec("INSERT INTO bitfiles (id, state, size, stripe_width, stripe_unit, fixity, epoch, lease) VALUES (?, ?, ?, ?, ?, ?, 0, 0)",
			id, catalog.Committed, size, len(sources), unit, fixity); err != nil {
			return fmt.Errorf("catalog: insert bitfile: %w", err)
		}
		in.Bitfile, in.Size = id, size
		if err := t.commitInode(&in, replace); err != nil {
			return err
		}
		return t.replaceXattrs(in.ID, attrs)
	})
	return in, err
}

// concatSource moves the one disk segment of src's bitfile to stripe i of
// bitfile to and forgets src's bitfile, returning its size. It must be
// committed, on disk, one stripe, without tape copies, and unit long
// (the last source: at most unit).
func (t *Tx) concatSource(src catalog.Inode, to int64, i int, unit int64, last bool) (int64, error) {
	b, err := scanBitfile(t.QueryRow("SELECT "+bitfileCols+" FROM bitfiles WHERE id = ?", src.Bitfile))
	if err != nil {
		return 0, notFound(err, "bitfile %d", src.Bitfile)
	}
	var tapes int
	if err := t.QueryRow("SELECT COUNT(*) FROM tape_copies WHERE bitfile = ?", b.ID).Scan(&tapes); err != nil {
		return 0, err
	}
	switch {
	case b.State != catalog.Committed || !b.OnDisk || b.StripeWidth != 1 || tapes > 0:
		return 0, api.Errorf(api.ErrInvalid, "only a file of one stripe on disk, without tape copies, can be joined")
	case b.Size <= 0 || b.Size > unit || !last && b.Size != unit:
		return 0, api.Errorf(api.ErrInvalid, "%d bytes where the join takes %d", b.Size, unit)
	}
	n, err := t.Exec("UPDATE segments SET bitfile = ?, copy = 0, stripe = ? WHERE bitfile = ? AND copy = ?", to, i, b.ID, b.DiskGen)
	if err != nil {
		return 0, err
	}
	if n != 1 {
		return 0, fmt.Errorf("catalog: bitfile %d has %d disk segments", b.ID, n)
	}
	if _, err := t.Exec("DELETE FROM bitfiles WHERE id = ?", b.ID); err != nil {
		return 0, err
	}
	return b.Size, nil
}
