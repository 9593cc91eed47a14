package sqlstore

// The writer: one goroutine that runs queued operations in group
// transactions, each in its own savepoint, and the Tx they run in.

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strings"
	"sync/atomic"
	"time"
)

// MaxBatch bounds how many operations share one transaction.
const MaxBatch = 512

// unboostAfter is how many groups of one operation in a row end the
// writer's priority boost.
const unboostAfter = 64

type op struct {
	fn  func(*Tx) error
	err chan error
	// one: fn fails, when it does, before it has changed a row (a create
	// refused for its name or its directory: a failed statement undoes
	// itself), so a group's first run answers its failure and goes on
	// without a savepoint for it. Two statements less for every create.
	// Should it fail after a change (Tx.wrote), the group runs again
	// carefully.
	one bool
	// late: fn's directory times and device reservations may wait for
	// the end of its group (see late.go).
	late bool
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

var errClosed = errors.New("catalog: closed")

// write runs fn in the writer's current group transaction.
func (s *Store) write(ctx context.Context, fn func(*Tx) error) error {
	return s.queue(ctx, &op{fn: fn, err: make(chan error, 1)})
}

// writeLate is write for an fn whose directory times and device
// reservations may wait (op.late); one: it fails, if at all, before it
// changes a row (op.one).
func (s *Store) writeLate(ctx context.Context, one bool, fn func(*Tx) error) error {
	return s.queue(ctx, &op{fn: fn, err: make(chan error, 1), one: one, late: true})
}

// writeAll is write for several functions, queued in order before the
// first is waited for: the writer runs them in that order, in as few
// groups (and syncs) as it can. It returns their errors joined.
func (s *Store) writeAll(ctx context.Context, fns ...func(*Tx) error) error {
	ops := make([]*op, 0, len(fns))
	var errs []error
	for _, fn := range fns {
		o := &op{fn: fn, err: make(chan error, 1)}
		if err := s.enqueue(ctx, o); err != nil {
			errs = append(errs, err)
			break
		}
		ops = append(ops, o)
	}
	for _, o := range ops {
		errs = append(errs, <-o.err) // queued: it will run; wait for its outcome
	}
	return errors.Join(errs...)
}

func (s *Store) queue(ctx context.Context, o *op) error {
	if err := s.enqueue(ctx, o); err != nil {
		return err
	}
	// Once queued the operation will run; wait for its outcome so a caller
	// never mistakes a committed change for a failed one.
	return <-o.err
}

func (s *Store) enqueue(ctx context.Context, o *op) error {
	select {
	case s.ops <- o:
	case <-s.closing:
		return errClosed
	case <-ctx.Done():
		return ctx.Err()
	}
	if e, ok := ctx.Value(expectKey{}).(*expected); ok {
		e.release() // queued: the writer sees it
	}
	return nil
}

// Expecting implements catalog.Expecter.
func (s *Store) Expecting(ctx context.Context) (context.Context, func()) {
	e := &expected{s: s}
	s.coming.Add(1)
	return context.WithValue(ctx, expectKey{}, e), e.release
}

type expectKey struct{}

// expected is a write announced to the writer, until it is queued or its
// caller says there will be none.
type expected struct {
	s    *Store
	done atomic.Bool
}

func (e *expected) release() {
	if e.done.CompareAndSwap(false, true) && e.s.coming.Add(-1) == 0 {
		select {
		case e.s.arrived <- struct{}{}:
		default:
		}
	}
}

// lingerFor bounds how long the writer waits for announced writes
// (Store.Expecting) before it runs a group without them: a client's
// creates and commits reach the writer some hundred microseconds after
// they arrive (each checks, places and signs first) and, joined, share a
// group's BEGIN, COMMIT and sync, where without the wait a put of many
// small files made groups of four or five.
var lingerFor = 300 * time.Microsecond

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
		if s.coming.Load() > 0 && len(batch) < MaxBatch {
			batch = s.linger(batch)
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

// linger adds to batch the writes queued while announced ones are still
// coming, for at most lingerFor.
func (s *Store) linger(batch []*op) []*op {
	select {
	case <-s.arrived: // a stale kick
	default:
	}
	t := time.NewTimer(lingerFor)
	defer t.Stop()
	for len(batch) < MaxBatch && s.coming.Load() > 0 {
		select {
		case o := <-s.ops:
			batch = append(batch, o)
		case <-s.arrived:
		case <-t.C:
			return batch
		case <-s.closing:
			return batch
		}
	}
	for len(batch) < MaxBatch { // what came with the last of them
		select {
		case o := <-s.ops:
			batch = append(batch, o)
		default:
			return batch
		}
	}
	return batch
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
	careful := false
	for {
		out, err := s.runGroup(batch, careful)
		if out == groupCareful {
			careful = true
			continue
		}
		if out == groupLost {
			// The database went away before anything of the group could
			// have been committed (a restart, a failing link): the
			// writes wait, and run again once it is back.
			if time.Since(start) < ReconnectFor {
				time.Sleep(reconnectPause)
				continue
			}
			for _, o := range batch {
				o.err <- fmt.Errorf("catalog: the database has been unreachable for %s: %w", ReconnectFor, err)
			}
		}
		break
	}
	if fn := s.observe.Load(); fn != nil {
		(*fn)(len(batch), time.Since(start))
	}
}

// ReconnectFor is how long writes wait for a database that went away
// (Dialect.Transient) before they fail; reconnectPause is between tries.
var (
	ReconnectFor   = 30 * time.Second
	reconnectPause = 250 * time.Millisecond
)

// What runGroup did with a group.
type groupOutcome int

const (
	groupDone    groupOutcome = iota // every operation answered
	groupCareful                     // run it again, carefully (see runGroup)
	groupLost                        // the database went away: nothing answered, nothing committed
)

// resolve asks the database, once it is back, whether transaction xid
// committed; known is false when it cannot say (no TxStatus, or not back
// within ReconnectFor).
func (s *Store) resolve(xid int64) (committed, known bool) {
	if s.d.TxStatus == "" || xid == 0 {
		return false, false
	}
	start := time.Now()
	for time.Since(start) < ReconnectFor {
		var status sql.NullString
		err := s.wdb.QueryRowContext(context.Background(), s.rebind(s.d.TxStatus), xid).Scan(&status)
		switch {
		case err == nil && status.String == "in progress":
			// Its session is still ending.
		case err == nil:
			return status.String == "committed", true
		case !s.transient(err):
			return false, false
		}
		time.Sleep(reconnectPause)
	}
	return false, false
}

// transient reports whether err says the connection to the database was
// lost (rather than that a statement failed).
func (s *Store) transient(err error) bool {
	return err != nil && s.d.Transient != nil && s.d.Transient(err)
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
// On SQLite the first run goes on past an operation that failed before
// changing a row (op.one, and Tx.wrote still false): a failed statement
// undoes itself. Failures are rare; the common case does not pay for them.
//
// A lost connection before the COMMIT leaves the group unanswered too
// (groupLost, with the error): nothing of it was committed; so does a
// COMMIT that never left (Dialect.Unsent). One lost during the COMMIT is
// answered as a failure: whether the database committed it cannot be
// known.
func (s *Store) runGroup(batch []*op, careful bool) (groupOutcome, error) {
	ctx := context.Background()
	errs := make([]error, len(batch))
	tx, err := s.wdb.BeginTx(ctx, nil)
	if err != nil {
		if s.transient(err) {
			return groupLost, err
		}
		for _, o := range batch {
			o.err <- fmt.Errorf("catalog: begin: %w", err)
		}
		return groupDone, nil
	}
	t := &Tx{s: s, tx: tx, ctx: ctx, ids: s.ids}
	if err := t.reserveIDs(len(batch)); err != nil {
		tx.Rollback()
		if s.transient(err) {
			return groupLost, err
		}
		for _, o := range batch {
			o.err <- err
		}
		return groupDone, nil
	}
	var xid int64
	if s.d.TxID != "" {
		if err := tx.QueryRowContext(ctx, s.d.TxID).Scan(&xid); err != nil {
			tx.Rollback()
			if s.transient(err) {
				return groupLost, err
			}
			for _, o := range batch {
				o.err <- fmt.Errorf("catalog: transaction id: %w", err)
			}
			return groupDone, nil
		}
	}
	single := len(batch) == 1
	var after []func()
	for i, o := range batch {
		t.after = t.after[:0]
		if single || !careful {
			if !o.late {
				if out, err := t.flushLate(); out != groupDone {
					return out, err
				}
			}
			t.wrote = false
			t.beginLate(o.late)
			errs[i] = o.fn(t)
			t.endLate(errs[i] == nil)
			if s.transient(errs[i]) {
				tx.Rollback()
				return groupLost, errs[i]
			}
			// An op.one that failed left nothing, unless it changed
			// rows before failing (a create whose insert went in and
			// whose directory's times did not).
			if errs[i] != nil && !single && (s.d.AbortsOnError || !o.one || t.wrote) {
				tx.Rollback()
				return groupCareful, nil
			}
		} else if _, err := t.Exec("SAVEPOINT op"); err != nil {
			if s.transient(err) {
				tx.Rollback()
				return groupLost, err
			}
			errs[i] = fmt.Errorf("catalog: savepoint: %w", err)
			continue
		} else {
			if errs[i] = o.fn(t); errs[i] != nil {
				if s.transient(errs[i]) {
					tx.Rollback()
					return groupLost, errs[i]
				}
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
		return groupDone, nil
	}
	if out, err := t.flushLate(); out != groupDone {
		return out, err
	}
	err = tx.Commit()
	if s.transient(err) {
		if s.d.Unsent != nil && s.d.Unsent(err) {
			return groupLost, err // the COMMIT never left: nothing committed
		}
		if committed, known := s.resolve(xid); known && !committed {
			return groupLost, err
		} else if known {
			err = nil // it did commit before the connection went
		}
	}
	if err != nil {
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
	return groupDone, nil
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
	after []func()             // cache updates of the current op, applied after commit
	local map[string]*sql.Stmt // statements prepared in this transaction (stmt)
	// wrote: a statement of the current op changed rows, so its failure
	// after that leaves part of it done unless a savepoint undoes it.
	wrote bool
	// ids: the store's id ranges as this transaction leaves them, theirs
	// once it commits.
	ids  [nIDSpaces]idRange
	late // what op.late operations leave for the end of the group
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

// stmt returns q prepared: the writer's own statement, or one of this
// transaction's while the writer has none yet (it prepares its own after
// the group). A statement first used many times in one group — the
// chunks of a tape file's copies — is prepared once, not each time (a
// tenth of recording 16,384 copies went to preparing them again).
func (t *Tx) stmt(q string) (*sql.Stmt, error) {
	st, ok := t.s.wstmt[q]
	if ok {
		return t.tx.StmtContext(t.ctx, st), nil
	}
	if st, ok := t.local[q]; ok {
		return st, nil
	}
	t.s.unprepared[q] = true
	st, err := t.tx.PrepareContext(t.ctx, t.s.rebind(q))
	if err == nil {
		if t.local == nil {
			t.local = map[string]*sql.Stmt{}
		}
		t.local[q] = st
	}
	return st, err
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
	n, err := res.RowsAffected()
	if n > 0 || err != nil {
		t.wrote = true
	}
	return n, err
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

func (s *Store) readRow(ctx context.Context, q string, args ...any) (scanner, error) {
	st, err := s.rstmtFor(q)
	if err != nil {
		return nil, err
	}
	return &readRow{s: s, st: st, ctx: ctx, args: args, row: st.QueryRowContext(ctx, args...)}, nil
}

// readRow is a row of a read whose Scan, should it find the database gone
// (Dialect.Transient), asks again until it is back, as writes wait.
type readRow struct {
	s    *Store
	st   *sql.Stmt
	ctx  context.Context
	args []any
	row  *sql.Row
}

func (r *readRow) Scan(dest ...any) error {
	start := time.Now()
	for {
		err := r.row.Scan(dest...)
		if !r.s.transient(err) || time.Since(start) >= ReconnectFor || r.ctx.Err() != nil {
			return err
		}
		time.Sleep(reconnectPause)
		r.row = r.st.QueryRowContext(r.ctx, r.args...)
	}
}

func (s *Store) readRows(ctx context.Context, q string, args ...any) (*sql.Rows, error) {
	st, err := s.rstmtFor(q)
	if err != nil {
		return nil, err
	}
	// A query that found the database gone waits for it, as writes do.
	start := time.Now()
	for {
		rows, err := st.QueryContext(ctx, args...)
		if !s.transient(err) || time.Since(start) >= ReconnectFor || ctx.Err() != nil {
			return rows, err
		}
		time.Sleep(reconnectPause)
	}
}
