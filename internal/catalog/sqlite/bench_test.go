package sqlite

import (
	"path/filepath"
	"testing"

	"github.com/strata-storage/strata/internal/catalog"
	"github.com/strata-storage/strata/internal/catalog/catalogtest"
)

// BenchmarkCommitEmpty is the catalog's share of a create, the commit of an
// empty file (catalogtest.CommitEmpty), with the commit durable (full) or
// not (normal).
func BenchmarkCommitEmpty(b *testing.B) {
	for _, sync := range []string{"full", "normal"} {
		b.Run(sync, func(b *testing.B) { onStore(b, sync, catalogtest.CommitEmpty) })
	}
}

// BenchmarkCommitEmptyOneDir: see catalogtest.CommitEmptyOneDir.
func BenchmarkCommitEmptyOneDir(b *testing.B) { onStore(b, "", catalogtest.CommitEmptyOneDir) }

// BenchmarkSmallFiles: see catalogtest.SmallFiles.
func BenchmarkSmallFiles(b *testing.B) { onStore(b, "", catalogtest.SmallFiles) }

// BenchmarkAddTapeCopies: see catalogtest.AddTapeCopies.
func BenchmarkAddTapeCopies(b *testing.B) { onStore(b, "", catalogtest.AddTapeCopies) }

// onStore runs bench on a new catalog synced as sync says ("": the default).
func onStore(b *testing.B, sync string, bench func(*testing.B, catalog.Store)) {
	s, err := Open(filepath.Join(b.TempDir(), "c.db"), Options{Sync: sync})
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	bench(b, s)
}
