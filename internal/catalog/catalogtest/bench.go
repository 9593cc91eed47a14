package catalogtest

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/strata-storage/strata/internal/catalog"
)

// CommitEmpty benchmarks the catalog's share of a create, the commit of an
// empty file, on s: 4 goroutines per -cpu (8 on this machine's two,
// corebench md's clients), each in its own directory. It reports the
// writer's group size when s counts its groups.
func CommitEmpty(b *testing.B, s catalog.Store) { commitEmpty(b, s, false) }

// CommitEmptyOneDir is CommitEmpty with every goroutine creating in one
// directory, 32 goroutines per -cpu, as a put of many files into one
// directory has them in flight: a group's creates share their
// directory's new times.
func CommitEmptyOneDir(b *testing.B, s catalog.Store) { commitEmpty(b, s, true) }

func commitEmpty(b *testing.B, s catalog.Store, oneDir bool) {
	ctx := context.Background()
	var next atomic.Int64
	b.SetParallelism(4)
	if oneDir {
		b.SetParallelism(32) // 64 goroutines on 2 cores: a put's files in flight
	}
	gc, counts := s.(catalog.GroupCounter)
	var g0, n0 int64
	if counts {
		g0, n0 = gc.Groups()
	}
	b.ResetTimer()
	shared, err := s.Mkdir(ctx, catalog.Inode{Parent: catalog.RootID, Name: fmt.Sprintf("shared%d", b.N), Mode: 0o755})
	if err != nil {
		b.Fatal(err)
	}
	b.RunParallel(func(pb *testing.PB) {
		g := next.Add(1)
		d, err := shared, error(nil)
		if !oneDir {
			d, err = s.Mkdir(ctx, catalog.Inode{Parent: catalog.RootID, Name: fmt.Sprintf("c%d", g), Mode: 0o755})
		}
		if err != nil {
			b.Error(err)
			return
		}
		for i := 0; pb.Next(); i++ {
			if _, err := s.Commit(ctx, catalog.Inode{Parent: d.ID, Name: fmt.Sprintf("f%d-%07d", g, i), Mode: 0o644}, nil, false); err != nil {
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

// SmallFiles is the catalog's share of putting small files: 16,384
// files of 64 KiB into one directory, 64 at once (a put's files in
// flight), each a pending bitfile on one device and its commit.
func SmallFiles(b *testing.B, s catalog.Store) {
	if err := s.PutDevice(context.Background(), catalog.Device{ID: "d0", Pool: "disk", Mover: "m0", Capacity: 1 << 50}); err != nil {
		b.Fatal(err)
	}
	const files = 16384
	for i := 0; b.Loop(); i++ {
		putSmall(s, fmt.Sprintf("d%d", i), files)
	}
	b.ReportMetric(float64(b.Elapsed().Microseconds())/float64(b.N*files), "µs/file")
}

// putSmall creates directory name and puts files of 64 KiB on device d0
// into it, 64 at once, and returns their bitfiles.
func putSmall(s catalog.Store, name string, files int) []int64 {
	ctx := context.Background()
	d := must(s.Mkdir(ctx, dir(catalog.RootID, name)))
	ids := make([]int64, files)
	var wg sync.WaitGroup
	for k := range 64 { // 64 at once: the writer commits them in groups
		wg.Add(1)
		go func() {
			defer wg.Done()
			for j := k; j < files; j += 64 {
				p := must(s.CreatePending(ctx, catalog.Bitfile{Size: 65536, StripeWidth: 1, StripeUnit: 1 << 20, Epoch: 1, Lease: 100,
					Segments: []catalog.Segment{{Device: "d0", Length: 65536}}}))
				must(s.Commit(ctx, file(d.ID, fmt.Sprintf("f%05d", j)), finish(p, 65536), false))
				ids[j] = p.ID
			}
		}()
	}
	wg.Wait()
	return ids
}

// AddTapeCopies records the copies of a migration's 16,384 small files,
// one tape file of 10,000 and one of 6,384, as a migration stream does
// after its flush: the time a small-file migration spends after its
// last byte reached the drive.
func AddTapeCopies(b *testing.B, s catalog.Store) {
	ctx := context.Background()
	if err := s.PutDevice(ctx, catalog.Device{ID: "d0", Pool: "disk", Mover: "m0", Capacity: 1 << 50}); err != nil {
		b.Fatal(err)
	}
	const files = 16384
	for i := 0; b.Loop(); i++ {
		b.StopTimer()
		ids := putSmall(s, fmt.Sprintf("d%d", i), files)
		tapes := [][]catalog.NewTapeCopy{nil, nil}
		for j, id := range ids {
			tc := catalog.TapeCopy{Volume: "T00001", Seq: 1 + j/10000, Position: 4096, Offset: int64(j%10000) << 16, Length: 65536, CRC32C: uint32(j)}
			tapes[j/10000] = append(tapes[j/10000], catalog.NewTapeCopy{Bitfile: id, Stripes: []catalog.TapeCopy{tc}})
		}
		b.StartTimer()
		for _, t := range tapes {
			if _, err := s.AddTapeCopies(ctx, t); err != nil {
				b.Fatal(err)
			}
		}
	}
	b.ReportMetric(float64(b.Elapsed().Microseconds())/float64(b.N*files), "µs/copy")
}
