package catalogtest

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"

	"github.com/strata-storage/strata/internal/catalog"
)

// CommitEmpty benchmarks the catalog's share of a create, the commit of an
// empty file, on s: 4 goroutines per -cpu (8 on this machine's two,
// corebench md's clients), each in its own directory. It reports the
// writer's group size when s counts its groups.
func CommitEmpty(b *testing.B, s catalog.Store) {
	ctx := context.Background()
	var next atomic.Int64
	b.SetParallelism(4)
	gc, counts := s.(catalog.GroupCounter)
	var g0, n0 int64
	if counts {
		g0, n0 = gc.Groups()
	}
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
	if counts {
		g1, n1 := gc.Groups()
		b.ReportMetric(float64(n1-n0)/float64(g1-g0), "ops/group")
	}
}
