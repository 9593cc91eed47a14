package sqlstore

// The namespace: inodes, directories, creates, commits, renames, removes
// and attributes.

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"

	"github.com/strata-storage/strata/internal/api"
	"github.com/strata-storage/strata/internal/catalog"
)

const inodeCols = "id, parent, name, kind, mode, uid, gid, size, mtime, ctime, atime, cos, bitfile, target"

const insertInode = "INSERT INTO inodes (id, parent, name, kind, mode, uid, gid, size, mtime, ctime, atime, cos, bitfile, target) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)"

const insertInodeIfFree = insertInode + " ON CONFLICT (parent, name) DO NOTHING"

type scanner interface{ Scan(...any) error }

func scanInode(r scanner) (catalog.Inode, error) {
	var in catalog.Inode
	err := r.Scan(&in.ID, &in.Parent, &in.Name, &in.Kind, &in.Mode, &in.UID, &in.GID, &in.Size, &in.Mtime, &in.Ctime, &in.Atime, &in.COS, &in.Bitfile, &in.Target)
	return in, err
}

func notFound(err error, format string, args ...any) error {
	if errors.Is(err, sql.ErrNoRows) {
		return api.Errorf(api.ErrNotFound, format, args...)
	}
	return fmt.Errorf("catalog: "+format+": %w", append(args, err)...)
}

// Get implements catalog.Store.
func (s *Store) Get(ctx context.Context, id int64) (catalog.Inode, error) {
	row, err := s.readRow(ctx, "SELECT "+inodeCols+" FROM inodes WHERE id = ?", id)
	if err != nil {
		return catalog.Inode{}, err
	}
	in, err := scanInode(row)
	if err != nil {
		return in, notFound(err, "inode %d", id)
	}
	return in, nil
}

// Lookup implements catalog.Store.
func (s *Store) Lookup(ctx context.Context, parent int64, name string) (catalog.Inode, error) {
	in, seq, ok := s.cache.get(parent, name)
	if ok {
		return in, nil
	}
	row, err := s.readRow(ctx, "SELECT "+inodeCols+" FROM inodes WHERE parent = ? AND name = ?", parent, name)
	if err != nil {
		return catalog.Inode{}, err
	}
	in, err = scanInode(row)
	if err != nil {
		return in, notFound(err, "lookup %q", name)
	}
	s.cache.fill(in, seq)
	return in, nil
}

// List implements catalog.Store.
func (s *Store) List(ctx context.Context, dir int64, after string, limit int) ([]catalog.Inode, error) {
	q, args := "SELECT "+inodeCols+" FROM inodes WHERE parent = ? AND name > ? AND id <> ? ORDER BY name", []any{dir, after, catalog.RootID}
	if limit > 0 {
		q, args = q+" LIMIT ?", append(args, limit)
	}
	rows, err := s.readRows(ctx, q, args...)
	if err != nil {
		return nil, fmt.Errorf("catalog: list %d: %w", dir, err)
	}
	defer rows.Close()
	var out []catalog.Inode
	for rows.Next() {
		in, err := scanInode(rows)
		if err != nil {
			return nil, fmt.Errorf("catalog: list %d: %w", dir, err)
		}
		out = append(out, in)
	}
	return out, rows.Err()
}

// set and drop queue cache updates that take effect if the op commits.
func (t *Tx) set(in catalog.Inode) { t.after = append(t.after, func() { t.s.cache.set(in) }) }
func (t *Tx) drop(parent int64, name string) {
	t.after = append(t.after, func() { t.s.cache.drop(parent, name) })
}

func (t *Tx) get(id int64) (catalog.Inode, error) {
	in, err := scanInode(t.QueryRow("SELECT "+inodeCols+" FROM inodes WHERE id = ?", id))
	if err != nil {
		return in, notFound(err, "inode %d", id)
	}
	return in, nil
}

// lookup returns the entry or ok=false when absent.
func (t *Tx) lookup(parent int64, name string) (catalog.Inode, bool, error) {
	in, err := scanInode(t.QueryRow("SELECT "+inodeCols+" FROM inodes WHERE parent = ? AND name = ?", parent, name))
	if errors.Is(err, sql.ErrNoRows) {
		return in, false, nil
	}
	if err != nil {
		return in, false, fmt.Errorf("catalog: lookup %q: %w", name, err)
	}
	return in, true, nil
}

