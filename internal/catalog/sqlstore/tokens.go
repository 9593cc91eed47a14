package sqlstore

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strconv"
	"strings"

	"github.com/strata-storage/strata/internal/api"
	"github.com/strata-storage/strata/internal/catalog"
)

const tokenCols = "id, user_name, uid, gid, groups_list, scopes, hash, created, expires, revoked, kind, secret"

// PutToken implements catalog.Store.
func (s *Store) PutToken(ctx context.Context, k catalog.Token) error {
	groups := make([]string, len(k.Groups))
	for i, g := range k.Groups {
		groups[i] = strconv.FormatUint(uint64(g), 10)
	}
	return s.write(ctx, func(t *Tx) error {
		var one int
		if err := t.QueryRow("SELECT 1 FROM tokens WHERE id = ?", k.ID).Scan(&one); err == nil {
			return api.Errorf(api.ErrExist, "token %s", k.ID)
		} else if !errors.Is(err, sql.ErrNoRows) {
			return err
		}
		_, err := t.Exec("INSERT INTO tokens ("+tokenCols+") VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
			k.ID, k.User, int64(k.UID), int64(k.GID), strings.Join(groups, ","), strings.Join(k.Scopes, " "), k.Hash, k.Created, k.Expires, k.Revoked, k.Kind, k.Secret)
		return err
	})
}

func scanToken(sc interface{ Scan(...any) error }) (catalog.Token, error) {
	var k catalog.Token
	var uid, gid int64
	var groups, scopes string
	if err := sc.Scan(&k.ID, &k.User, &uid, &gid, &groups, &scopes, &k.Hash, &k.Created, &k.Expires, &k.Revoked, &k.Kind, &k.Secret); err != nil {
		return k, err
	}
	k.UID, k.GID = uint32(uid), uint32(gid)
	for _, g := range strings.Split(groups, ",") {
		if n, err := strconv.ParseUint(g, 10, 32); err == nil {
			k.Groups = append(k.Groups, uint32(n))
		}
	}
	if scopes != "" {
		k.Scopes = strings.Fields(scopes)
	}
	return k, nil
}

// Token implements catalog.Store.
func (s *Store) Token(ctx context.Context, id string) (catalog.Token, error) {
	row, err := s.readRow(ctx, "SELECT "+tokenCols+" FROM tokens WHERE id = ?", id)
	if err != nil {
		return catalog.Token{}, fmt.Errorf("catalog: token %s: %w", id, err)
	}
	k, err := scanToken(row)
	if errors.Is(err, sql.ErrNoRows) {
		return k, api.Errorf(api.ErrNotFound, "token %s", id)
	}
	if err != nil {
		return k, fmt.Errorf("catalog: token %s: %w", id, err)
	}
	return k, nil
}

// Tokens implements catalog.Store.
func (s *Store) Tokens(ctx context.Context) ([]catalog.Token, error) {
	rows, err := s.readRows(ctx, "SELECT "+tokenCols+" FROM tokens ORDER BY created, id")
	if err != nil {
		return nil, fmt.Errorf("catalog: tokens: %w", err)
	}
	defer rows.Close()
	var out []catalog.Token
	for rows.Next() {
		k, err := scanToken(rows)
		if err != nil {
			return nil, fmt.Errorf("catalog: tokens: %w", err)
		}
		out = append(out, k)
	}
	return out, rows.Err()
}

// RevokeToken implements catalog.Store.
func (s *Store) RevokeToken(ctx context.Context, id string, at int64) error {
	return s.write(ctx, func(t *Tx) error {
		var revoked int64
		err := t.QueryRow("SELECT revoked FROM tokens WHERE id = ?", id).Scan(&revoked)
		if errors.Is(err, sql.ErrNoRows) {
			return api.Errorf(api.ErrNotFound, "token %s", id)
		}
		if err != nil || revoked != 0 {
			return err
		}
		_, err = t.Exec("UPDATE tokens SET revoked = ? WHERE id = ?", at, id)
		return err
	})
}

// PutQuota implements catalog.Store.
func (s *Store) PutQuota(ctx context.Context, q catalog.Quota) error {
	return s.write(ctx, func(t *Tx) error {
		if _, err := t.Exec("DELETE FROM quotas WHERE kind = ? AND id = ?", q.Kind, int64(q.ID)); err != nil {
			return err
		}
		if q.Bytes == 0 && q.Files == 0 && q.DiskBytes == 0 {
			return nil
		}
		_, err := t.Exec("INSERT INTO quotas (kind, id, bytes, files, disk_bytes) VALUES (?, ?, ?, ?, ?)", q.Kind, int64(q.ID), q.Bytes, q.Files, q.DiskBytes)
		return err
	})
}

// Quotas implements catalog.Store.
func (s *Store) Quotas(ctx context.Context) ([]catalog.Quota, error) {
	rows, err := s.readRows(ctx, "SELECT kind, id, bytes, files, disk_bytes FROM quotas ORDER BY kind, id")
	if err != nil {
		return nil, fmt.Errorf("catalog: quotas: %w", err)
	}
	defer rows.Close()
	var out []catalog.Quota
	for rows.Next() {
		var q catalog.Quota
		var id int64
		if err := rows.Scan(&q.Kind, &id, &q.Bytes, &q.Files, &q.DiskBytes); err != nil {
			return nil, fmt.Errorf("catalog: quotas: %w", err)
		}
		q.ID = uint32(id)
		out = append(out, q)
	}
	return out, rows.Err()
}

// Usage implements catalog.Store: one scan of the files, grouped by owner
// and by group, joined to their bitfiles for the disk copy.
func (s *Store) Usage(ctx context.Context) ([]catalog.Usage, error) {
	var out []catalog.Usage
	for _, k := range []struct{ kind, col string }{{catalog.QuotaUser, "uid"}, {catalog.QuotaGroup, "gid"}} {
		rows, err := s.readRows(ctx, "SELECT i."+k.col+", COUNT(*), COALESCE(SUM(i.size), 0), COALESCE(SUM(CASE WHEN b.on_disk = 1 THEN i.size ELSE 0 END), 0)"+
			" FROM inodes i LEFT JOIN bitfiles b ON b.id = i.bitfile WHERE i.kind = ? GROUP BY i."+k.col+" ORDER BY i."+k.col, int(catalog.KindFile))
		if err != nil {
			return nil, fmt.Errorf("catalog: usage: %w", err)
		}
		for rows.Next() {
			u := catalog.Usage{Kind: k.kind}
			var id int64
			if err := rows.Scan(&id, &u.Files, &u.Bytes, &u.DiskBytes); err != nil {
				rows.Close()
				return nil, fmt.Errorf("catalog: usage: %w", err)
			}
			u.ID = uint32(id)
			out = append(out, u)
		}
		err = rows.Err()
		rows.Close()
		if err != nil {
			return nil, fmt.Errorf("catalog: usage: %w", err)
		}
	}
	return out, nil
}
