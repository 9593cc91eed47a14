package sqlite

import (
	"context"
	"database/sql"
	"io/fs"
	"path/filepath"
	"testing"

	"github.com/pressly/goose/v3"

	"github.com/strata-storage/strata/internal/catalog"
	"github.com/strata-storage/strata/internal/catalog/catalogtest"
)

func TestConformance(t *testing.T) {
	catalogtest.Run(t, func(t *testing.T) catalog.Store {
		s, err := Open(filepath.Join(t.TempDir(), "c.db"), Options{})
		if err != nil {
			t.Fatal(err)
		}
		return s
	})
}

// Both reopen cases of the conformance suite, on a file.
func TestReopen(t *testing.T) {
	catalogtest.RunReopen(t, func(t *testing.T) func() (catalog.Store, error) {
		p := filepath.Join(t.TempDir(), "c.db")
		return func() (catalog.Store, error) { return Open(p, Options{}) }
	})
}

func TestBadSync(t *testing.T) {
	if _, err := Open(filepath.Join(t.TempDir(), "c.db"), Options{Sync: "sometimes"}); err == nil {
		t.Fatal("bad sync mode accepted")
	}
}

// A catalog made before the writer issued ids (schema 4: AUTOINCREMENT)
// keeps every id it ever issued unissued: sqlite_sequence remembers ids
// whose rows are gone, and migration 5 carries them over. Down and up again
// keep them too.
func TestMigrateIDs(t *testing.T) {
	p := filepath.Join(t.TempDir(), "c.db")
	db, err := sql.Open("sqlite", dsn(p, Options{Sync: "full"}, false))
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	sub, _ := fs.Sub(migrations, "migrations")
	prov, err := goose.NewProvider(goose.DialectSQLite3, db, sub)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	if _, err := prov.UpTo(ctx, 4); err != nil {
		t.Fatal(err)
	}
	for _, q := range []string{
		"INSERT INTO inodes (parent, name, kind, mode, uid, gid, size, mtime, ctime, atime) VALUES (1, 'a', 2, 420, 0, 0, 0, 1, 1, 1), (1, 'b', 2, 420, 0, 0, 0, 1, 1, 1)",
		"DELETE FROM inodes WHERE name = 'b'",
		"INSERT INTO bitfiles (state, size, stripe_width, stripe_unit, epoch, lease) VALUES (1, 0, 1, 1, 1, 1), (1, 0, 1, 1, 1, 1)",
		"DELETE FROM bitfiles WHERE id = 2",
	} {
		if _, err := db.Exec(q); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
	check := func(when string) {
		t.Helper()
		rows, err := db.Query("SELECT name, next FROM ids ORDER BY name")
		if err != nil {
			t.Fatal(err)
		}
		defer rows.Close()
		got := map[string]int64{}
		for rows.Next() {
			var n string
			var v int64
			rows.Scan(&n, &v)
			got[n] = v
		}
		if got["inodes"] < 4 || got["bitfiles"] < 3 {
			t.Fatalf("%s: ids %v, want inodes ≥ 4 (3 was issued), bitfiles ≥ 3", when, got)
		}
	}
	if _, err := prov.UpTo(ctx, 5); err != nil {
		t.Fatal(err)
	}
	check("up")
	if _, err := prov.DownTo(ctx, 4); err != nil {
		t.Fatal(err)
	}
	var seq int64
	if err := db.QueryRow("SELECT seq FROM sqlite_sequence WHERE name = 'inodes'").Scan(&seq); err != nil || seq < 3 {
		t.Fatalf("down: sqlite_sequence of inodes %d (%v), want ≥ 3", seq, err)
	}
	if _, err := prov.Up(ctx); err != nil {
		t.Fatal(err)
	}
	check("up again")
	db.Close()

	s, err := Open(p, Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	f, err := s.Commit(ctx, catalog.Inode{Parent: catalog.RootID, Name: "b", Mode: 0o644}, nil, false)
	if err != nil || f.ID <= 3 {
		t.Fatalf("new inode %d (%v): an id the old schema issued", f.ID, err)
	}
	if a, err := s.Lookup(ctx, catalog.RootID, "a"); err != nil || a.ID != 2 {
		t.Fatalf("migrated inode: %+v %v", a, err)
	}
}
