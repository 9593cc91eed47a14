package sqlstore

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/strata-storage/strata/internal/api"
	"github.com/strata-storage/strata/internal/catalog"
)

// The tape tier's part of the catalog: tape copies, purged disk copies and
// their garbage, recall requests.

// offset is quoted: PostgreSQL reserves the word.
const tapeCols = `copy, stripe, volume, seq, position, "offset", length, crc32c`

func (s *Store) tapeCopies(ctx context.Context, b *catalog.Bitfile) error {
	rows, err := s.readRows(ctx, "SELECT "+tapeCols+" FROM tape_copies WHERE bitfile = ? ORDER BY copy, stripe", b.ID)
	if err != nil {
		return fmt.Errorf("catalog: tape copies of %d: %w", b.ID, err)
	}
	defer rows.Close()
	b.Tapes = b.Tapes[:0]
	for rows.Next() {
		var tc catalog.TapeCopy
		var crc int64
		if err := rows.Scan(&tc.Copy, &tc.Stripe, &tc.Volume, &tc.Seq, &tc.Position, &tc.Offset, &tc.Length, &crc); err != nil {
			return fmt.Errorf("catalog: tape copies of %d: %w", b.ID, err)
		}
		tc.CRC32C = uint32(crc)
		b.Tapes = append(b.Tapes, tc)
	}
	return rows.Err()
}

// AddTapeCopy implements catalog.Store.
func (s *Store) AddTapeCopy(ctx context.Context, bitfile int64, stripes ...catalog.TapeCopy) error {
	added, err := s.AddTapeCopies(ctx, []catalog.NewTapeCopy{{Bitfile: bitfile, Stripes: stripes}})
	if err != nil {
		return err
	}
	if !added[0] {
		return api.Errorf(api.ErrNotFound, "committed bitfile %d", bitfile)
	}
	return nil
}

// tapeCopiesChunk is how many copies AddTapeCopies records in one
// operation of the writer: well under the bound parameters a statement
// may have. The chunks of one call are queued together, in order, so the
// writer's group commit syncs them at once.
const tapeCopiesChunk = 1024

// AddTapeCopies implements catalog.Store.
func (s *Store) AddTapeCopies(ctx context.Context, copies []catalog.NewTapeCopy) ([]bool, error) {
	for _, c := range copies {
		if len(c.Stripes) == 0 {
			return nil, api.Errorf(api.ErrInvalid, "bitfile %d: a tape copy without stripes", c.Bitfile)
		}
	}
	added := make([]bool, len(copies))
	var fns []func(*Tx) error
	for from := 0; from < len(copies); from += tapeCopiesChunk {
		to := min(from+tapeCopiesChunk, len(copies))
		fns = append(fns, func(t *Tx) error { return t.addTapeCopies(copies[from:to], added[from:to]) })
	}
	if err := s.writeAll(ctx, fns...); err != nil {
		return nil, err
	}
	return added, nil
}

