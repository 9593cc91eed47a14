package postgres

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/strata-storage/strata/internal/catalog"
	"github.com/strata-storage/strata/internal/catalog/catalogtest"
	"github.com/strata-storage/strata/internal/catalog/sqlstore"
	"github.com/strata-storage/strata/internal/testutil/pgtest"
)

func TestMain(m *testing.M) { pgtest.Main(m) }

func TestConformance(t *testing.T) {
	catalogtest.Run(t, func(t *testing.T) catalog.Store {
		s, err := Open(pgtest.DSN(t), Options{})
		if err != nil {
			t.Fatal(err)
		}
		return s
	})
}

// A second server on the same catalog is refused while the first runs,
// and let in once it has closed.
func TestOneWriter(t *testing.T) {
	dsn := pgtest.DSN(t)
	a, err := Open(dsn, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if b, err := Open(dsn, Options{LockWait: 200 * time.Millisecond}); !errors.Is(err, ErrLocked) {
		if b != nil {
			b.Close()
		}
		t.Fatalf("second open: %v, want ErrLocked", err)
	}
	// Another catalog (schema) in the same database is independent.
	other, err := Open(pgtest.DSN(t), Options{})
	if err != nil {
		t.Fatalf("another catalog: %v", err)
	}
	other.Close()
	a.Close()
	b, err := Open(dsn, Options{})
	if err != nil {
		t.Fatalf("open after close: %v", err)
	}
	b.Close()
}

func TestBadOptions(t *testing.T) {
	if _, err := Open("host=/nonexistent", Options{Sync: "sometimes"}); err == nil {
		t.Fatal("bad sync mode accepted")
	}
	if _, err := Open("postgres://%zz", Options{}); err == nil {
		t.Fatal("bad dsn accepted")
	}
}

func TestReopen(t *testing.T) {
	catalogtest.RunReopen(t, func(t *testing.T) func() (catalog.Store, error) {
		dsn := pgtest.DSN(t)
		return func() (catalog.Store, error) { return Open(dsn, Options{}) }
	})
}

// A statement PostgreSQL rejects (a NUL in a name: the API never sends
// one, PostgreSQL's text cannot hold it) aborts its whole transaction;
// the operations grouped with it must still succeed, and it alone fail.
func TestFailedStatementFailsAlone(t *testing.T) {
	s, err := Open(pgtest.DSN(t), Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	ctx := context.Background()
	const workers, each = 8, 60
	var wg sync.WaitGroup
	errs := make(chan error, workers)
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range each {
				name := fmt.Sprintf("w%d-%d", w, i)
				if w == 0 && i%2 == 0 {
					if _, err := s.Commit(ctx, catalog.Inode{Parent: catalog.RootID, Name: "bad\x00" + name, Mode: 0o644}, nil, false); err == nil {
						errs <- fmt.Errorf("a name with a NUL was stored")
						return
					}
					continue
				}
				if _, err := s.Commit(ctx, catalog.Inode{Parent: catalog.RootID, Name: name, Mode: 0o644}, nil, false); err != nil {
					errs <- fmt.Errorf("%s: %w", name, err)
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	if n := len(must(s.List(ctx, catalog.RootID, "", 0))); n != workers*each-each/2 {
		t.Fatalf("root holds %d entries, want %d", n, workers*each-each/2)
	}
	if g, o := s.Groups(); o <= g {
		t.Logf("no group held two operations (%d groups, %d ops): the case was not exercised", g, o)
	}
}

func must[T any](v T, err error) T {
	if err != nil {
		panic(err)
	}
	return v
}

// A dsn naming a schema that does not exist yet gets it made.
func TestCreatesSchema(t *testing.T) {
	dsn := pgtest.DSN(t) + "_new" // pgtest's dsn ends with its schema's name
	s, err := Open(dsn, Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if _, err := s.Mkdir(context.Background(), catalog.Inode{Parent: catalog.RootID, Name: "d", Mode: 0o755}); err != nil {
		t.Fatal(err)
	}
}

// The database restarted under load (twice): writes in flight wait for it
// and complete, none is lost or refused, and what was committed is all
// there after.
func TestRestartUnderLoad(t *testing.T) {
	srv, s := servedStore(t)
	ctx := context.Background()
	const writers = 8
	var made sync.Map
	stop := make(chan struct{})
	errs := make(chan error, writers)
	var wg sync.WaitGroup
	for w := range writers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; ; i++ {
				select {
				case <-stop:
					return
				default:
				}
				name := fmt.Sprintf("w%d-%d", w, i)
				if _, err := s.Mkdir(ctx, catalog.Inode{Parent: catalog.RootID, Name: name, Mode: 0o755}); err != nil {
					errs <- fmt.Errorf("mkdir %s: %w", name, err)
					return
				}
				made.Store(name, true)
			}
		}()
	}
	for range 2 {
		time.Sleep(300 * time.Millisecond)
		srv.Restart(t)
	}
	time.Sleep(300 * time.Millisecond)
	close(stop)
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatalf("a write across the restarts failed: %v", err)
	}
	want := 0
	made.Range(func(k, _ any) bool { want++; return true })
	got, err := s.List(ctx, catalog.RootID, "", want+10)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != want {
		t.Fatalf("%d entries after the restarts, %d writes acknowledged", len(got), want)
	}
}

// TestReadsAcrossRestart: reads on connections the database's restart
// ended (57P01 on their next use) ask again on new ones, the unprepared
// Residency query as much as the prepared ones.
func TestReadsAcrossRestart(t *testing.T) {
	srv, s := servedStore(t)
	ctx := context.Background()
	if err := s.PutDevice(ctx, catalog.Device{ID: "d0", Pool: "disk", Mover: "m0", Capacity: 1 << 30}); err != nil {
		t.Fatal(err)
	}
	b, err := s.CreatePending(ctx, catalog.Bitfile{Size: 10, StripeWidth: 1, StripeUnit: 1 << 20, Epoch: 1, Lease: 100, Segments: []catalog.Segment{{Device: "d0", Length: 10}}})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.Commit(ctx, catalog.Inode{Parent: catalog.RootID, Name: "f", Mode: 0o644}, &b, false); err != nil {
		t.Fatal(err)
	}
	for round := range 2 {
		// Warm the read pool, then end its connections.
		if _, err := s.Residency(ctx, []int64{b.ID}); err != nil {
			t.Fatal(err)
		}
		if _, err := s.List(ctx, catalog.RootID, "", 0); err != nil {
			t.Fatal(err)
		}
		srv.Restart(t)
		if r, err := s.Residency(ctx, []int64{b.ID}); err != nil || !r[b.ID].OnDisk {
			t.Fatalf("round %d: residency after a restart: %v %v", round, r, err)
		}
		if l, err := s.List(ctx, catalog.RootID, "", 0); err != nil || len(l) != 1 {
			t.Fatalf("round %d: list after a restart: %v %v", round, l, err)
		}
	}
}

// servedStore opens a catalog on a PostgreSQL server of its own, which
// the test may restart; both end with the test.
func servedStore(t *testing.T) (*pgtest.Server, *sqlstore.Store) {
	srv := pgtest.Serve(t, "", "")
	s, err := Open(srv.DSN, Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return srv, s
}
