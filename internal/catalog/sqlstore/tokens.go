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

const tokenCols = "id, user_name, uid, gid, groups_list, scopes, hash, created, expires, revoked"

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
		_, err := t.Exec("INSERT INTO tokens ("+tokenCols+") VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
			k.ID, k.User, int64(k.UID), int64(k.GID), strings.Join(groups, ","), strings.Join(k.Scopes, " "), k.Hash, k.Created, k.Expires, k.Revoked)
		return err
	})
}

func scanToken(sc interface{ Scan(...any) error }) (catalog.Token, error) {
	var k catalog.Token
	var uid, gid int64
	var groups, scopes string
	if err := sc.Scan(&k.ID, &k.User, &uid, &gid, &groups, &scopes, &k.Hash, &k.Created, &k.Expires, &k.Revoked); err != nil {
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