// addTapeCopies records part's copies, setting added[i] for each one
// recorded, in a few statements: the IN lists are padded to a power of
// two, so a handful of prepared statements serve every chunk size.
func (t *Tx) addTapeCopies(part []catalog.NewTapeCopy, added []bool) error {
	ids := make([]any, 0, len(part))
	for _, c := range part {
		ids = append(ids, c.Bitfile)
	}
	in := padIn(&ids)
	// The committed bitfiles among them and the next copy number of each
	// (copy numbers are never reused: repack drops copies).
	rows, err := t.Query("SELECT b.id, COALESCE(MAX(c.copy), 0) + 1 FROM bitfiles b LEFT JOIN tape_copies c ON c.bitfile = b.id WHERE b.id IN "+in+" AND b.state = ? GROUP BY b.id",
		append(ids, catalog.Committed)...)
	if err != nil {
		return fmt.Errorf("catalog: tape copies: %w", err)
	}
	next := make(map[int64]int, len(part))
	for rows.Next() {
		var id int64
		var copy int
		if err := rows.Scan(&id, &copy); err != nil {
			rows.Close()
			return fmt.Errorf("catalog: tape copies: %w", err)
		}
		next[id] = copy
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return fmt.Errorf("catalog: tape copies: %w", err)
	}
	counted := make([]any, 0, len(part))
	first := make(map[int64]int, len(part)) // the copy number each bitfile started at
	var rows9 []any                         // the new rows, nine values each
	for i, c := range part {
		copy, ok := next[c.Bitfile]
		added[i] = ok // set afresh: the writer may run a failed group's operations again
		if !ok {
			continue
		}
		for _, tc := range c.Stripes {
			rows9 = append(rows9, c.Bitfile, copy, tc.Stripe, tc.Volume, tc.Seq, tc.Position, tc.Offset, tc.Length, int64(tc.CRC32C))
		}
		if _, seen := first[c.Bitfile]; !seen {
			first[c.Bitfile] = copy
			counted = append(counted, c.Bitfile)
		}
		next[c.Bitfile] = copy + 1
	}
	if len(counted) == 0 {
		return nil
	}
	// The rows go in statements of a power of two rows each, the largest
	// that fit, so a few prepared statements serve any count.
	const row = "(?, ?, ?, ?, ?, ?, ?, ?, ?)"
	for len(rows9) > 0 {
		n := 1
		for n*2 <= min(len(rows9)/9, 512) {
			n *= 2
		}
		if _, err := t.Exec("INSERT INTO tape_copies (bitfile, "+tapeCols+") VALUES "+row+strings.Repeat(", "+row, n-1), rows9[:9*n]...); err != nil {
			return fmt.Errorf("catalog: tape copies: %w", err)
		}
		rows9 = rows9[9*n:]
	}
	if len(counted) == countAdded(added) {
		// Each bitfile once: one statement counts them all.
		in := padIn(&counted)
		_, err := t.Exec("UPDATE bitfiles SET tapes = tapes + 1 WHERE id IN "+in, counted...)
		return err
	}
	for _, id := range counted {
		id := id.(int64)
		if _, err := t.Exec("UPDATE bitfiles SET tapes = tapes + ? WHERE id = ?", next[id]-first[id], id); err != nil {
			return err
		}
	}
	return nil
}

func countAdded(added []bool) int {
	n := 0
	for _, a := range added {
		if a {
			n++
		}
	}
	return n
}

// padIn pads *args to a power of two by repeating its first value and
// returns the IN list "(?, ?, …)" for it: a value named twice matches
// its row once.
func padIn(args *[]any) string {
	n := 1
	for n < len(*args) {
		n *= 2
	}
	for len(*args) < n {
		*args = append(*args, (*args)[0])
	}
	return "(?" + strings.Repeat(", ?", n-1) + ")"
}

func (s *Store) candidates(ctx context.Context, q string, args ...any) ([]catalog.Candidate, error) {
	rows, err := s.readRows(ctx, q, args...)
	if err != nil {
		return nil, err
	}
	var out []catalog.Candidate
	for rows.Next() {
		var c catalog.Candidate
		in, b := &c.Inode, &c.Bitfile
		if err := rows.Scan(&in.ID, &in.Parent, &in.Name, &in.Kind, &in.Mode, &in.UID, &in.GID, &in.Size, &in.Mtime, &in.Ctime, &in.Atime, &in.COS, &in.Bitfile,
			&b.ID, &b.State, &b.Size, &b.StripeWidth, &b.StripeUnit, &b.Fixity, &b.Epoch, &b.Lease, &b.OnDisk, &b.DiskGen, &b.PinnedUntil); err != nil {
			rows.Close()
			return nil, err
		}
		out = append(out, c)
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return nil, err
	}
	for i := 0; i < len(out); i += attachMax {
		if err := s.attach(ctx, out[i:min(i+attachMax, len(out))]); err != nil {
			return nil, err
		}
	}
	return out, nil
}

// attachMax is how many candidates attach takes at once: well under the
// bound parameters a statement may have (SQLite 32,766, PostgreSQL 65,535).
const attachMax = 1000

