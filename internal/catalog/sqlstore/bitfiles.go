package sqlstore

// Bitfiles (pending, committed, dead), devices and the epoch.

import (
	"context"
	"fmt"

	"github.com/strata-storage/strata/internal/api"
	"github.com/strata-storage/strata/internal/catalog"
)

// CreatePending implements catalog.Store.
func (s *Store) CreatePending(ctx context.Context, b catalog.Bitfile) (catalog.Bitfile, error) {
	b.State = catalog.Pending
	err := s.writeLate(ctx, false, func(t *Tx) error {
		id, err := t.newID(bitfileIDs)
		if err != nil {
			return err
		}
		if _, err := t.Exec("INSERT INTO bitfiles (id, state, size, stripe_width, stripe_unit, fixity, epoch, lease) VALUES (?, ?, ?, ?, ?, '', ?, ?)",
			id, b.State, b.Size, b.StripeWidth, b.StripeUnit, b.Epoch, b.Lease); err != nil {
			return fmt.Errorf("catalog: insert bitfile: %w", err)
		}
		b.ID = id
		for i := range b.Segments {
			sg := &b.Segments[i]
			if sg.Object == "" {
				sg.Object = catalog.ObjectName(b.ID, sg.Copy, sg.Stripe)
			}
			if _, err := t.Exec("INSERT INTO segments (bitfile, copy, stripe, device, object, length, crc32c) VALUES (?, ?, ?, ?, ?, ?, 0)",
				b.ID, sg.Copy, sg.Stripe, sg.Device, sg.Object, sg.Length); err != nil {
				return err
			}
			if err := t.reserveSpace(sg.Device, sg.Length); err != nil {
				return err
			}
		}
		return nil
	})
	return b, err
}

const bitfileCols = "id, state, size, stripe_width, stripe_unit, fixity, epoch, lease, on_disk, disk_gen, pinned_until"

func scanBitfile(r scanner) (catalog.Bitfile, error) {
	var b catalog.Bitfile
	err := r.Scan(&b.ID, &b.State, &b.Size, &b.StripeWidth, &b.StripeUnit, &b.Fixity, &b.Epoch, &b.Lease, &b.OnDisk, &b.DiskGen, &b.PinnedUntil)
	return b, err
}

func (s *Store) segments(ctx context.Context, b *catalog.Bitfile) error {
	rows, err := s.readRows(ctx, "SELECT copy, stripe, device, object, length, crc32c FROM segments WHERE bitfile = ? ORDER BY copy, stripe", b.ID)
	if err != nil {
		return fmt.Errorf("catalog: segments of %d: %w", b.ID, err)
	}
	defer rows.Close()
	b.Segments = b.Segments[:0]
	for rows.Next() {
		var sg catalog.Segment
		var crc int64
		if err := rows.Scan(&sg.Copy, &sg.Stripe, &sg.Device, &sg.Object, &sg.Length, &crc); err != nil {
			return fmt.Errorf("catalog: segments of %d: %w", b.ID, err)
		}
		sg.CRC32C = uint32(crc)
		b.Segments = append(b.Segments, sg)
	}
	return rows.Err()
}

// Bitfile implements catalog.Store.
func (s *Store) Bitfile(ctx context.Context, id int64) (catalog.Bitfile, error) {
	row, err := s.readRow(ctx, "SELECT "+bitfileCols+" FROM bitfiles WHERE id = ?", id)
	if err != nil {
		return catalog.Bitfile{}, err
	}
	b, err := scanBitfile(row)
	if err != nil {
		return b, notFound(err, "bitfile %d", id)
	}
	if err := s.segments(ctx, &b); err != nil {
		return b, err
	}
	return b, s.tapeCopies(ctx, &b)
}

// Abort implements catalog.Store.
func (s *Store) Abort(ctx context.Context, id int64) error {
	return s.write(ctx, func(t *Tx) error {
		n, err := t.Exec("UPDATE bitfiles SET state = ?, lease = 0 WHERE id = ? AND state = ?", catalog.Dead, id, catalog.Pending)
		if err == nil && n == 0 {
			return api.Errorf(api.ErrNotFound, "pending bitfile %d", id)
		}
		return err
	})
}

// ExpirePending implements catalog.Store.
func (s *Store) ExpirePending(ctx context.Context, epoch, now int64) (int, error) {
	var n int64
	err := s.write(ctx, func(t *Tx) error {
		var err error
		n, err = t.Exec("UPDATE bitfiles SET state = ?, lease = 0 WHERE state = ? AND (epoch < ? OR lease < ?)", catalog.Dead, catalog.Pending, epoch, now)
		if err != nil {
			return err
		}
		return t.recallObjectsToGarbage("epoch < ?", epoch)
	})
	return int(n), err
}

