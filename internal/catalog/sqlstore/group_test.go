package sqlstore_test

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"path/filepath"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/strata-storage/strata/internal/api"
	"github.com/strata-storage/strata/internal/catalog"
	"github.com/strata-storage/strata/internal/catalog/sqlite"
	"github.com/strata-storage/strata/internal/catalog/sqlstore"
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

// The directory times of a group's creates and removes are written once,
// at the end of the group, yet the directory ends as if each had been
// written in turn: an operation that sets them (utimes) between them sees
// and leaves them in order.
func TestDirectoryTimesInAGroupFollowItsOrder(t *testing.T) {
	s, err := sqlite.Open(filepath.Join(t.TempDir(), "c.db"), sqlite.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	ctx := context.Background()
	d, err := s.Mkdir(ctx, catalog.Inode{Parent: catalog.RootID, Name: "d", Mode: 0o755, Mtime: 1, Ctime: 1, Atime: 1})
	if err != nil {
		t.Fatal(err)
	}
	create := func(name string, when int64) func() error {
		return func() error {
			_, err := s.Commit(ctx, catalog.Inode{Parent: d.ID, Name: name, Mode: 0o644, Mtime: when, Ctime: when, Atime: when}, nil, false)
			return err
		}
	}
	utimes := func(mtime, ctime int64) func() error {
		return func() error {
			in, err := s.SetAttr(ctx, d.ID, catalog.Attr{Mtime: &mtime, Ctime: ctime})
			if err == nil && (in.Mtime != mtime || in.Ctime != ctime) {
				err = fmt.Errorf("utimes answered mtime %d, ctime %d", in.Mtime, in.Ctime)
			}
			return err
		}
	}
	for _, tc := range []struct {
		name         string
		ops          []func() error
		mtime, ctime int64
	}{
		{"creates", []func() error{create("a", 100), create("b", 200), create("c", 150)}, 150, 150},
		{"utimes last", []func() error{create("e", 300), utimes(50, 310)}, 50, 310},
		{"utimes between", []func() error{create("f", 400), utimes(60, 410), create("g", 420)}, 420, 420},
		{"a failed create", []func() error{create("h", 500), create("h", 510)}, 500, 500},
	} {
		t.Run(tc.name, func(t *testing.T) {
			errs := inOneGroup(s, tc.ops)
			for i, err := range errs {
				if err != nil && !(tc.name == "a failed create" && i == 1) {
					t.Errorf("op %d: %v", i, err)
				}
			}
			got, err := s.Get(ctx, d.ID)
			if err != nil {
				t.Fatal(err)
			}
			if got.Mtime != tc.mtime || got.Ctime != tc.ctime {
				t.Errorf("directory mtime %d, ctime %d; want %d, %d", got.Mtime, got.Ctime, tc.mtime, tc.ctime)
			}
		})
	}
}

// The space a group's reservations take is counted as they come, though
// written once a device at the end of the group: what does not fit is
// refused, a change of the device's row between them (a new capacity)
// is seen by those after it, and a commit shorter than its reservation
// gives the rest back.
func TestDeviceSpaceInAGroup(t *testing.T) {
	s, err := sqlite.Open(filepath.Join(t.TempDir(), "c.db"), sqlite.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	ctx := context.Background()
	dev := func(capacity int64) func() error {
		return func() error {
			return s.PutDevice(ctx, catalog.Device{ID: "d0", Pool: "disk", Mover: "m0", Capacity: capacity})
		}
	}
	var shortened catalog.Bitfile
	reserve := func(n int64, keep bool) func() error {
		return func() error {
			b, err := s.CreatePending(ctx, catalog.Bitfile{Size: n, StripeWidth: 1, StripeUnit: 1 << 20, Epoch: 1, Lease: 1 << 62,
				Segments: []catalog.Segment{{Device: "d0", Length: n}}})
			if keep {
				shortened = b
			}
			return err
		}
	}
	commitShort := func() error {
		b := shortened
		b.Size, b.Segments[0].Length = 4, 4
		_, err := s.Commit(ctx, catalog.Inode{Parent: catalog.RootID, Name: "short", Mode: 0o644}, &b, false)
		return err
	}
	if err := dev(100)(); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name   string
		ops    []func() error
		noRoom []int // the ops refused for space
		used   int64
	}{
		{"what fits", []func() error{reserve(30, false), reserve(30, false), reserve(30, false), reserve(30, false), reserve(10, false)}, []int{3}, 100},
		{"a new capacity between", []func() error{dev(200), reserve(60, false), dev(170), reserve(20, false), reserve(10, true)}, []int{3}, 170},
		{"a commit shorter than reserved", []func() error{commitShort, reserve(7, false), reserve(6, false)}, []int{1}, 170},
	} {
		t.Run(tc.name, func(t *testing.T) {
			errs := inOneGroup(s, tc.ops)
			for i, err := range errs {
				if want := slices.Contains(tc.noRoom, i); want != errors.Is(err, api.ErrNoSpace) || !want && err != nil {
					t.Errorf("op %d: %v (refused for space: want %v)", i, err, want)
				}
			}
			devs, err := s.Devices(ctx)
			if err != nil {
				t.Fatal(err)
			}
			if len(devs) != 1 || devs[0].Used != tc.used {
				t.Errorf("devices %+v, want d0 with %d used", devs, tc.used)
			}
		})
	}
}

// Writes announced together (a batch's calls, Expecting) share a group
// though they reach the writer one after another; one whose caller
// releases it without writing does not hold the others.
func TestAnnouncedWritesShareAGroup(t *testing.T) {
	defer sqlstore.SetLinger(time.Minute)() // long: only the writes' arrival ends the wait
	s, err := sqlite.Open(filepath.Join(t.TempDir(), "c.db"), sqlite.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	ctx := context.Background()
	for _, tc := range []struct {
		name   string
		writes int // of the announced, the rest released unwritten
		of     int
	}{{"all write", 4, 4}, {"one does not", 3, 4}} {
		t.Run(tc.name, func(t *testing.T) {
			ctxs, releases := make([]context.Context, tc.of), make([]func(), tc.of)
			for i := range tc.of {
				ctxs[i], releases[i] = s.Expecting(ctx)
			}
			g0, n0 := s.Groups()
			var wg sync.WaitGroup
			for i := range tc.of {
				wg.Go(func() {
					defer releases[i]()
					time.Sleep(time.Duration(i) * 20 * time.Millisecond) // one after another
					if i < tc.writes {
						if _, err := s.Commit(ctxs[i], catalog.Inode{Parent: catalog.RootID, Name: fmt.Sprintf("%s-%d", tc.name, i), Mode: 0o644}, nil, false); err != nil {
							t.Error(err)
						}
					}
				})
			}
			wg.Wait()
			if g1, n1 := s.Groups(); g1-g0 != 1 || n1-n0 != int64(tc.writes) {
				t.Errorf("%d writes in %d groups, want %d in one", n1-n0, g1-g0, tc.writes)
			}
		})
	}
}

// inOneGroup runs ops in one group of the writer, in this order, and
// returns their errors.
func inOneGroup(s *sqlstore.Store, ops []func() error) []error {
	waiting, release := s.Hold()
	errs := make([]error, len(ops))
	var wg sync.WaitGroup
	for i, op := range ops {
		wg.Go(func() { errs[i] = op() })
		waiting(i + 1)
	}
	release()
	wg.Wait()
	return errs
}
