// Package postgres opens Strata's catalog on a PostgreSQL server, for
// sites that keep their metadata in a database they already run, back up
// and replicate. Queries and the group-commit writer are sqlstore's, the
// same as the embedded SQLite catalog's; this package owns the connection
// settings, the one-server-per-catalog lock and the schema migrations.
//
// The catalog's writer keeps state between transactions (the ids it has
// reserved, the directories it knows, an inode cache), so exactly one
// Strata server may write a catalog (a schema: the connection's
// search_path): its writer connection holds a session advisory lock, and a
// second server is refused at open.
package postgres

import (
	"context"
	"database/sql/driver"
	"embed"
	"errors"
	"fmt"
	"io"
	"net"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/stdlib"
	"github.com/pressly/goose/v3"

	"github.com/strata-storage/strata/internal/catalog/sqlstore"
)

//go:embed migrations/*.sql
var migrations embed.FS

// Options tune the catalog.
type Options struct {
	// Sync is "full" (a commit is answered once PostgreSQL has flushed it
	// to its WAL: synchronous_commit on, the default) or "normal"
	// (synchronous_commit off: a crash of the database server may lose
	// the last fraction of a second of commits, never corrupt them).
	Sync string
	// Readers is the size of the read pool (default 8).
	Readers int
	// LockWait is how long Open waits for another server's hold on the
	// catalog to end (default 5 s): a server restarted at once may find
	// its predecessor's database session still closing.
	LockWait time.Duration
	// New refuses a schema that already holds tables: a catalog written
	// from scratch (strata rebuild-catalog) goes into an empty one only.
	New bool
	// unresolved leaves out the transaction id each group asks for (the
	// benchmark's baseline: what resolving a cut COMMIT costs).
	unresolved bool
}

// ErrNotNew is returned by Open with Options.New when the schema holds
// tables already.
var ErrNotNew = errors.New("catalog: the schema already holds tables; name a new one")

// lockKey and the catalog's schema name the advisory lock a writing server
// holds ("stra" in ASCII): one catalog per schema.
const lockKey = 0x73747261

// ErrLocked is returned when another server writes the catalog.
var ErrLocked = errors.New("catalog: another strata server is using this PostgreSQL catalog")

// Open connects to the catalog at dsn (a PostgreSQL connection string or
// URL), creates or upgrades its schema, and returns the store.
func Open(dsn string, o Options) (*sqlstore.Store, error) {
	var err error
	if o.Sync, o.Readers, err = sqlstore.Settle(o.Sync, o.Readers); err != nil {
		return nil, err
	}
	if o.LockWait == 0 {
		o.LockWait = 5 * time.Second
	}
	cfg, err := pgx.ParseConfig(dsn)
	if err != nil {
		return nil, fmt.Errorf("catalog: postgres dsn: %w", err)
	}
	where := fmt.Sprintf("%s@%s:%d/%s", cfg.User, cfg.Host, cfg.Port, cfg.Database)
	wcfg := cfg.Copy()
	if o.Sync == "normal" {
		wcfg.RuntimeParams["synchronous_commit"] = "off"
	}
	// The writer's session holds the lock that makes this server the
	// catalog's one writer. Should its host vanish (power, a partition),
	// the database must end the session, and so free the lock for a
	// standby, within seconds rather than after the kernel's default
	// two hours of keepalive silence or its quarter hour of
	// retransmissions. (Ignored over a Unix socket.)
	for k, v := range map[string]string{"tcp_keepalives_idle": "2", "tcp_keepalives_interval": "1", "tcp_keepalives_count": "3", "tcp_user_timeout": "5000"} {
		if _, ok := wcfg.RuntimeParams[k]; !ok {
			wcfg.RuntimeParams[k] = v
		}
	}
	// Every connection the writer's pool opens takes the lock first, so a
	// connection lost and reopened cannot write beside another server.
	wdb := stdlib.OpenDB(*wcfg, stdlib.OptionAfterConnect(func(ctx context.Context, c *pgx.Conn) error {
		if err := ensureSchema(ctx, c); err != nil {
			return err
		}
		deadline := time.Now().Add(o.LockWait)
		for {
			var ok bool
			if err := c.QueryRow(ctx, "SELECT pg_try_advisory_lock($1, hashtext(current_schema()))", int32(lockKey)).Scan(&ok); err != nil {
				return err
			}
			if ok {
				return nil
			}
			if time.Now().After(deadline) {
				return ErrLocked
			}
			time.Sleep(50 * time.Millisecond)
		}
	}))
	wdb.SetMaxOpenConns(1)
	wdb.SetMaxIdleConns(1)
	wdb.SetConnMaxIdleTime(0)
	wdb.SetConnMaxLifetime(0)
	if err := wdb.Ping(); err != nil {
		wdb.Close()
		if errors.Is(err, ErrLocked) {
			return nil, fmt.Errorf("%w (%s)", ErrLocked, where)
		}
		return nil, fmt.Errorf("catalog: connect %s: %w", where, err)
	}
	if o.New {
		// Checked under the advisory lock: no other server can be
		// creating the tables meanwhile.
		var n int
		if err := wdb.QueryRow("SELECT count(*) FROM pg_tables WHERE schemaname = current_schema()").Scan(&n); err != nil {
			wdb.Close()
			return nil, fmt.Errorf("catalog: connect %s: %w", where, err)
		}
		if n > 0 {
			wdb.Close()
			return nil, fmt.Errorf("%w (%s)", ErrNotNew, where)
		}
	}
	if err := sqlstore.Migrate(wdb, goose.DialectPostgres, migrations); err != nil {
		wdb.Close()
		return nil, fmt.Errorf("catalog: migrate %s: %w", where, err)
	}
	now := time.Now().UnixNano()
	if _, err := wdb.Exec("UPDATE inodes SET mtime = $1, ctime = $1, atime = $1 WHERE id = 1 AND mtime = 0", now); err != nil {
		wdb.Close()
		return nil, fmt.Errorf("catalog: init root: %w", err)
	}
	rdb := stdlib.OpenDB(*cfg)
	rdb.SetMaxOpenConns(o.Readers)
	rdb.SetMaxIdleConns(o.Readers)
	d := sqlstore.Dialect{Name: "postgres", Numbered: true, AbortsOnError: true,
		Transient: transient, Unsent: unsent, TxID: "SELECT txid_current()", TxStatus: "SELECT txid_status(?)"}
	if o.unresolved {
		d.TxID, d.TxStatus = "", ""
	}
	s, err := sqlstore.New(d, wdb, rdb)
	if err != nil {
		wdb.Close()
		rdb.Close()
	}
	return s, err
}

