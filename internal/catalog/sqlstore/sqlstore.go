// Package sqlstore implements catalog.Store over database/sql, for every SQL
// database Strata supports (SQLite, PostgreSQL). Dialects differ only in
// placeholders and in what a failed statement leaves of its transaction;
// the queries are plain SQL both accept.
//
// Writes go through one writer goroutine that groups whatever operations are
// queued into one transaction, each inside its own SAVEPOINT (unless it
// changes at most one row: see writeOne), so one operation's failure does
// not undo the others and the cost of a durable commit (an fsync of the
// WAL) is shared by the whole group. The writer is
// the one serial stage of every namespace change, so while operations queue
// for it it has a thread of its own at raised priority, where the system
// allows (prio_linux.go). Reads use a separate pool and never wait for the
// writer.
package sqlstore

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"io/fs"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/pressly/goose/v3"

	"github.com/strata-storage/strata/internal/api"
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
}

// Store is a catalog.Store over database/sql.
type Store struct {
	d       Dialect
	wdb     *sql.DB // exactly one connection
	rdb     *sql.DB
	ops     chan *op
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

// MaxBatch bounds how many operations share one transaction.
const MaxBatch = 512

// unboostAfter is how many groups of one operation in a row end the
// writer's priority boost.
const unboostAfter = 64

type op struct {
	fn  func(*Tx) error
	err chan error
	// one: fn changes the database in at most one statement, so when it
	// fails nothing of it is left and it needs no savepoint of its own (a
	// failed statement undoes itself). Two statements less for every
	// create.
	one bool
}

// The id spaces the writer issues from, and their rows in the ids table.
const (
	inodeIDs = iota
	bitfileIDs
	nIDSpaces
)

var idNames = [nIDSpaces]string{"inodes", "bitfiles"}

// idBlock is how many ids one reservation adds: a restart skips at most
// this many.
const idBlock = 1024

// idRange is what an id space may still issue: next up to end (excluded).
type idRange struct{ next, end int64 }

// New starts a store on wdb (which must allow a single connection) and rdb.
// The schema must have the ids table.
func New(d Dialect, wdb, rdb *sql.DB) (*Store, error) {
	s := &Store{d: d, wdb: wdb, rdb: rdb, ops: make(chan *op, MaxBatch), closing: make(chan struct{}), done: make(chan struct{}),
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

var errClosed = errors.New("catalog: closed")

// write runs fn in the writer's current group transaction.
func (s *Store) write(ctx context.Context, fn func(*Tx) error) error {
	return s.queue(ctx, &op{fn: fn, err: make(chan error, 1)})
}

// writeOne is write for an fn that changes the database in at most one
// statement (see op.one).
func (s *Store) writeOne(ctx context.Context, fn func(*Tx) error) error {
	return s.queue(ctx, &op{fn: fn, err: make(chan error, 1), one: true})
}

func (s *Store) queue(ctx context.Context, o *op) error {
	select {
	case s.ops <- o:
	case <-s.closing:
		return errClosed
	case <-ctx.Done():
		return ctx.Err()
	}
	// Once queued the operation will run; wait for its outcome so a caller
	// never mistakes a committed change for a failed one.
	return <-o.err
}

func (s *Store) writer() {
	defer close(s.done)
	lone := 0
	for {
		var first *op
		select {
		case first = <-s.ops:
		case <-s.closing:
			// Drain what was queued before close.
			for {
				select {
				case o := <-s.ops:
					s.runBatch([]*op{o})
				default:
					return
				}
			}
		}
		batch := []*op{first}
	fill:
		for len(batch) < MaxBatch {
			select {
			case o := <-s.ops:
				batch = append(batch, o)
			default:
				break fill
			}
		}
		// Boost while operations queue behind each other; drop it after a
		// run of lone ones (a single client, or a quiet system).
		if len(batch) > 1 {
			lone = 0
			s.boost.set(true)
		} else if lone++; lone == unboostAfter {
			s.boost.set(false)
		}
		s.runBatch(batch)
	}
}

// Groups reports how many group transactions the writer has run and how
// many operations they held: their ratio is the group size, which sets how
// far one commit's fsync is shared.
func (s *Store) Groups() (groups, ops int64) { return s.groups.Load(), s.grouped.Load() }

// ObserveGroups has fn told of every group transaction the writer runs:
// how many operations it held and how long it took from BEGIN to the end
// of its COMMIT (the durable sync included). fn runs on the writer's
// goroutine and must be quick.
func (s *Store) ObserveGroups(fn func(ops int, took time.Duration)) { s.observe.Store(&fn) }

func (s *Store) runBatch(batch []*op) {
	s.groups.Add(1)
	s.grouped.Add(int64(len(batch)))
	defer s.prepareNew()
	start := time.Now()
	if s.runGroup(batch, false) {
		s.runGroup(batch, true)
	}
	if fn := s.observe.Load(); fn != nil {
		(*fn)(len(batch), time.Since(start))
	}
}

// runGroup runs batch as one transaction and answers its operations, each
// of them all or nothing. A group first runs with no savepoints at all:
// they cost two statements per operation (a third of the statements of a
// small file's create and commit on SQLite; two round trips to the
// database on PostgreSQL, where a failed statement aborts the whole
// transaction anyway). If an operation fails where that could leave part
// of it done (any failure on PostgreSQL; on SQLite, one of an operation of
// several statements), the group is rolled back unanswered and runGroup
// reports that the batch must run again, carefully: each operation inside
// a savepoint of its own, so that one's failure undoes only itself.
// SQLite spares the savepoint for an operation of at most one statement
// (op.one): a failed statement undoes itself. Failures are rare; the
// common case does not pay for them.
func (s *Store) runGroup(batch []*op, careful bool) (retry bool) {
	ctx := context.Background()
	errs := make([]error, len(batch))
	tx, err := s.wdb.BeginTx(ctx, nil)
	if err != nil {
		for _, o := range batch {
			o.err <- fmt.Errorf("catalog: begin: %w", err)
		}
		return false
	}
	t := &Tx{s: s, tx: tx, ctx: ctx, ids: s.ids}
	if err := t.reserveIDs(len(batch)); err != nil {
		tx.Rollback()
		for _, o := range batch {
			o.err <- err
		}
		return false
	}
	single := len(batch) == 1
	var after []func()
	for i, o := range batch {
		t.after = t.after[:0]
		if single || (o.one && !s.d.AbortsOnError) || !careful {
			errs[i] = o.fn(t)
			if errs[i] != nil && !single && (s.d.AbortsOnError || !o.one) {
				tx.Rollback()
				return true
			}
		} else if _, err := t.Exec("SAVEPOINT op"); err != nil {
			errs[i] = fmt.Errorf("catalog: savepoint: %w", err)
			continue
		} else {
			if errs[i] = o.fn(t); errs[i] != nil {
				if _, err := t.Exec("ROLLBACK TO SAVEPOINT op"); err != nil {
					errs[i] = errors.Join(errs[i], err)
				}
			}
			t.Exec("RELEASE SAVEPOINT op")
		}
		if errs[i] == nil {
			after = append(after, t.after...)
		}
	}
	if single && errs[0] != nil {
		tx.Rollback()
		batch[0].err <- errs[0]
		return false
	}
	if err := tx.Commit(); err != nil {
		for i := range errs {
			if errs[i] == nil {
				errs[i] = fmt.Errorf("catalog: commit: %w", err)
			}
		}
	} else {
		s.ids = t.ids
		for _, fn := range after {
			fn()
		}
	}
	for i, o := range batch {
		o.err <- errs[i]
	}
	return false
}

func (s *Store) prepareNew() {
	for q := range s.unprepared {
		if st, err := s.wdb.Prepare(s.rebind(q)); err == nil {
			s.wstmt[q] = st
		}
		delete(s.unprepared, q)
	}
}

// Tx is the writer's transaction handle.
type Tx struct {
	s     *Store
	tx    *sql.Tx
	ctx   context.Context
	after []func() // cache updates of the current op, applied after commit
	// ids: the store's id ranges as this transaction leaves them, theirs
	// once it commits.
	ids [nIDSpaces]idRange
}

// reserveIDs makes sure each id space can issue n ids in this transaction
// (an operation inserts at most one inode and one bitfile), reserving a
// block in the ids table when it cannot. It runs first, outside every
// operation's savepoint, so no operation's rollback can undo a reservation
// that ids were then issued from.
func (t *Tx) reserveIDs(n int) error {
	for i := range t.ids {
		r := &t.ids[i]
		if r.end-r.next >= int64(n) {
			continue
		}
		end := r.next + max(idBlock, int64(n))
		k, err := t.Exec("UPDATE ids SET next = ? WHERE name = ?", end, idNames[i])
		if err == nil && k != 1 {
			err = fmt.Errorf("%d rows in ids", k)
		}
		if err != nil {
			return fmt.Errorf("catalog: reserve %s ids: %w", idNames[i], err)
		}
		r.end = end
	}
	return nil
}

// newID issues the next id of a space.
func (t *Tx) newID(space int) (int64, error) {
	r := &t.ids[space]
	if r.next >= r.end {
		return 0, fmt.Errorf("catalog: %s ids: more than one per operation", idNames[space])
	}
	r.next++
	return r.next - 1, nil
}

func (t *Tx) stmt(q string) (*sql.Stmt, error) {
	st, ok := t.s.wstmt[q]
	if !ok {
		t.s.unprepared[q] = true
		return t.tx.PrepareContext(t.ctx, t.s.rebind(q))
	}
	return t.tx.StmtContext(t.ctx, st), nil
}

// Exec runs a statement and returns the rows it affected.
func (t *Tx) Exec(q string, args ...any) (int64, error) {
	st, err := t.stmt(q)
	if err != nil {
		return 0, err
	}
	res, err := st.Exec(args...)
	if err != nil {
		return 0, fmt.Errorf("catalog: %s: %w", firstWord(q), err)
	}
	return res.RowsAffected()
}

// QueryRow runs a query returning one row.
func (t *Tx) QueryRow(q string, args ...any) *sql.Row {
	st, err := t.stmt(q)
	if err != nil {
		return t.tx.QueryRowContext(t.ctx, "SELECT broken WHERE 0") // surfaces as a scan error
	}
	return st.QueryRow(args...)
}

// Query runs a query returning rows.
func (t *Tx) Query(q string, args ...any) (*sql.Rows, error) {
	st, err := t.stmt(q)
	if err != nil {
		return nil, err
	}
	return st.Query(args...)
}

func firstWord(q string) string {
	q = strings.TrimSpace(q)
	if i := strings.IndexAny(q, " \n\t"); i > 0 {
		return strings.ToLower(q[:i])
	}
	return q
}

func (s *Store) rstmtFor(q string) (*sql.Stmt, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	st, ok := s.rstmt[q]
	if !ok {
		var err error
		if st, err = s.rdb.Prepare(s.rebind(q)); err != nil {
			return nil, fmt.Errorf("catalog: prepare %q: %w", q, err)
		}
		s.rstmt[q] = st
	}
	return st, nil
}

func (s *Store) readRow(ctx context.Context, q string, args ...any) (*sql.Row, error) {
	st, err := s.rstmtFor(q)
	if err != nil {
		return nil, err
	}
	return st.QueryRowContext(ctx, args...), nil
}

func (s *Store) readRows(ctx context.Context, q string, args ...any) (*sql.Rows, error) {
	st, err := s.rstmtFor(q)
	if err != nil {
		return nil, err
	}
	return st.QueryContext(ctx, args...)
}

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
	// A new empty file is one insert (the common create); anything else
	// writes several rows and needs its savepoint.
	if b == nil && !replace && attrs == nil {
		return in, s.writeOne(ctx, fn)
	}
	return in, s.write(ctx, fn)
}

// commitInode makes in visible at its name: inserted, or with replace
// over the file there (whose data dies).
func (t *Tx) commitInode(in *catalog.Inode, replace bool) error {
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
	if err := t.kill(old.Bitfile); err != nil {
		return err
	}
	in.ID = old.ID
	// (A symbolic link replaced becomes a file.)
	_, err = t.Exec("UPDATE inodes SET kind = ?, mode = ?, uid = ?, gid = ?, size = ?, mtime = ?, ctime = ?, atime = ?, cos = ?, bitfile = ?, target = '' WHERE id = ?",
		in.Kind, in.Mode, in.UID, in.GID, in.Size, in.Mtime, in.Ctime, in.Atime, in.COS, in.Bitfile, in.ID)
	t.set(*in)
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
		const seg = "FROM segments WHERE bitfile = ? AND copy = ? AND stripe = ?"
		n, err := t.Exec("UPDATE devices SET used = used + ? - (SELECT length "+seg+") WHERE id = (SELECT device "+seg+")",
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
	err := s.write(ctx, func(t *Tx) error {
		var ok bool
		var err error
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
	return src, err
}

// Remove implements catalog.Store.
func (s *Store) Remove(ctx context.Context, parent int64, name string, recursive bool) (catalog.Inode, error) {
	var in catalog.Inode
	err := s.write(ctx, func(t *Tx) error {
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

// CreatePending implements catalog.Store.
func (s *Store) CreatePending(ctx context.Context, b catalog.Bitfile) (catalog.Bitfile, error) {
	b.State = catalog.Pending
	err := s.write(ctx, func(t *Tx) error {
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
			n, err := t.Exec("UPDATE devices SET used = used + ? WHERE id = ? AND used + ? <= capacity", sg.Length, sg.Device, sg.Length)
			if err != nil {
				return err
			}
			if n == 0 {
				return t.whyFull(sg.Device, sg.Length)
			}
		}
		return nil
	})
	return b, err
}

// whyFull explains a reservation of n bytes on dev that updated no row.
func (t *Tx) whyFull(dev string, n int64) error {
	var capacity, used int64
	if err := t.QueryRow("SELECT capacity, used FROM devices WHERE id = ?", dev).Scan(&capacity, &used); err != nil {
		return notFound(err, "device %q", dev)
	}
	return api.Errorf(api.ErrNoSpace, "device %s: %d bytes to reserve, %d free", dev, n, max(capacity-used, 0))
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
		return err
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
		for _, q := range []string{"DELETE FROM segments WHERE bitfile = ?", "DELETE FROM tape_copies WHERE bitfile = ?", "DELETE FROM recalls WHERE bitfile = ?"} {
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
