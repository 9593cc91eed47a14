// Package sqlstore implements catalog.Store over database/sql, for every SQL
// database Strata supports (SQLite, PostgreSQL). Dialects differ only in
// placeholders and in what a failed statement leaves of its transaction;
// the queries are plain SQL both accept.
//
// Writes go through one writer goroutine that groups whatever operations are
// queued into one transaction, where one operation's failure does not undo
// the others (a failure rolls the group back and runs it again with each
// operation inside a SAVEPOINT of its own: see runGroup), and the cost of a
// durable commit (an fsync of the WAL) is shared by the whole group. The writer is
// the one serial stage of every namespace change, so while operations queue
// for it it has a thread of its own at raised priority, where the system
// allows (prio_linux.go). Reads use a separate pool and never wait for the
// writer.
package sqlstore

import (
	"context"
	"database/sql"
	"fmt"
	"io/fs"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/pressly/goose/v3"

	"github.com/strata-storage/strata/internal/catalog"
)

// Dialect adapts the queries to one database.
type Dialect struct {
	Name string
	// Numbered placeholders ($1, $2 …) instead of "?".
	Numbered bool
	// A failed statement aborts the whole transaction (PostgreSQL) rather
	// than undoing only itself (SQLite), so one operation's failure would
	// take its whole group with it (see runGroup).
	AbortsOnError bool
	// Transient, when set, tells an error of a lost connection to the
	// database (a server restarting, a link failing) from a statement's:
	// the catalog waits for the database instead of failing (see
	// runBatch). An embedded database has none.
	Transient func(error) bool
	// Unsent, when set, tells a failed COMMIT that never reached the
	// database (so never committed: the group may run again) from one
	// whose fate is unknown.
	Unsent func(error) bool
	// TxID and TxStatus, when set, resolve a COMMIT whose connection was
	// lost after it was sent: each group asks for its transaction's id
	// before committing (TxID), and once the database is back TxStatus
	// (the id as its one argument) says whether it committed
	// ("committed"; "aborted" or NULL: not). PostgreSQL's txid_current
	// and txid_status exist for exactly this.
	TxID, TxStatus string
}

// Store is a catalog.Store over database/sql.
type Store struct {
	d   Dialect
	wdb *sql.DB // exactly one connection
	rdb *sql.DB
	ops chan *op
	// coming counts writes announced (Expecting) and not yet queued;
	// arrived is kicked when the count falls to zero (see writer).
	coming  atomic.Int64
	arrived chan struct{}
	closing chan struct{}
	done    chan struct{}

	mu    sync.Mutex
	rstmt map[string]*sql.Stmt
	// The writer's prepared statements, and queries still to prepare; both
	// used by the writer goroutine only. database/sql reuses a statement
	// prepared on the pool inside a transaction on the same connection, but
	// re-parses one prepared anywhere else on every use (that cost a fifth
	// of the writer's time). The pool's only connection is busy during a
	// transaction, so a query first seen there is parsed for that
	// transaction and prepared on the pool right after it.
	wstmt      map[string]*sql.Stmt
	unprepared map[string]bool

	cache *inodeCache
	// dirs holds ids of directories the committed catalog has, so that a
	// create need not read its parent's row to learn it is a directory
	// (that read, or a subquery in the insert, cost ~6 of a durable
	// create's ~50 µs in the catalog). Writer goroutine only. An inode's kind never
	// changes, so an entry stays true until the directory is removed; ids
	// enter only after their transaction commits and leave as soon as a
	// transaction deletes them, so a rollback can only cost a miss.
	// dirsGen counts deletions: an id learnt before one, in the same
	// transaction, is not added after it commits.
	dirs    map[int64]struct{}
	dirsGen uint64

	// ids are the next inode and bitfile ids to issue and the end of the
	// range the ids table has reserved for them (writer goroutine only).
	// The writer issues ids itself instead of the database (SQLite's
	// AUTOINCREMENT read and wrote sqlite_sequence on every insert: a page
	// more per commit): ids are never reused, because object names and
	// FUSE inode numbers derive from them, so the table records how far
	// ids may have been issued, a block at a time.
	ids [nIDSpaces]idRange

	boost   *booster
	prioErr error

	groups, grouped atomic.Int64 // transactions the writer committed, and operations in them
	observe         atomic.Pointer[func(ops int, took time.Duration)]
}