// attach loads the segments and tape copies of a page of candidates: two
// queries for the page, not two per candidate (a migration of thousands
// of small files spent longer on those than the drive on their data).
func (s *Store) attach(ctx context.Context, page []catalog.Candidate) error {
	of := make(map[int64][]*catalog.Bitfile, len(page))
	args := make([]any, 0, len(page))
	for i := range page {
		b := &page[i].Bitfile
		if of[b.ID] == nil {
			args = append(args, b.ID)
		}
		of[b.ID] = append(of[b.ID], b)
	}
	in := "bitfile IN (" + strings.Repeat("?, ", len(args)-1) + "?)"
	rows, err := s.readRows(ctx, "SELECT bitfile, copy, stripe, device, object, length, crc32c FROM segments WHERE "+in+" ORDER BY bitfile, copy, stripe", args...)
	if err != nil {
		return fmt.Errorf("catalog: segments of candidates: %w", err)
	}
	for rows.Next() {
		var id, crc int64
		var sg catalog.Segment
		if err := rows.Scan(&id, &sg.Copy, &sg.Stripe, &sg.Device, &sg.Object, &sg.Length, &crc); err != nil {
			rows.Close()
			return fmt.Errorf("catalog: segments of candidates: %w", err)
		}
		sg.CRC32C = uint32(crc)
		for _, b := range of[id] {
			b.Segments = append(b.Segments, sg)
		}
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return err
	}
	rows, err = s.readRows(ctx, "SELECT bitfile, "+tapeCols+" FROM tape_copies WHERE "+in+" ORDER BY bitfile, copy, stripe", args...)
	if err != nil {
		return fmt.Errorf("catalog: tape copies of candidates: %w", err)
	}
	defer rows.Close()
	for rows.Next() {
		var id, crc int64
		var tc catalog.TapeCopy
		if err := rows.Scan(&id, &tc.Copy, &tc.Stripe, &tc.Volume, &tc.Seq, &tc.Position, &tc.Offset, &tc.Length, &crc); err != nil {
			return fmt.Errorf("catalog: tape copies of candidates: %w", err)
		}
		tc.CRC32C = uint32(crc)
		for _, b := range of[id] {
			b.Tapes = append(b.Tapes, tc)
		}
	}
	return rows.Err()
}

const candidateCols = "i.id, i.parent, i.name, i.kind, i.mode, i.uid, i.gid, i.size, i.mtime, i.ctime, i.atime, i.cos, i.bitfile, " +
	"b.id, b.state, b.size, b.stripe_width, b.stripe_unit, b.fixity, b.epoch, b.lease, b.on_disk, b.disk_gen, b.pinned_until"

// MigrationCandidates implements catalog.Store.
func (s *Store) MigrationCandidates(ctx context.Context, cos []string, copies int, before, after int64, limit int) ([]catalog.Candidate, error) {
	if len(cos) == 0 {
		return nil, nil
	}
	if copies < 1 {
		return nil, nil
	}
	// The plan this asks for, and SQLite's without it: committed bitfiles
	// with fewer tape copies than wanted, from the untaped index (tapes
	// equal to each count below copies, ids after the cursor), each joined
	// to its file through inodes_bitfile: O(candidates) per page. CROSS
	// JOIN fixes SQLite's join order (it scanned every inode first);
	// PostgreSQL plans it freely. The bitfile <> 0 term lets SQLite use
	// the partial index.
	q := "SELECT " + candidateCols + " FROM bitfiles b CROSS JOIN inodes i WHERE i.bitfile = b.id AND i.bitfile <> 0 AND b.state = ? AND b.tapes IN ("
	args := []any{catalog.Committed}
	for n := range copies {
		if n > 0 {
			q += ", "
		}
		q += "?"
		args = append(args, n)
	}
	q += ") AND b.on_disk = 1 AND b.id > ? AND i.mtime < ? AND i.cos IN ("
	args = append(args, after, before)
	for i, c := range cos {
		if i > 0 {
			q += ", "
		}
		q += "?"
		args = append(args, c)
	}
	q += ") ORDER BY b.id LIMIT ?"
	out, err := s.candidates(ctx, q, append(args, limit)...)
	if err != nil {
		return nil, fmt.Errorf("catalog: migration candidates: %w", err)
	}
	return out, nil
}

