package catalogtest

import (
	"fmt"
	"testing"

	"github.com/strata-storage/strata/internal/catalog"
)

// RunReopen runs the cases that close a store and open it again. place
// makes a new, empty place for a catalog and returns how to open it there
// (the same catalog every call).
func RunReopen(t *testing.T, place func(t *testing.T) func() (catalog.Store, error)) {
	for _, tc := range []struct {
		name string
		fn   func(t *testing.T, open func() catalog.Store)
	}{
		{"KeepsData", testReopenKeepsData},
		{"IDsNeverReissued", testIDsAcrossReopen},
	} {
		t.Run(tc.name, func(t *testing.T) {
			open := place(t)
			tc.fn(t, func() catalog.Store {
				t.Helper()
				s, err := open()
				if err != nil {
					t.Fatal(err)
				}
				return s
			})
		})
	}
}

func testReopenKeepsData(t *testing.T, open func() catalog.Store) {
	s := open()
	d, err := s.Mkdir(ctx, catalog.Inode{Parent: catalog.RootID, Name: "keep", Mode: 0o755})
	if err != nil {
		t.Fatal(err)
	}
	s.Close()
	s = open()
	defer s.Close()
	got, err := s.Lookup(ctx, catalog.RootID, "keep")
	if err != nil || got.ID != d.ID {
		t.Fatalf("after reopen: %+v %v", got, err)
	}
}

// Ids are never reissued across a restart, even when the highest inode
// and bitfile were removed before it.
func testIDsAcrossReopen(t *testing.T, open func() catalog.Store) {
	var maxInode, maxBitfile int64
	for round := range 3 {
		s := open()
		if round == 0 {
			if err := s.PutDevice(ctx, catalog.Device{ID: "d0", Pool: "disk", Mover: "m0", Capacity: 1 << 30}); err != nil {
				t.Fatal(err)
			}
		}
		for i := range 3 {
			f, err := s.Commit(ctx, catalog.Inode{Parent: catalog.RootID, Name: fmt.Sprintf("r%d-%d", round, i), Mode: 0o644}, nil, false)
			if err != nil {
				t.Fatal(err)
			}
			if f.ID <= maxInode {
				t.Fatalf("round %d: inode %d issued again (highest before: %d)", round, f.ID, maxInode)
			}
			maxInode = f.ID
			b, err := s.CreatePending(ctx, catalog.Bitfile{Size: 1, StripeWidth: 1, Epoch: 1, Lease: 1, Segments: []catalog.Segment{{Device: "d0", Length: 1}}})
			if err != nil {
				t.Fatal(err)
			}
			if b.ID <= maxBitfile {
				t.Fatalf("round %d: bitfile %d issued again (highest before: %d)", round, b.ID, maxBitfile)
			}
			maxBitfile = b.ID
		}
		// The highest of each goes before the restart.
		if _, err := s.Remove(ctx, catalog.RootID, fmt.Sprintf("r%d-2", round), false); err != nil {
			t.Fatal(err)
		}
		if err := s.Abort(ctx, maxBitfile); err != nil {
			t.Fatal(err)
		}
		if err := s.Purge(ctx, maxBitfile); err != nil {
			t.Fatal(err)
		}
		s.Close()
	}
}
