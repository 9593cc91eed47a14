package core

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/strata-storage/strata/internal/api"
	"github.com/strata-storage/strata/internal/auth"
	"github.com/strata-storage/strata/internal/catalog"
)

// Creates racing for the last bytes of a quota never pass it together:
// each reserves its size under the quota's lock before any data moves.
// With 1000 bytes and 300-byte files, exactly three are let through;
// empty files racing for a file quota likewise. An abort gives the room
// back; a removal gives back what the file held.
func TestQuotaRacingCreates(t *testing.T) {
	root := auth.With(context.Background(), auth.Root)
	c, _ := newTestCore(t, nil, api.DeviceInfo{ID: "d0", Pool: "disk", Capacity: 1 << 30, Free: 1 << 30})
	alice := auth.With(context.Background(), &auth.Identity{User: "alice", UID: 2001, GID: 3000, Method: auth.MethodToken})
	if _, err := c.SetQuota(alice, api.QuotaSet{Kind: "user", Name: "2001", Bytes: 1000}); !errors.Is(err, api.ErrDenied) {
		t.Fatalf("a user set a quota: %v", err)
	}
	if _, err := c.SetQuota(root, api.QuotaSet{Kind: "user", Name: "2001", Bytes: 1000}); err != nil {
		t.Fatal(err)
	}
	if _, err := c.SetQuota(root, api.QuotaSet{Kind: "group", Name: "3000", Files: 10}); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Mkdir(root, api.MkdirRequest{Path: "/home", Mode: 0o777}); err != nil {
		t.Fatal(err)
	}
	race := func(n int, size int64, prefix string) (ok []api.CreateResponse) {
		var wg sync.WaitGroup
		var mu sync.Mutex
		for i := range n {
			wg.Add(1)
			go func() {
				defer wg.Done()
				r, err := c.Create(alice, api.CreateRequest{Path: fmt.Sprintf("/home/%s%d", prefix, i), Size: size})
				mu.Lock()
				defer mu.Unlock()
				switch {
				case err == nil:
					ok = append(ok, r)
				case !errors.Is(err, api.ErrQuota):
					t.Errorf("create: %v", err)
				}
			}()
		}
		wg.Wait()
		return ok
	}
	got := race(40, 300, "big")
	if len(got) != 3 {
		t.Fatalf("%d creates of 300 bytes let through a 1000-byte quota, want 3", len(got))
	}
	// The message names the quota.
	_, err := c.Create(alice, api.CreateRequest{Path: "/home/one-more", Size: 300})
	if !errors.Is(err, api.ErrQuota) || err.Error() == "" {
		t.Fatal(err)
	}
	t.Log(err)
	if err := c.Abort(alice, api.AbortRequest{Bitfile: got[0].Bitfile}); err != nil {
		t.Fatal(err)
	}
	if again := race(10, 300, "again"); len(again) != 1 {
		t.Fatalf("after an abort: %d let through, want 1", len(again))
	}
	// Files: the group's 10; the three writes in progress hold one each.
	empties := race(40, 0, "empty")
	if len(empties) != 7 {
		t.Fatalf("%d empty files let through, want 7", len(empties))
	}
	q, err := c.Quota(alice, "")
	if err != nil {
		t.Fatal(err)
	}
	if len(q) != 2 || q[0].Kind != catalog.QuotaUser || q[0].Files != 7 || q[0].PendingBytes != 900 || q[1].Kind != catalog.QuotaGroup || q[1].MaxFiles != 10 || q[1].Files != 7 {
		t.Fatalf("quota report: %+v", q)
	}
	// A removal gives its file back.
	if err := c.Remove(alice, api.RemoveRequest{Path: empties[0].File.Path}); err != nil {
		t.Fatal(err)
	}
	if more := race(5, 0, "more"); len(more) != 1 {
		t.Fatalf("after a removal: %d let through, want 1", len(more))
	}
	if _, err := c.Quota(alice, "someone-else"); !errors.Is(err, api.ErrDenied) && !errors.Is(err, api.ErrInvalid) {
		t.Fatalf("a user read another's quota: %v", err)
	}
}