// PurgeCandidates implements catalog.Store.
func (s *Store) PurgeCandidates(ctx context.Context, now int64, limit int) ([]catalog.Candidate, error) {
	out, err := s.candidates(ctx, "SELECT "+candidateCols+" FROM bitfiles b JOIN inodes i ON i.bitfile = b.id WHERE b.state = ? AND b.on_disk = 1 AND b.tapes > 0 AND b.pinned_until <= ? ORDER BY i.atime, b.id LIMIT ?",
		catalog.Committed, now, limit)
	if err != nil {
		return nil, fmt.Errorf("catalog: purge candidates: %w", err)
	}
	return out, nil
}

// Pin implements catalog.Store.
func (s *Store) Pin(ctx context.Context, bitfile, until int64) error {
	return s.write(ctx, func(t *Tx) error {
		n, err := t.Exec("UPDATE bitfiles SET pinned_until = ? WHERE id = ? AND state = ?", until, bitfile, catalog.Committed)
		if err == nil && n == 0 {
			return api.Errorf(api.ErrNotFound, "committed bitfile %d", bitfile)
		}
		return err
	})
}

// DropDiskCopy implements catalog.Store.
func (s *Store) DropDiskCopy(ctx context.Context, bitfile int64) error {
	return s.write(ctx, func(t *Tx) error {
		var onDisk bool
		var tapes int
		if err := t.QueryRow("SELECT on_disk, tapes FROM bitfiles WHERE id = ? AND state = ?", bitfile, catalog.Committed).Scan(&onDisk, &tapes); err != nil {
			return notFound(err, "committed bitfile %d", bitfile)
		}
		if !onDisk || tapes == 0 {
			return api.Errorf(api.ErrInvalid, "bitfile %d: the disk copy is the only copy (or gone)", bitfile)
		}
		if _, err := t.Exec("INSERT INTO garbage (device, object, length) SELECT device, object, length FROM segments WHERE bitfile = ?", bitfile); err != nil {
			return err
		}
		if _, err := t.Exec("DELETE FROM segments WHERE bitfile = ?", bitfile); err != nil {
			return err
		}
		_, err := t.Exec("UPDATE bitfiles SET on_disk = 0 WHERE id = ?", bitfile)
		return err
	})
}

// RestoreDiskCopy implements catalog.Store.
func (s *Store) RestoreDiskCopy(ctx context.Context, bitfile int64, width int, unit int64, segs []catalog.Segment) error {
	return s.write(ctx, func(t *Tx) error {
		var onDisk bool
		var gen int
		if err := t.QueryRow("SELECT on_disk, disk_gen FROM bitfiles WHERE id = ? AND state = ?", bitfile, catalog.Committed).Scan(&onDisk, &gen); err != nil {
			return notFound(err, "committed bitfile %d", bitfile)
		}
		if onDisk {
			return api.Errorf(api.ErrExist, "bitfile %d already has a disk copy", bitfile)
		}
		gen++
		for _, sg := range segs {
			if _, err := t.Exec("INSERT INTO segments (bitfile, copy, stripe, device, object, length, crc32c) VALUES (?, ?, ?, ?, ?, ?, ?)",
				bitfile, gen, sg.Stripe, sg.Device, sg.Object, sg.Length, int64(sg.CRC32C)); err != nil {
				return err
			}
			if _, err := t.Exec("UPDATE devices SET used = used + ? WHERE id = ?", sg.Length, sg.Device); err != nil {
				return err
			}
			if _, err := t.Exec("DELETE FROM recall_objects WHERE device = ? AND object = ?", sg.Device, sg.Object); err != nil {
				return err
			}
		}
		_, err := t.Exec("UPDATE bitfiles SET on_disk = 1, disk_gen = ?, stripe_width = ?, stripe_unit = ? WHERE id = ?", gen, width, unit, bitfile)
		return err
	})
}

// Garbage implements catalog.Store.
func (s *Store) Garbage(ctx context.Context, limit int) ([]catalog.Garbage, error) {
	rows, err := s.readRows(ctx, "SELECT device, object, length FROM garbage ORDER BY device, object LIMIT ?", limit)
	if err != nil {
		return nil, fmt.Errorf("catalog: garbage: %w", err)
	}
	defer rows.Close()
	var out []catalog.Garbage
	for rows.Next() {
		var g catalog.Garbage
		if err := rows.Scan(&g.Device, &g.Object, &g.Length); err != nil {
			return nil, fmt.Errorf("catalog: garbage: %w", err)
		}
		out = append(out, g)
	}
	return out, rows.Err()
}