// DeadBitfiles implements catalog.Store.
func (s *Store) DeadBitfiles(ctx context.Context, before int64, limit int) ([]catalog.Bitfile, error) {
	rows, err := s.readRows(ctx, "SELECT "+bitfileCols+" FROM bitfiles WHERE state = ? AND lease < ? ORDER BY id LIMIT ?", catalog.Dead, before, limit)
	if err != nil {
		return nil, fmt.Errorf("catalog: dead bitfiles: %w", err)
	}
	var out []catalog.Bitfile
	for rows.Next() {
		b, err := scanBitfile(rows)
		if err != nil {
			rows.Close()
			return nil, fmt.Errorf("catalog: dead bitfiles: %w", err)
		}
		out = append(out, b)
	}
	rows.Close()
	for i := range out {
		if err := s.segments(ctx, &out[i]); err != nil {
			return nil, err
		}
	}
	return out, nil
}

// Purge implements catalog.Store.
func (s *Store) Purge(ctx context.Context, id int64) error {
	return s.write(ctx, func(t *Tx) error {
		var state catalog.BitfileState
		if err := t.QueryRow("SELECT state FROM bitfiles WHERE id = ?", id).Scan(&state); err != nil {
			return notFound(err, "bitfile %d", id)
		}
		if state != catalog.Dead {
			return api.Errorf(api.ErrInvalid, "purge bitfile %d: not dead", id)
		}
		rows, err := t.Query("SELECT device, length FROM segments WHERE bitfile = ?", id)
		if err != nil {
			return err
		}
		type use struct {
			dev string
			n   int64
		}
		var uses []use
		for rows.Next() {
			var u use
			if err := rows.Scan(&u.dev, &u.n); err != nil {
				rows.Close()
				return err
			}
			uses = append(uses, u)
		}
		rows.Close()
		for _, u := range uses {
			if _, err := t.Exec("UPDATE devices SET used = used - ? WHERE id = ?", u.n, u.dev); err != nil {
				return err
			}
		}
		for _, q := range []string{"DELETE FROM segments WHERE bitfile = ?", "DELETE FROM tape_copies WHERE bitfile = ?", "DELETE FROM recalls WHERE bitfile = ?", "DELETE FROM lost WHERE bitfile = ?"} {
			if _, err := t.Exec(q, id); err != nil {
				return err
			}
		}
		_, err = t.Exec("DELETE FROM bitfiles WHERE id = ?", id)
		return err
	})
}

// PutDevice implements catalog.Store.
func (s *Store) PutDevice(ctx context.Context, d catalog.Device) error {
	return s.write(ctx, func(t *Tx) error {
		n, err := t.Exec("UPDATE devices SET pool = ?, mover = ?, capacity = ?, bandwidth = ? WHERE id = ?", d.Pool, d.Mover, d.Capacity, d.Bandwidth, d.ID)
		if err != nil || n > 0 {
			return err
		}
		_, err = t.Exec("INSERT INTO devices (id, pool, mover, capacity, used, bandwidth) VALUES (?, ?, ?, ?, 0, ?)", d.ID, d.Pool, d.Mover, d.Capacity, d.Bandwidth)
		return err
	})
}

// Devices implements catalog.Store.
func (s *Store) Devices(ctx context.Context) ([]catalog.Device, error) {
	rows, err := s.readRows(ctx, "SELECT id, pool, mover, capacity, used, bandwidth FROM devices ORDER BY id")
	if err != nil {
		return nil, fmt.Errorf("catalog: devices: %w", err)
	}
	defer rows.Close()
	var out []catalog.Device
	for rows.Next() {
		var d catalog.Device
		if err := rows.Scan(&d.ID, &d.Pool, &d.Mover, &d.Capacity, &d.Used, &d.Bandwidth); err != nil {
			return nil, fmt.Errorf("catalog: devices: %w", err)
		}
		out = append(out, d)
	}
	return out, rows.Err()
}

// NextEpoch implements catalog.Store.
func (s *Store) NextEpoch(ctx context.Context) (int64, error) {
	var e int64
	err := s.write(ctx, func(t *Tx) error {
		if _, err := t.Exec("UPDATE meta SET value = value + 1 WHERE name = 'epoch'"); err != nil {
			return err
		}
		return t.QueryRow("SELECT value FROM meta WHERE name = 'epoch'").Scan(&e)
	})
	return e, err
}
