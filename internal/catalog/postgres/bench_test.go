package postgres

import (
	"testing"

	"github.com/strata-storage/strata/internal/catalog/catalogtest"
	"github.com/strata-storage/strata/internal/testutil/pgtest"
)

// BenchmarkCommitEmpty is the catalog's share of a create on PostgreSQL
// (catalogtest.CommitEmpty): with each group asking for its transaction id
// (so that a COMMIT cut off by a restart can be resolved) and, as the
// baseline in the same run, without.
func BenchmarkCommitEmpty(b *testing.B) {
	for _, resolved := range []bool{false, true} {
		b.Run(map[bool]string{false: "baseline", true: "resolvable"}[resolved], func(b *testing.B) {
			s, err := Open(pgtest.DSN(b), Options{unresolved: !resolved})
			if err != nil {
				b.Fatal(err)
			}
			defer s.Close()
			catalogtest.CommitEmpty(b, s)
		})
	}
}