func (t *Tx) requireDir(id int64) error {
	if _, ok := t.s.dirs[id]; ok {
		return nil
	}
	var kind catalog.Kind
	if err := t.QueryRow("SELECT kind FROM inodes WHERE id = ?", id).Scan(&kind); err != nil {
		return notFound(err, "inode %d", id)
	}
	if kind != catalog.KindDir {
		return api.Errorf(api.ErrNotDir, "inode %d", id)
	}
	t.knowDir(id)
	return nil
}

// forgetDirs removes directories from the known set as this transaction
// deletes them: at once, so that later operations in the same group check
// the database; ids nil: all of them.
func (t *Tx) forgetDirs(ids ...int64) {
	t.s.dirsGen++
	if ids == nil {
		clear(t.s.dirs)
	}
	for _, id := range ids {
		delete(t.s.dirs, id)
	}
}

// maxDirs bounds the writer's set of known directories; past it the set
// starts again empty.
const maxDirs = 1 << 16

// knowDir records, once this transaction commits, that directory id exists.
func (t *Tx) knowDir(id int64) {
	gen := t.s.dirsGen
	t.after = append(t.after, func() {
		if t.s.dirsGen != gen {
			return
		}
		if len(t.s.dirs) >= maxDirs {
			clear(t.s.dirs)
		}
		t.s.dirs[id] = struct{}{}
	})
}

// insert adds in under a new id; with ifFree it inserts nothing (ok
// false) when the name is taken.
func (t *Tx) insert(in catalog.Inode, ifFree bool) (id int64, ok bool, err error) {
	if id, err = t.newID(inodeIDs); err != nil {
		return 0, false, err
	}
	q := insertInode
	if ifFree {
		q = insertInodeIfFree
	}
	n, err := t.Exec(q, id, in.Parent, in.Name, in.Kind, in.Mode, in.UID, in.GID, in.Size, in.Mtime, in.Ctime, in.Atime, in.COS, in.Bitfile, in.Target)
	if err == nil && n == 0 && !ifFree {
		err = errors.New("no row inserted")
	}
	if err != nil {
		return 0, false, fmt.Errorf("catalog: insert %q: %w", in.Name, err)
	}
	return id, n == 1, nil
}

// Mkdir implements catalog.Store.
func (s *Store) Mkdir(ctx context.Context, in catalog.Inode) (catalog.Inode, error) {
	in.Kind, in.Size, in.Bitfile, in.Target = catalog.KindDir, 0, 0, ""
	return s.create(ctx, in, "mkdir")
}

// Symlink implements catalog.Store.
func (s *Store) Symlink(ctx context.Context, in catalog.Inode) (catalog.Inode, error) {
	in.Kind, in.Size, in.Bitfile = catalog.KindSymlink, int64(len(in.Target)), 0
	return s.create(ctx, in, "symlink")
}

// create inserts a directory or a symbolic link under a free name.
func (s *Store) create(ctx context.Context, in catalog.Inode, op string) (catalog.Inode, error) {
	err := s.write(ctx, func(t *Tx) error {
		if err := t.requireDir(in.Parent); err != nil {
			return err
		}
		if _, ok, err := t.lookup(in.Parent, in.Name); err != nil {
			return err
		} else if ok {
			return api.Errorf(api.ErrExist, "%s %q", op, in.Name)
		}
		id, _, err := t.insert(in, false)
		if err != nil {
			return err
		}
		in.ID = id
		t.set(in)
		if in.Kind == catalog.KindDir {
			t.knowDir(id)
		}
		return t.touchDir(in.Parent, in.Ctime)
	})
	return in, err
}

// touchDir sets a directory's mtime and ctime to when an entry was added
// to it or removed (0: now), as POSIX has them follow their entries.
// Directories are not in the inode cache (see inodeCache), so nothing
// there goes stale.
func (t *Tx) touchDir(id, when int64) error {
	if when == 0 {
		when = time.Now().UnixNano()
	}
	if t.late.on {
		t.late.touches = append(t.late.touches, dirTouch{id, when})
		return nil
	}
	return t.setDirTimes(id, when)
}

func (t *Tx) setDirTimes(id, when int64) error {
	_, err := t.Exec("UPDATE inodes SET mtime = ?, ctime = ? WHERE id = ?", when, when, id)
	return err
}

