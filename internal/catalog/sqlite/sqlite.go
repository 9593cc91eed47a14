// Package sqlite opens Strata's embedded catalog: a SQLite database in WAL
// mode, driven by the pure-Go modernc driver so the binary stays static and
// cgo-free. Queries and the group-commit writer live in sqlstore; this
// package owns the connection settings and the schema migrations.
package sqlite

import (
	"database/sql"
	"embed"
	"errors"
	"fmt"
	"net/url"
	"os"
	"time"

	"github.com/pressly/goose/v3"
	_ "modernc.org/sqlite" // registers the "sqlite" driver

	"github.com/strata-storage/strata/internal/catalog/sqlstore"
)

//go:embed migrations/*.sql
var migrations embed.FS

// Options tune the database.
type Options struct {
	// Sync is "full" (every commit survives power loss; the default) or
	// "normal" (commits survive a process crash but the last group may be
	// lost on power loss).
	Sync string
	// Readers is the size of the read pool (default 8).
	Readers int
}

// cacheKiB is the writer's page cache and the readers' together.
const cacheKiB = 64 << 10

func dsn(path string, o Options, readOnly bool) string {
	q := url.Values{}
	q.Add("_pragma", "busy_timeout(10000)")
	q.Add("_pragma", "journal_mode(WAL)")
	q.Add("_pragma", "synchronous("+o.Sync+")")
	q.Add("_pragma", "foreign_keys(0)")
	// Page caches: 64 MiB for the writer, and 64 MiB shared by the
	// readers. Each connection has its own; at 64 MiB each, a server
	// reading much of a big catalog (listing a directory of millions)
	// could hold 64 MiB per reader, 512 MiB for eight. The OS page cache holds the file as
	// well, so a smaller cache per reader costs a copy, not a disk read.
	cache := cacheKiB
	if readOnly {
		cache = max(cacheKiB/max(o.Readers, 1), 2048)
	}
	q.Add("_pragma", fmt.Sprintf("cache_size(-%d)", cache))
	// Checkpoints run inside a writer commit; fewer, larger ones keep
	// commit latency (and so group-commit throughput) steady.
	q.Add("_pragma", "wal_autocheckpoint(8192)")
	if readOnly {
		q.Add("_pragma", "query_only(1)")
	} else {
		q.Add("_txlock", "immediate")
	}
	return "file:" + path + "?" + q.Encode()
}

// Open opens or creates the catalog at path and brings its schema up to date.
func Open(path string, o Options) (*sqlstore.Store, error) {
	var err error
	if o.Sync, o.Readers, err = sqlstore.Settle(o.Sync, o.Readers); err != nil {
		return nil, err
	}
	if err := private(path); err != nil {
		return nil, fmt.Errorf("catalog: open %s: %w", path, err)
	}
	wdb, err := sql.Open("sqlite", dsn(path, o, false))
	if err != nil {
		return nil, fmt.Errorf("catalog: open %s: %w", path, err)
	}
	wdb.SetMaxOpenConns(1)
	wdb.SetConnMaxIdleTime(0)
	if err := sqlstore.Migrate(wdb, goose.DialectSQLite3, migrations); err != nil {
		wdb.Close()
		return nil, fmt.Errorf("catalog: migrate %s: %w", path, err)
	}
	now := time.Now().UnixNano()
	if _, err := wdb.Exec("UPDATE inodes SET mtime = ?, ctime = ?, atime = ? WHERE id = 1 AND mtime = 0", now, now, now); err != nil {
		wdb.Close()
		return nil, fmt.Errorf("catalog: init root: %w", err)
	}
	rdb, err := sql.Open("sqlite", dsn(path, o, true))
	if err != nil {
		wdb.Close()
		return nil, fmt.Errorf("catalog: open %s: %w", path, err)
	}
	rdb.SetMaxOpenConns(o.Readers)
	rdb.SetMaxIdleConns(o.Readers)
	s, err := sqlstore.New(sqlstore.Dialect{Name: "sqlite"}, wdb, rdb)
	if err != nil {
		wdb.Close()
		rdb.Close()
	}
	return s, err
}

// private makes the catalog file readable by its owner only, creating it
// so if it is new: it holds every name and owner in the namespace and the
// hashes of bearer tokens. SQLite gives its -wal and -shm files the
// database file's permissions.
func private(path string) error {
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return err
	}
	f.Close()
	for _, p := range []string{path, path + "-wal", path + "-shm"} {
		if err := os.Chmod(p, 0o600); err != nil && !errors.Is(err, os.ErrNotExist) {
			return err
		}
	}
	return nil
}