// ForgetGarbage implements catalog.Store.
func (s *Store) ForgetGarbage(ctx context.Context, g catalog.Garbage) error {
	return s.write(ctx, func(t *Tx) error {
		n, err := t.Exec("DELETE FROM garbage WHERE device = ? AND object = ?", g.Device, g.Object)
		if err != nil || n == 0 {
			return err
		}
		_, err = t.Exec("UPDATE devices SET used = used - ? WHERE id = ?", g.Length, g.Device)
		return err
	})
}

// QueueRecall implements catalog.Store.
func (s *Store) QueueRecall(ctx context.Context, r catalog.Recall) (bool, error) {
	var had bool
	err := s.write(ctx, func(t *Tx) error {
		var prio int
		err := t.QueryRow("SELECT priority FROM recalls WHERE bitfile = ?", r.Bitfile).Scan(&prio)
		if err == nil {
			had = true
			if r.Priority > prio {
				_, err = t.Exec("UPDATE recalls SET priority = ? WHERE bitfile = ?", r.Priority, r.Bitfile)
			}
			return err
		}
		_, err = t.Exec("INSERT INTO recalls (bitfile, queued, priority) VALUES (?, ?, ?)", r.Bitfile, r.Queued, r.Priority)
		return err
	})
	return had, err
}

// Recalls implements catalog.Store.
func (s *Store) Recalls(ctx context.Context) ([]catalog.Recall, error) {
	rows, err := s.readRows(ctx, "SELECT bitfile, queued, priority FROM recalls ORDER BY bitfile")
	if err != nil {
		return nil, fmt.Errorf("catalog: recalls: %w", err)
	}
	defer rows.Close()
	var out []catalog.Recall
	for rows.Next() {
		var r catalog.Recall
		if err := rows.Scan(&r.Bitfile, &r.Queued, &r.Priority); err != nil {
			return nil, fmt.Errorf("catalog: recalls: %w", err)
		}
		out = append(out, r)
	}
	return out, rows.Err()
}

// DoneRecall implements catalog.Store.
func (s *Store) DoneRecall(ctx context.Context, bitfile int64) error {
	return s.write(ctx, func(t *Tx) error {
		if _, err := t.Exec("DELETE FROM recalls WHERE bitfile = ?", bitfile); err != nil {
			return err
		}
		return t.recallObjectsToGarbage("bitfile = ?", bitfile)
	})
}

// AddRecallObject implements catalog.Store.
func (s *Store) AddRecallObject(ctx context.Context, o catalog.RecallObject) error {
	return s.write(ctx, func(t *Tx) error {
		n, err := t.Exec("INSERT INTO recall_objects (device, object, bitfile, epoch) VALUES (?, ?, ?, ?) ON CONFLICT DO NOTHING", o.Device, o.Object, o.Bitfile, o.Epoch)
		if err != nil {
			return fmt.Errorf("catalog: recall object %s/%s: %w", o.Device, o.Object, err)
		}
		if n == 0 {
			return api.Errorf(api.ErrExist, "catalog: recall object %s/%s", o.Device, o.Object)
		}
		return nil
	})
}

// MarkLost implements catalog.Store.
func (s *Store) MarkLost(ctx context.Context, l catalog.Lost) error {
	return s.write(ctx, func(t *Tx) error {
		_, err := t.Exec("INSERT INTO lost (bitfile, why, since) VALUES (?, ?, ?) ON CONFLICT DO NOTHING", l.Bitfile, l.Why, l.Since)
		if err != nil {
			return fmt.Errorf("catalog: mark bitfile %d lost: %w", l.Bitfile, err)
		}
		return nil
	})
}