// Commit implements catalog.Store.
func (s *Store) Commit(ctx context.Context, in catalog.Inode, b *catalog.Bitfile, replace bool) (catalog.Inode, error) {
	in.Kind = catalog.KindFile
	in.Bitfile = 0
	if b != nil {
		in.Bitfile, in.Size = b.ID, b.Size
	}
	attrs := in.Xattrs
	in.Xattrs = nil // not for the inode cache
	fn := func(t *Tx) error {
		if b != nil {
			if err := t.commitBitfile(b); err != nil {
				return err
			}
		}
		if err := t.commitInode(&in, replace); err != nil {
			return err
		}
		return t.replaceXattrs(in.ID, attrs)
	}
	// A new empty file is one insert (the common create; its directory's
	// times wait for the end of the group); anything else writes several
	// rows and needs its savepoint.
	return in, s.writeLate(ctx, b == nil && !replace && attrs == nil, fn)
}

// commitInode makes in visible at its name: inserted, or with replace
// over the file there (whose data dies).
func (t *Tx) commitInode(in *catalog.Inode, replace bool) error {
	in.Replaced = nil // a group run again starts afresh
	if !replace {
		// One statement inserts if the name is free; only a refusal
		// pays for diagnosis, by reading. The parent is usually a
		// known directory (dirs): checking it inside the insert made
		// SQLite stage the row in a temporary table.
		if err := t.requireDir(in.Parent); err != nil {
			return err
		}
		id, ok, err := t.insert(*in, true)
		if err != nil {
			return err
		}
		if !ok {
			return t.whyTaken(in.Parent, in.Name)
		}
		in.ID = id
		t.set(*in)
		return t.touchDir(in.Parent, in.Ctime)
	}
	old, ok, err := t.lookup(in.Parent, in.Name)
	if err != nil {
		return err
	}
	if !ok {
		if err := t.requireDir(in.Parent); err != nil {
			return err
		}
		if in.ID, _, err = t.insert(*in, false); err != nil {
			return err
		}
		t.set(*in)
		return t.touchDir(in.Parent, in.Ctime)
	}
	if old.Kind == catalog.KindDir {
		return api.Errorf(api.ErrIsDir, "create %q", in.Name)
	}
	gone, err := t.replaced(old)
	if err != nil {
		return err
	}
	if err := t.kill(old.Bitfile); err != nil {
		return err
	}
	in.ID = old.ID
	// (A symbolic link replaced becomes a file.)
	_, err = t.Exec("UPDATE inodes SET kind = ?, mode = ?, uid = ?, gid = ?, size = ?, mtime = ?, ctime = ?, atime = ?, cos = ?, bitfile = ?, target = '' WHERE id = ?",
		in.Kind, in.Mode, in.UID, in.GID, in.Size, in.Mtime, in.Ctime, in.Atime, in.COS, in.Bitfile, in.ID)
	t.set(*in)
	in.Replaced = gone // after the cache took its copy: not a row's
	return err
}

// whyTaken explains an insert the catalog refused under a parent known to
// be a directory: the name is taken. It only reads.
func (t *Tx) whyTaken(parent int64, name string) error {
	old, ok, err := t.lookup(parent, name)
	switch {
	case err != nil:
		return err
	case ok && old.Kind == catalog.KindDir:
		return api.Errorf(api.ErrIsDir, "create %q", name)
	case ok:
		return api.Errorf(api.ErrExist, "create %q", name)
	}
	return fmt.Errorf("catalog: insert %q in %d refused, yet the name is free", name, parent)
}

