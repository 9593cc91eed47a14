package sqlstore_test

import (
	"context"
	"database/sql"
	"fmt"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/strata-storage/strata/internal/catalog"
	"github.com/strata-storage/strata/internal/catalog/sqlite"
)

// A create is an insert and its directory's new times. When the second
// fails, in a group with other operations, the create fails whole: the
// name stays free, and the others in the group are committed.
func TestCreateFailingInItsGroupLeavesNothing(t *testing.T) {
	p := filepath.Join(t.TempDir(), "c.db")
	s, err := sqlite.Open(p, sqlite.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	ctx := context.Background()
	now := time.Now().UnixNano()
	dir := func(name string) catalog.Inode {
		d, err := s.Mkdir(ctx, catalog.Inode{Parent: catalog.RootID, Name: name, Mode: 0o755, Mtime: now, Ctime: now, Atime: now})
		if err != nil {
			t.Fatal(err)
		}
		return d
	}
	bad, good := dir("bad"), dir("good")
	// The directory's row refuses new times, as a full or failing disk
	// would refuse the write of its page.
	db, err := sql.Open("sqlite", p)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	if _, err := db.Exec(fmt.Sprintf("CREATE TRIGGER refuse BEFORE UPDATE OF mtime ON inodes WHEN OLD.id = %d BEGIN SELECT RAISE(ABORT, 'injected'); END", bad.ID)); err != nil {
		t.Fatal(err)
	}
	waiting, release := s.Hold()
	files := []struct {
		parent int64
		name   string
	}{{good.ID, "a"}, {bad.ID, "x"}, {good.ID, "b"}}
	errs := make([]error, len(files))
	var wg sync.WaitGroup
	for i, f := range files {
		wg.Go(func() {
			_, errs[i] = s.Commit(ctx, catalog.Inode{Parent: f.parent, Name: f.name, Mode: 0o644, Mtime: now, Ctime: now, Atime: now}, nil, false)
		})
		waiting(i + 1) // in this order
	}
	release()
	wg.Wait()
	if errs[1] == nil {
		t.Fatal("the create whose directory refused its times succeeded")
	}
	if in, err := s.Lookup(ctx, bad.ID, "x"); err == nil {
		t.Fatalf("the failed create left its entry: %+v", in)
	}
	for _, i := range []int{0, 2} {
		if errs[i] != nil {
			t.Fatalf("create %s beside the failed one: %v", files[i].name, errs[i])
		}
		if _, err := s.Lookup(ctx, good.ID, files[i].name); err != nil {
			t.Fatalf("create %s beside the failed one: %v", files[i].name, err)
		}
	}
}
