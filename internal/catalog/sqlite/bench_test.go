package sqlite

import (
	"path/filepath"
	"testing"

	"github.com/strata-storage/strata/internal/catalog/catalogtest"
)

// BenchmarkCommitEmpty is the catalog's share of a create, the commit of an
// empty file (catalogtest.CommitEmpty), with the commit durable (full) or
// not (normal).
func BenchmarkCommitEmpty(b *testing.B) {
	for _, sync := range []string{"full", "normal"} {
		b.Run(sync, func(b *testing.B) {
			s, err := Open(filepath.Join(b.TempDir(), "c.db"), Options{Sync: sync})
			if err != nil {
				b.Fatal(err)
			}
			defer s.Close()
			catalogtest.CommitEmpty(b, s)
		})
	}
}

// BenchmarkCommitEmptyOneDir: see catalogtest.CommitEmptyOneDir.
func BenchmarkCommitEmptyOneDir(b *testing.B) {
	s, err := Open(filepath.Join(b.TempDir(), "c.db"), Options{})
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	catalogtest.CommitEmptyOneDir(b, s)
}

// BenchmarkAddTapeCopies: see catalogtest.AddTapeCopies.
func BenchmarkAddTapeCopies(b *testing.B) {
	s, err := Open(filepath.Join(b.TempDir(), "c.db"), Options{})
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	catalogtest.AddTapeCopies(b, s)
}