// commitBitfile marks pending bitfile b committed with its segments'
// lengths and checksums, and gives back to their devices what the writes
// reserved and did not use. Two statements per segment and one for the
// bitfile: the state is checked by the update itself, the reservation read
// inside the statement that returns it.
func (t *Tx) commitBitfile(b *catalog.Bitfile) error {
	n, err := t.Exec("UPDATE bitfiles SET state = ?, size = ?, fixity = ? WHERE id = ? AND state = ?", catalog.Committed, b.Size, b.Fixity, b.ID, catalog.Pending)
	if err != nil {
		return err
	}
	if n == 0 {
		var state catalog.BitfileState
		if err := t.QueryRow("SELECT state FROM bitfiles WHERE id = ?", b.ID).Scan(&state); err != nil {
			return notFound(err, "bitfile %d", b.ID)
		}
		return api.Errorf(api.ErrInvalid, "write %d is no longer pending (expired or aborted; state %d)", b.ID, state)
	}
	for _, sg := range b.Segments {
		// Most segments come to the length reserved for them: only their
		// checksum changes, and their device's use stays.
		n, err := t.Exec("UPDATE segments SET crc32c = ? WHERE bitfile = ? AND copy = ? AND stripe = ? AND length = ?", int64(sg.CRC32C), b.ID, sg.Copy, sg.Stripe, sg.Length)
		if err != nil {
			return err
		}
		if n == 1 {
			continue
		}
		if err := t.writeLate(); err != nil { // the device's row as read is about to change
			return err
		}
		const seg = "FROM segments WHERE bitfile = ? AND copy = ? AND stripe = ?"
		n, err = t.Exec("UPDATE devices SET used = used + ? - (SELECT length "+seg+") WHERE id = (SELECT device "+seg+")",
			sg.Length, b.ID, sg.Copy, sg.Stripe, b.ID, sg.Copy, sg.Stripe)
		if err != nil {
			return err
		}
		if n == 0 {
			return notFound(sql.ErrNoRows, "bitfile %d segment %d.%d", b.ID, sg.Copy, sg.Stripe)
		}
		if _, err := t.Exec("UPDATE segments SET length = ?, crc32c = ? WHERE bitfile = ? AND copy = ? AND stripe = ?", sg.Length, int64(sg.CRC32C), b.ID, sg.Copy, sg.Stripe); err != nil {
			return err
		}
	}
	return nil
}

// kill marks a committed bitfile dead now: readers that opened it before
// may still be reading (see catalog.Bitfile.Lease).
// replaced describes old, about to be replaced by a commit or a rename,
// for quota usage: nil unless it is a file.
func (t *Tx) replaced(old catalog.Inode) (*catalog.Replaced, error) {
	if old.Kind != catalog.KindFile {
		return nil, nil
	}
	gone := &catalog.Replaced{UID: old.UID, GID: old.GID, Size: old.Size}
	if old.Bitfile != 0 {
		if err := t.QueryRow("SELECT on_disk FROM bitfiles WHERE id = ?", old.Bitfile).Scan(&gone.OnDisk); err != nil {
			return nil, notFound(err, "bitfile %d", old.Bitfile)
		}
	}
	return gone, nil
}

func (t *Tx) kill(bitfile int64) error {
	if bitfile == 0 {
		return nil
	}
	_, err := t.Exec("UPDATE bitfiles SET state = ?, lease = ? WHERE id = ?", catalog.Dead, time.Now().UnixNano(), bitfile)
	return err
}

// Rename implements catalog.Store.
func (s *Store) Rename(ctx context.Context, srcParent int64, srcName string, dstParent int64, dstName string, replace bool, ctime int64) (catalog.Inode, error) {
	var src catalog.Inode
	var gone *catalog.Replaced
	err := s.write(ctx, func(t *Tx) error {
		var ok bool
		var err error
		gone = nil // a group run again starts afresh
		src, ok, err = t.lookup(srcParent, srcName)
		if err != nil {
			return err
		}
		if !ok {
			return api.Errorf(api.ErrNotFound, "rename %q", srcName)
		}
		if err := t.requireDir(dstParent); err != nil {
			return err
		}
		if src.Kind == catalog.KindDir {
			// Refuse to move a directory into its own subtree.
			for p := dstParent; p != 0 && p != catalog.RootID; {
				if p == src.ID {
					return api.Errorf(api.ErrInvalid, "rename %q: cannot move a directory into itself", srcName)
				}
				in, err := t.get(p)
				if err != nil {
					return err
				}
				p = in.Parent
			}
		}
		dst, exists, err := t.lookup(dstParent, dstName)
		if err != nil {
			return err
		}
		if exists {
			if dst.ID == src.ID {
				return nil
			}
			switch {
			case !replace:
				return api.Errorf(api.ErrExist, "rename to %q", dstName)
			case dst.Kind == catalog.KindDir && src.Kind != catalog.KindDir:
				return api.Errorf(api.ErrIsDir, "rename to %q", dstName)
			case dst.Kind != catalog.KindDir && src.Kind == catalog.KindDir:
				return api.Errorf(api.ErrNotDir, "rename to %q", dstName)
			case dst.Kind == catalog.KindDir:
				var n int
				if err := t.QueryRow("SELECT COUNT(*) FROM inodes WHERE parent = ?", dst.ID).Scan(&n); err != nil {
					return err
				}
				if n > 0 {
					return api.Errorf(api.ErrNotEmpty, "rename to %q", dstName)
				}
			}
			if gone, err = t.replaced(dst); err != nil {
				return err
			}
			if err := t.kill(dst.Bitfile); err != nil {
				return err
			}
			t.forgetDirs(dst.ID)
			if _, err := t.Exec("DELETE FROM inodes WHERE id = ?", dst.ID); err != nil {
				return err
			}
		}
		t.drop(src.Parent, src.Name)
		from := src.Parent
		src.Parent, src.Name, src.Ctime = dstParent, dstName, ctime
		t.set(src)
		if _, err = t.Exec("UPDATE inodes SET parent = ?, name = ?, ctime = ? WHERE id = ?", dstParent, dstName, ctime, src.ID); err != nil {
			return err
		}
		if err := t.touchDir(from, ctime); err != nil {
			return err
		}
		if dstParent == from {
			return nil
		}
		return t.touchDir(dstParent, ctime)
	})
	src.Replaced = gone // the cache holds src without it
	return src, err
}