// transient reports whether err says the connection to the server was
// lost or refused (it restarted, is starting, its link failed) rather
// than that a statement failed: the catalog waits for it (see
// sqlstore.Dialect). Losing the lock to another server is not transient.
func transient(err error) bool {
	if errors.Is(err, ErrLocked) {
		return false
	}
	var pe *pgconn.PgError
	if errors.As(err, &pe) {
		// Class 08: connection exception; 57P01-03: the server shutting
		// down or not yet accepting connections.
		return strings.HasPrefix(pe.Code, "08") || pe.Code == "57P01" || pe.Code == "57P02" || pe.Code == "57P03"
	}
	var ce *pgconn.ConnectError
	var ne net.Error
	return errors.Is(err, driver.ErrBadConn) || errors.As(err, &ce) || errors.As(err, &ne) ||
		errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) || pgconn.SafeToRetry(err) ||
		errors.Is(err, syscall.ECONNREFUSED) || errors.Is(err, syscall.ECONNRESET) || errors.Is(err, syscall.EPIPE) ||
		strings.Contains(err.Error(), "conn closed")
}

// unsent reports whether err says that nothing of the request was sent
// (pgx's own judgement, or database/sql's bad connection, which means the
// operation was not performed).
func unsent(err error) bool {
	return pgconn.SafeToRetry(err) || errors.Is(err, driver.ErrBadConn)
}

// ensureSchema creates the schema the connection's search_path names
// first, if there is none yet to create tables in.
func ensureSchema(ctx context.Context, c *pgx.Conn) error {
	var cur *string
	if err := c.QueryRow(ctx, "SELECT current_schema()").Scan(&cur); err != nil {
		return err
	}
	if cur != nil {
		return nil
	}
	var path string
	if err := c.QueryRow(ctx, "SHOW search_path").Scan(&path); err != nil {
		return err
	}
	first := strings.TrimSpace(strings.Split(path, ",")[0])
	if first == "" || first == `"$user"` {
		return fmt.Errorf("catalog: no schema to create tables in (search_path %q): name one in the dsn, e.g. search_path=strata", path)
	}
	if unq, err := strconv.Unquote(first); err == nil {
		first = unq
	}
	if _, err := c.Exec(ctx, "CREATE SCHEMA IF NOT EXISTS "+pgx.Identifier{first}.Sanitize()); err != nil {
		return fmt.Errorf("catalog: create schema %s: %w", first, err)
	}
	return nil
}
