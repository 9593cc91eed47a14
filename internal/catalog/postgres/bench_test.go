package postgres

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"

	"github.com/strata-storage/strata/internal/catalog"
	"github.com/strata-storage/strata/internal/testutil/pgtest"
)

// BenchmarkCommitEmpty is the catalog's share of a create on PostgreSQL,
// the commit of an empty file, from 8 goroutines per -cpu: with each
// group asking for its transaction id (so that a COMMIT cut off by a
// restart can be resolved) and, as the baseline in the same run, without.
func BenchmarkCommitEmpty(b *testing.B) {
	for _, resolved := range []bool{false, true} {
		b.Run(map[bool]string{false: "baseline", true: "resolvable"}[resolved], func(b *testing.B) {
			s, err := Open(pgtest.DSN(b), Options{unresolved: !resolved})
			if err != nil {
				b.Fatal(err)
			}
			defer s.Close()
			ctx := context.Background()
			var next atomic.Int64
			b.SetParallelism(4)
			g0, n0 := s.Groups()
			b.ResetTimer()
			b.RunParallel(func(pb *testing.PB) {
				d, err := s.Mkdir(ctx, catalog.Inode{Parent: catalog.RootID, Name: fmt.Sprintf("c%d", next.Add(1)), Mode: 0o755})
				if err != nil {
					b.Error(err)
					return
				}
				for i := 0; pb.Next(); i++ {
					if _, err := s.Commit(ctx, catalog.Inode{Parent: d.ID, Name: fmt.Sprintf("f%07d", i), Mode: 0o644}, nil, false); err != nil {
						b.Error(err)
						return
					}
				}
			})
			g1, n1 := s.Groups()
			b.ReportMetric(float64(n1-n0)/float64(g1-g0), "ops/group")
		})
	}
}
