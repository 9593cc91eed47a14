package sqlite

import (
	"context"
	"fmt"
	"path/filepath"
	"testing"

	"github.com/strata-storage/strata/internal/catalog"
	"github.com/strata-storage/strata/internal/catalog/catalogtest"
)

func TestConformance(t *testing.T) {
	// Returning: new ids read back as PostgreSQL dialects do.
	for _, o := range []Options{{}, {Returning: true}} {
		t.Run(fmt.Sprintf("returning=%v", o.Returning), func(t *testing.T) {
			catalogtest.Run(t, func(t *testing.T) catalog.Store {
				s, err := Open(filepath.Join(t.TempDir(), "c.db"), o)
				if err != nil {
					t.Fatal(err)
				}
				return s
			})
		})
	}
}

func TestReopenKeepsData(t *testing.T) {
	p := filepath.Join(t.TempDir(), "c.db")
	s, err := Open(p, Options{})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	d, err := s.Mkdir(ctx, catalog.Inode{Parent: catalog.RootID, Name: "keep", Mode: 0o755})
	if err != nil {
		t.Fatal(err)
	}
	s.Close()
	s, err = Open(p, Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	got, err := s.Lookup(ctx, catalog.RootID, "keep")
	if err != nil || got.ID != d.ID {
		t.Fatalf("after reopen: %+v %v", got, err)
	}
}

func TestBadSync(t *testing.T) {
	if _, err := Open(filepath.Join(t.TempDir(), "c.db"), Options{Sync: "sometimes"}); err == nil {
		t.Fatal("bad sync mode accepted")
	}
}
