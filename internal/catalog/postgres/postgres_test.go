package postgres

import (
	"errors"
	"testing"

	"github.com/strata-storage/strata/internal/catalog"
	"github.com/strata-storage/strata/internal/catalog/catalogtest"
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
	if b, err := Open(dsn, Options{}); !errors.Is(err, ErrLocked) {
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