// countUsage counts the store's usage passes (one read of every file).
type countUsage struct {
	catalog.Store
	n *atomic.Int64
}

func (s countUsage) Usage(ctx context.Context) ([]catalog.Usage, error) {
	s.n.Add(1)
	return s.Store.Usage(ctx)
}

// Without a quota, usage is counted only when asked for: not at start,
// and not in the background after tier moves (each count reads every
// file); a report counts afresh, and once a quota is set the background
// keeps the count current.
func TestUsageCountedForQuotasOnly(t *testing.T) {
	root := auth.With(context.Background(), auth.Root)
	var n atomic.Int64
	c, _ := newTestCore(t, func(s catalog.Store) catalog.Store { return countUsage{s, &n} }, api.DeviceInfo{ID: "d0", Pool: "disk", Capacity: 1 << 30, Free: 1 << 30})
	if n.Load() != 0 {
		t.Fatalf("%d usage passes at start without quotas", n.Load())
	}
	r, err := c.Create(root, api.CreateRequest{Path: "/f", Size: 0})
	if err != nil || r.File == nil {
		t.Fatalf("create: %+v, %v", r, err)
	}
	for _, step := range []struct {
		name string
		do   func()
		want int64
	}{
		{"tiers moved, no quota", func() { c.quota.markStale(); c.quota.refresh(root, c.store) }, 0},
		{"a report", func() {
			q, err := c.Quota(root, "")
			if err != nil || q[0].Files != 1 {
				t.Fatalf("report %+v, %v", q, err)
			}
		}, 1},
		{"a quota set", func() {
			if _, err := c.SetQuota(root, api.QuotaSet{Kind: "user", Name: "0", Files: 100}); err != nil {
				t.Fatal(err)
			}
		}, 2},
		{"tiers moved, a quota set", func() { c.quota.markStale(); c.quota.refresh(root, c.store) }, 3},
		{"nothing moved", func() { c.quota.refresh(root, c.store) }, 3},
	} {
		step.do()
		if got := n.Load(); got != step.want {
			t.Fatalf("%s: %d usage passes in all, want %d", step.name, got, step.want)
		}
	}
}

// A file replaced by a commit or a rename leaves quota usage as the catalog counts
// it, without a pass over the catalog: the commit or rename says what it replaced
// (catalog.Inode.Replaced).
func TestReplacedFileLeavesUsageExact(t *testing.T) {
	root := auth.With(context.Background(), auth.Root)
	var n atomic.Int64
	c, db := newTestCore(t, func(s catalog.Store) catalog.Store { return countUsage{s, &n} }, api.DeviceInfo{ID: "d0", Pool: "disk", Capacity: 1 << 30, Free: 1 << 30})
	if _, err := c.SetQuota(root, api.QuotaSet{Kind: "user", Name: "0", Files: 100}); err != nil {
		t.Fatal(err)
	}
	passes := n.Load()
	for _, q := range []api.CreateRequest{{Path: "/a"}, {Path: "/a", Overwrite: true}, {Path: "/b"}, {Path: "/b", Overwrite: true}, {Path: "/a", Overwrite: true}} {
		if _, err := c.Create(root, q); err != nil {
			t.Fatalf("create %+v: %v", q, err)
		}
	}
	if err := c.Rename(root, api.RenameRequest{Src: "/b", Dst: "/a", Overwrite: true}); err != nil {
		t.Fatal(err)
	}
	if c.quota.isStale() {
		t.Fatal("usage marked stale by a replacing create or rename")
	}
	c.quota.refresh(root, c.store)
	if got := n.Load(); got != passes {
		t.Fatalf("%d usage passes after the creates, want none", got-passes)
	}
	want, err := db.Usage(root)
	if err != nil || len(want) != 2 || want[0].Files != 1 {
		t.Fatalf("the catalog counts %+v, %v", want, err)
	}
	for _, u := range want {
		if got := c.quota.used[qkey{u.Kind, u.ID}]; got.Files != u.Files || got.Bytes != u.Bytes || got.DiskBytes != u.DiskBytes {
			t.Fatalf("%s %d: usage %+v, the catalog counts %+v", u.Kind, u.ID, got, u)
		}
	}
}