// Remove implements catalog.Store.
func (s *Store) Remove(ctx context.Context, parent int64, name string, recursive bool) (catalog.Inode, error) {
	var in catalog.Inode
	err := s.writeLate(ctx, false, func(t *Tx) error {
		var ok bool
		var err error
		in, ok, err = t.lookup(parent, name)
		if err != nil {
			return err
		}
		if !ok {
			return api.Errorf(api.ErrNotFound, "remove %q", name)
		}
		t.drop(in.Parent, in.Name)
		if err := t.touchDir(in.Parent, 0); err != nil {
			return err
		}
		if in.Kind == catalog.KindFile {
			if err := t.kill(in.Bitfile); err != nil {
				return err
			}
			_, err := t.Exec("DELETE FROM inodes WHERE id = ?", in.ID)
			return err
		}
		t.after = append(t.after, t.s.cache.clear)
		if recursive {
			t.forgetDirs() // the tree's directories, without listing them
		} else {
			t.forgetDirs(in.ID)
			var n int
			if err := t.QueryRow("SELECT COUNT(*) FROM inodes WHERE parent = ?", in.ID).Scan(&n); err != nil {
				return err
			}
			if n > 0 {
				return api.Errorf(api.ErrNotEmpty, "remove %q", name)
			}
		}
		const sub = "WITH RECURSIVE sub(id) AS (SELECT CAST(? AS BIGINT) UNION ALL SELECT i.id FROM inodes i JOIN sub ON i.parent = sub.id) "
		if _, err := t.Exec(sub+"UPDATE bitfiles SET state = ?, lease = ? WHERE id IN (SELECT bitfile FROM inodes WHERE bitfile <> 0 AND id IN (SELECT id FROM sub))", in.ID, catalog.Dead, time.Now().UnixNano()); err != nil {
			return err
		}
		_, err = t.Exec(sub+"DELETE FROM inodes WHERE id IN (SELECT id FROM sub)", in.ID)
		return err
	})
	return in, err
}

// SetAttr implements catalog.Store.
func (s *Store) SetAttr(ctx context.Context, id int64, a catalog.Attr) (catalog.Inode, error) {
	var in catalog.Inode
	err := s.write(ctx, func(t *Tx) error {
		var err error
		if in, err = t.get(id); err != nil {
			return err
		}
		if a.Mode != nil {
			in.Mode = *a.Mode
		}
		if a.UID != nil {
			in.UID = *a.UID
		}
		if a.GID != nil {
			in.GID = *a.GID
		}
		if a.Mtime != nil {
			in.Mtime = *a.Mtime
		}
		if a.Atime != nil {
			in.Atime = *a.Atime
		}
		if a.COS != nil {
			in.COS = *a.COS
		}
		if a.Mode != nil || a.UID != nil || a.GID != nil || a.Mtime != nil || a.COS != nil {
			in.Ctime = a.Ctime
		}
		_, err = t.Exec("UPDATE inodes SET mode = ?, uid = ?, gid = ?, mtime = ?, atime = ?, ctime = ?, cos = ? WHERE id = ?", in.Mode, in.UID, in.GID, in.Mtime, in.Atime, in.Ctime, in.COS, id)
		t.set(in)
		return err
	})
	return in, err
}