var (
	_ catalog.Store          = (*Store)(nil)
	_ catalog.GroupCounter   = (*Store)(nil)
	_ catalog.GroupObserver  = (*Store)(nil)
	_ catalog.CacheReporter  = (*Store)(nil)
	_ catalog.PriorityWriter = (*Store)(nil)
)

// New starts a store on wdb (which must allow a single connection) and rdb.
// The schema must have the ids table.
func New(d Dialect, wdb, rdb *sql.DB) (*Store, error) {
	s := &Store{d: d, wdb: wdb, rdb: rdb, ops: make(chan *op, MaxBatch), closing: make(chan struct{}), done: make(chan struct{}), arrived: make(chan struct{}, 1),
		rstmt: map[string]*sql.Stmt{}, wstmt: map[string]*sql.Stmt{}, unprepared: map[string]bool{}, cache: newInodeCache(), dirs: map[int64]struct{}{}}
	for i, name := range idNames {
		// Nothing at or past the reserved end was ever issued; what lay
		// below it may have been, so a restart starts there.
		var end int64
		if err := wdb.QueryRow(s.rebind("SELECT next FROM ids WHERE name = ?"), name).Scan(&end); err != nil {
			return nil, fmt.Errorf("catalog: ids of %s: %w", name, err)
		}
		s.ids[i] = idRange{end, end}
	}
	s.boost, s.prioErr = newBooster()
	go s.writer()
	return s, nil
}

// SetCacheSize caps the inode cache at entries (DefaultCacheEntries until
// set).
func (s *Store) SetCacheSize(entries int) { s.cache.setSize(entries) }

// CacheStats reports the inode cache's entries and the lookups it answered
// (hits) and sent to the database (misses).
func (s *Store) CacheStats() (entries, hits, misses int64) { return s.cache.stats() }

// WriterPriority reports whether the writer may raise its priority under
// load: nil if so, else why not (typically: not root and no CAP_SYS_NICE).
func (s *Store) WriterPriority() error { return s.prioErr }

// Ping checks that the writer's connection works. On PostgreSQL a
// writer connection exists only while it holds the catalog's lock, so a
// ping that succeeds proves this server is still the catalog's writer.
func (s *Store) Ping(ctx context.Context) error { return s.wdb.PingContext(ctx) }

// Close stops the writer after the queued operations and closes both pools.
func (s *Store) Close() error {
	select {
	case <-s.closing:
	default:
		close(s.closing)
	}
	<-s.done
	for _, st := range s.rstmt {
		st.Close()
	}
	for _, st := range s.wstmt {
		st.Close()
	}
	err := s.wdb.Close()
	if e := s.rdb.Close(); err == nil {
		err = e
	}
	return err
}

// Settle checks and completes the settings every catalog database is
// opened with: sync is "full" (the default) or "normal", readers is the
// read pool's size (default 8).
func Settle(sync string, readers int) (string, int, error) {
	if sync == "" {
		sync = "full"
	}
	if sync != "full" && sync != "normal" {
		return "", 0, fmt.Errorf("catalog: sync must be full or normal, not %q", sync)
	}
	if readers <= 0 {
		readers = 8
	}
	return sync, readers, nil
}

// Migrate brings db's schema up to date with the goose migrations under
// migrations/ in files: the catalog's schema, one set per database.
func Migrate(db *sql.DB, dialect goose.Dialect, files fs.FS) error {
	sub, err := fs.Sub(files, "migrations")
	if err != nil {
		return err
	}
	p, err := goose.NewProvider(dialect, db, sub)
	if err != nil {
		return err
	}
	_, err = p.Up(context.Background())
	return err
}

func (s *Store) rebind(q string) string {
	if !s.d.Numbered {
		return q
	}
	var b strings.Builder
	n := 0
	for _, r := range q {
		if r == '?' {
			n++
			b.WriteByte('$')
			b.WriteString(strconv.Itoa(n))
			continue
		}
		b.WriteRune(r)
	}
	return b.String()
}