// LostFiles implements catalog.Store.
func (s *Store) LostFiles(ctx context.Context) ([]catalog.Lost, error) {
	rows, err := s.readRows(ctx, "SELECT l.bitfile, i.id, l.why, l.since FROM lost l JOIN inodes i ON i.bitfile = l.bitfile ORDER BY l.bitfile")
	if err != nil {
		return nil, fmt.Errorf("catalog: lost files: %w", err)
	}
	defer rows.Close()
	var out []catalog.Lost
	for rows.Next() {
		var l catalog.Lost
		if err := rows.Scan(&l.Bitfile, &l.Inode, &l.Why, &l.Since); err != nil {
			return nil, fmt.Errorf("catalog: lost files: %w", err)
		}
		out = append(out, l)
	}
	return out, rows.Err()
}

// SetOutOfService implements catalog.Store.
func (s *Store) SetOutOfService(ctx context.Context, o catalog.OutOfService) error {
	return s.write(ctx, func(t *Tx) error {
		var err error
		if o.Why == "" {
			_, err = t.Exec("DELETE FROM out_of_service WHERE kind = ? AND id = ?", o.Kind, o.ID)
		} else {
			_, err = t.Exec("INSERT INTO out_of_service (kind, id, why, since, count) VALUES (?, ?, ?, ?, ?) ON CONFLICT (kind, id) DO UPDATE SET why = excluded.why, since = excluded.since, count = excluded.count", o.Kind, o.ID, o.Why, o.Since, o.Count)
		}
		if err != nil {
			return fmt.Errorf("catalog: %s %s out of service: %w", o.Kind, o.ID, err)
		}
		return nil
	})
}

// OutOfService implements catalog.Store.
func (s *Store) OutOfService(ctx context.Context) ([]catalog.OutOfService, error) {
	rows, err := s.readRows(ctx, "SELECT kind, id, why, since, count FROM out_of_service ORDER BY kind, id")
	if err != nil {
		return nil, fmt.Errorf("catalog: out of service: %w", err)
	}
	defer rows.Close()
	var out []catalog.OutOfService
	for rows.Next() {
		var o catalog.OutOfService
		if err := rows.Scan(&o.Kind, &o.ID, &o.Why, &o.Since, &o.Count); err != nil {
			return nil, fmt.Errorf("catalog: out of service: %w", err)
		}
		out = append(out, o)
	}
	return out, rows.Err()
}

// recallObjectsToGarbage turns the recall objects that match where (with
// its argument) into garbage. They were never counted in their devices'
// use, so their garbage has length 0.
func (t *Tx) recallObjectsToGarbage(where string, arg any) error {
	if _, err := t.Exec("INSERT INTO garbage (device, object, length) SELECT device, object, 0 FROM recall_objects WHERE "+where+" ON CONFLICT DO NOTHING", arg); err != nil {
		return err
	}
	_, err := t.Exec("DELETE FROM recall_objects WHERE "+where, arg)
	return err
}

// Path implements catalog.Store.
func (s *Store) Path(ctx context.Context, id int64) (string, error) {
	path := ""
	for id != catalog.RootID {
		in, err := s.Get(ctx, id)
		if err != nil {
			return "", err
		}
		path = "/" + in.Name + path
		id = in.Parent
	}
	if path == "" {
		path = "/"
	}
	return path, nil
}

// CopiesOn implements catalog.Store.
func (s *Store) CopiesOn(ctx context.Context, volume string, after int64, limit int) ([]catalog.Candidate, error) {
	out, err := s.candidates(ctx, "SELECT "+candidateCols+" FROM bitfiles b JOIN inodes i ON i.bitfile = b.id WHERE b.id IN (SELECT bitfile FROM tape_copies WHERE volume = ?) AND b.state = ? AND b.id > ? ORDER BY b.id LIMIT ?",
		volume, catalog.Committed, after, limit)
	if err != nil {
		return nil, fmt.Errorf("catalog: copies on %s: %w", volume, err)
	}
	return out, nil
}

