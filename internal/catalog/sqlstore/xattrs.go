package sqlstore

import (
	"context"
	"database/sql"
	"errors"
	"fmt"

	"github.com/strata-storage/strata/internal/api"
	"github.com/strata-storage/strata/internal/catalog"
)

// Xattrs implements catalog.Store.
func (s *Store) Xattrs(ctx context.Context, id int64) (map[string][]byte, error) {
	rows, err := s.readRows(ctx, "SELECT name, value FROM xattrs WHERE inode = ? ORDER BY name", id)
	if err != nil {
		return nil, fmt.Errorf("catalog: xattrs: %w", err)
	}
	defer rows.Close()
	out := map[string][]byte{}
	for rows.Next() {
		var name string
		var v []byte
		if err := rows.Scan(&name, &v); err != nil {
			return nil, err
		}
		if v == nil {
			v = []byte{} // an empty value is a value
		}
		out[name] = v
	}
	return out, rows.Err()
}

// SetXattr implements catalog.Store.
func (s *Store) SetXattr(ctx context.Context, id int64, name string, value []byte, how catalog.XattrSet) error {
	if value == nil {
		value = []byte{}
	}
	return s.write(ctx, func(t *Tx) error {
		if _, err := t.get(id); err != nil {
			return err
		}
		var one int
		err := t.QueryRow("SELECT 1 FROM xattrs WHERE inode = ? AND name = ?", id, name).Scan(&one)
		exists := err == nil
		if err != nil && !errors.Is(err, sql.ErrNoRows) {
			return err
		}
		switch {
		case exists && how == catalog.XattrCreate:
			return api.Errorf(api.ErrExist, "attribute %q", name)
		case !exists && how == catalog.XattrReplace:
			return api.Errorf(api.ErrNoAttr, "attribute %q", name)
		case exists:
			_, err = t.Exec("UPDATE xattrs SET value = ? WHERE inode = ? AND name = ?", value, id, name)
		default:
			_, err = t.Exec("INSERT INTO xattrs (inode, name, value) VALUES (?, ?, ?)", id, name, value)
		}
		return err
	})
}

// RemoveXattr implements catalog.Store.
func (s *Store) RemoveXattr(ctx context.Context, id int64, name string) error {
	return s.write(ctx, func(t *Tx) error {
		n, err := t.Exec("DELETE FROM xattrs WHERE inode = ? AND name = ?", id, name)
		if err == nil && n == 0 {
			err = api.Errorf(api.ErrNoAttr, "attribute %q", name)
		}
		return err
	})
}

// DropOrphanXattrs implements catalog.Store.
func (s *Store) DropOrphanXattrs(ctx context.Context) (int, error) {
	var n int64
	err := s.write(ctx, func(t *Tx) error {
		var err error
		n, err = t.Exec("DELETE FROM xattrs WHERE inode NOT IN (SELECT id FROM inodes)")
		return err
	})
	return int(n), err
}

// replaceXattrs makes attrs the inode's extended attributes; nil leaves
// them as they are.
func (t *Tx) replaceXattrs(id int64, attrs map[string][]byte) error {
	if attrs == nil {
		return nil
	}
	if _, err := t.Exec("DELETE FROM xattrs WHERE inode = ?", id); err != nil {
		return err
	}
	for name, v := range attrs {
		if v == nil {
			v = []byte{}
		}
		if _, err := t.Exec("INSERT INTO xattrs (inode, name, value) VALUES (?, ?, ?)", id, name, v); err != nil {
			return err
		}
	}
	return nil
}