// DropTapeCopy implements catalog.Store.
func (s *Store) DropTapeCopy(ctx context.Context, bitfile int64, copy int) error {
	return s.write(ctx, func(t *Tx) error {
		var onDisk bool
		var tapes int
		if err := t.QueryRow("SELECT on_disk, tapes FROM bitfiles WHERE id = ?", bitfile).Scan(&onDisk, &tapes); err != nil {
			return notFound(err, "bitfile %d", bitfile)
		}
		var one int
		if err := t.QueryRow("SELECT 1 FROM tape_copies WHERE bitfile = ? AND copy = ? LIMIT 1", bitfile, copy).Scan(&one); err != nil {
			return notFound(err, "bitfile %d tape copy %d", bitfile, copy)
		}
		if !onDisk && tapes <= 1 {
			return api.Errorf(api.ErrInvalid, "bitfile %d: tape copy %d is the only copy", bitfile, copy)
		}
		if _, err := t.Exec("DELETE FROM tape_copies WHERE bitfile = ? AND copy = ?", bitfile, copy); err != nil {
			return err
		}
		_, err := t.Exec("UPDATE bitfiles SET tapes = tapes - 1 WHERE id = ?", bitfile)
		return err
	})
}

// PutCOS implements catalog.Store.
func (s *Store) PutCOS(ctx context.Context, k catalog.COS) error {
	// The flag is stored as 0 or 1: PostgreSQL will not take a bool for
	// an integer column.
	tapeOnly := 0
	if k.TapeOnly {
		tapeOnly = 1
	}
	return s.write(ctx, func(t *Tx) error {
		n, err := t.Exec("UPDATE cos SET pool = ?, stripe_width = ?, stripe_unit = ?, tape_copies = ?, tape_only = ? WHERE name = ?",
			k.Pool, k.StripeWidth, k.StripeUnit, k.TapeCopies, tapeOnly, k.Name)
		if err != nil || n > 0 {
			return err
		}
		_, err = t.Exec("INSERT INTO cos (name, pool, stripe_width, stripe_unit, tape_copies, tape_only) VALUES (?, ?, ?, ?, ?, ?)",
			k.Name, k.Pool, k.StripeWidth, k.StripeUnit, k.TapeCopies, tapeOnly)
		return err
	})
}

// ClassesOfService implements catalog.Store.
func (s *Store) ClassesOfService(ctx context.Context) ([]catalog.COS, error) {
	rows, err := s.readRows(ctx, "SELECT name, pool, stripe_width, stripe_unit, tape_copies, tape_only FROM cos ORDER BY name")
	if err != nil {
		return nil, fmt.Errorf("catalog: classes of service: %w", err)
	}
	defer rows.Close()
	var out []catalog.COS
	for rows.Next() {
		var k catalog.COS
		if err := rows.Scan(&k.Name, &k.Pool, &k.StripeWidth, &k.StripeUnit, &k.TapeCopies, &k.TapeOnly); err != nil {
			return nil, fmt.Errorf("catalog: classes of service: %w", err)
		}
		out = append(out, k)
	}
	return out, rows.Err()
}

// Residency implements catalog.Store.
func (s *Store) Residency(ctx context.Context, ids []int64) (map[int64]catalog.Residency, error) {
	out := make(map[int64]catalog.Residency, len(ids))
	const chunk = 500
	for len(ids) > 0 {
		n := min(chunk, len(ids))
		q := "SELECT id, on_disk, tapes FROM bitfiles WHERE id IN (?" + strings.Repeat(", ?", n-1) + ")"
		args := make([]any, n)
		for i, id := range ids[:n] {
			args[i] = id
		}
		ids = ids[n:]
		// A chunk the database's restart refused or cut off is read
		// again once it is back, as readRows waits.
		start := time.Now()
		for {
			err := s.residency(ctx, q, args, out)
			if err == nil {
				break
			}
			if !s.transient(err) || time.Since(start) >= ReconnectFor || ctx.Err() != nil {
				return nil, fmt.Errorf("catalog: residency: %w", err)
			}
			time.Sleep(reconnectPause)
		}
	}
	return out, nil
}

// residency reads one chunk of Residency's bitfiles into out.
func (s *Store) residency(ctx context.Context, q string, args []any, out map[int64]catalog.Residency) error {
	rows, err := s.rdb.QueryContext(ctx, s.rebind(q), args...) // unprepared: the placeholder count varies
	if err != nil {
		return err
	}
	defer rows.Close()
	for rows.Next() {
		var id int64
		var r catalog.Residency
		if err := rows.Scan(&id, &r.OnDisk, &r.Tapes); err != nil {
			return err
		}
		out[id] = r
	}
	return rows.Err()
}
