// Package catalogtest is the conformance suite every catalog.Store
// implementation must pass. Each implementation's test calls Run with a
// constructor for a fresh, empty store, and RunReopen with a way to open
// the same catalog again.
package catalogtest

import (
	"context"
	"errors"
	"fmt"
	"math"
	"path/filepath"
	"reflect"
	"runtime"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/strata-storage/strata/internal/api"
	"github.com/strata-storage/strata/internal/catalog"
)

// Run runs the suite. open must return a new, empty store; Run closes it.
func Run(t *testing.T, open func(t *testing.T) catalog.Store) {
	tests := []struct {
		name string
		fn   func(t *testing.T, s catalog.Store)
	}{
		{"Root", testRoot},
		{"Mkdir", testMkdir},
		{"ListPages", testListPages},
		{"CommitEmpty", testCommitEmpty},
		{"CommitData", testCommitData},
		{"Replace", testReplace},
		{"Concat", testConcat},
		{"Capacity", testCapacity},
		{"Rename", testRename},
		{"Remove", testRemove},
		{"CreateInRemovedDir", testCreateInRemovedDir},
		{"CreateRacingRemove", testCreateRacingRemove},
		{"Reclaim", testReclaim},
		{"IDsNeverReused", testIDsNeverReused},
		{"SetAttr", testSetAttr},
		{"Epoch", testEpoch},
		{"Concurrent", testConcurrent},
		{"Resolve", testResolve},
		{"TapeCopies", testTapeCopies},
		{"AddTapeCopies", testAddTapeCopies},
		{"Recalls", testRecalls},
		{"RecallObjects", testRecallObjects},
		{"Lost", testLost},
		{"OutOfService", testOutOfService},
		{"ClassesOfService", testCOS},
		{"Tokens", testTokens},
		{"Quotas", testQuotas},
		{"Symlinks", testSymlinks},
		{"Xattrs", testXattrs},
		{"DirTimes", testDirTimes},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			s := open(t)
			defer s.Close()
			defer func() {
				if r := recover(); r != nil {
					f, ok := r.(failure)
					if !ok {
						panic(r)
					}
					t.Fatalf("%s: unexpected error: %v", f.at, f.err)
				}
			}()
			tc.fn(t, s)
		})
	}
}

var ctx = context.Background()

// failure carries an unexpected error out of must, with the line of the
// must that met it; Run turns it into a test failure there. It keeps the
// cases readable: one call, one line. (must cannot take t and call
// t.Helper: Go passes a call's two results only as the whole argument list.)
type failure struct {
	err error
	at  string
}

func must[T any](v T, err error) T {
	if err != nil {
		_, file, line, _ := runtime.Caller(1)
		panic(failure{err, fmt.Sprintf("%s:%d", filepath.Base(file), line)})
	}
	return v
}

func wantErr(t *testing.T, err, want error) {
	t.Helper()
	if !errors.Is(err, want) {
		t.Fatalf("want %v, got %v", want, err)
	}
}

func dir(parent int64, name string) catalog.Inode {
	return catalog.Inode{Parent: parent, Name: name, Mode: 0o755, Mtime: 1, Ctime: 1, Atime: 1}
}

func file(parent int64, name string) catalog.Inode {
	return catalog.Inode{Parent: parent, Name: name, Mode: 0o644, UID: 7, GID: 8, Mtime: 2, Ctime: 2, Atime: 2, COS: "default"}
}

// A directory's mtime and ctime follow its entries: set by a create, a
// removal and a rename into or out of it (the entry's time, or now for a
// removal), and read back fresh by Lookup and Get.
func testDirTimes(t *testing.T, s catalog.Store) {
	a := must(s.Mkdir(ctx, dir(catalog.RootID, "a")))
	b := must(s.Mkdir(ctx, dir(catalog.RootID, "b")))
	times := func(id int64) (int64, int64) {
		t.Helper()
		in := must(s.Get(ctx, id))
		return in.Mtime, in.Ctime
	}
	lookedUp := func(name string) int64 {
		t.Helper()
		return must(s.Lookup(ctx, catalog.RootID, name)).Mtime
	}
	lookedUp("a") // a reader that has seen it
	f := file(a.ID, "f")
	f.Mtime, f.Ctime = 100, 100
	must(s.Commit(ctx, f, nil, false))
	if m, c := times(a.ID); m != 100 || c != 100 || lookedUp("a") != 100 {
		t.Fatalf("after a create: dir times %d %d, looked up %d, want 100", m, c, lookedUp("a"))
	}
	l := catalog.Inode{Parent: a.ID, Name: "l", Target: "f", Mode: 0o777, Mtime: 150, Ctime: 150}
	must(s.Symlink(ctx, l))
	must(s.Rename(ctx, a.ID, "f", b.ID, "g", false, 200))
	if ma, _ := times(a.ID); ma != 200 {
		t.Fatalf("source dir after a rename: mtime %d, want 200", ma)
	}
	if mb, cb := times(b.ID); mb != 200 || cb != 200 {
		t.Fatalf("target dir after a rename: %d %d, want 200", mb, cb)
	}
	must(s.Remove(ctx, b.ID, "g", false))
	if mb, _ := times(b.ID); mb <= 200 {
		t.Fatalf("dir after a removal: mtime %d, want now", mb)
	}
}

func addDevices(t *testing.T, s catalog.Store, ids ...string) {
	for _, id := range ids {
		if err := s.PutDevice(ctx, catalog.Device{ID: id, Pool: "disk", Mover: "m0", Capacity: 1 << 30}); err != nil {
			t.Fatal(err)
		}
	}
}

func used(t *testing.T, s catalog.Store) map[string]int64 {
	m := map[string]int64{}
	for _, d := range must(s.Devices(ctx)) {
		m[d.ID] = d.Used
	}
	return m
}

// pending creates a pending bitfile of size n striped over devs.
func pending(t *testing.T, s catalog.Store, n int64, devs ...string) catalog.Bitfile {
	b := catalog.Bitfile{Size: n, StripeWidth: len(devs), StripeUnit: 1 << 20, Epoch: 1, Lease: 100}
	for i, d := range devs {
		b.Segments = append(b.Segments, catalog.Segment{Stripe: i, Device: d, Length: n})
	}
	return must(s.CreatePending(ctx, b))
}

// finish sets final segment lengths as a client would after writing.
func finish(b catalog.Bitfile, per int64) *catalog.Bitfile {
	b.Size = per * int64(len(b.Segments))
	for i := range b.Segments {
		b.Segments[i].Length = per
		b.Segments[i].CRC32C = uint32(0xc0ffee00 + i)
	}
	b.Fixity = "sha256:00"
	return &b
}

func testRoot(t *testing.T, s catalog.Store) {
	r := must(s.Get(ctx, catalog.RootID))
	if r.Kind != catalog.KindDir || r.ID != catalog.RootID {
		t.Fatalf("root: %+v", r)
	}
	if l := must(s.List(ctx, catalog.RootID, "", 0)); len(l) != 0 {
		t.Fatalf("fresh root lists %d entries", len(l))
	}
	_, err := s.Get(ctx, 999)
	wantErr(t, err, api.ErrNotFound)
}

// Paging through a directory returns every entry once, in name order,
// whatever the page size; a cursor need not name an existing entry.
func testListPages(t *testing.T, s catalog.Store) {
	d := must(s.Mkdir(ctx, dir(catalog.RootID, "d")))
	other := must(s.Mkdir(ctx, dir(catalog.RootID, "other")))
	must(s.Commit(ctx, file(other.ID, "m"), nil, false)) // not d's
	var want []string
	for i := 0; i < 23; i++ {
		name := fmt.Sprintf("e%02d", (i*7)%23) // created out of order
		if i%5 == 0 {
			must(s.Mkdir(ctx, dir(d.ID, name)))
		} else {
			must(s.Commit(ctx, file(d.ID, name), nil, false))
		}
	}
	for i := 0; i < 23; i++ {
		want = append(want, fmt.Sprintf("e%02d", i))
	}
	for _, limit := range []int{0, 1, 2, 5, 22, 23, 24, 100} {
		var got []string
		after := ""
		for pages := 0; ; pages++ {
			page := must(s.List(ctx, d.ID, after, limit))
			for _, in := range page {
				if in.Parent != d.ID {
					t.Fatalf("limit %d: %q is not in the directory", limit, in.Name)
				}
				got = append(got, in.Name)
			}
			if limit > 0 && len(page) > limit {
				t.Fatalf("limit %d: a page of %d", limit, len(page))
			}
			if limit == 0 || len(page) < limit {
				break
			}
			after = page[len(page)-1].Name
			if pages > 100 {
				t.Fatalf("limit %d: paging does not end", limit)
			}
		}
		if fmt.Sprint(got) != fmt.Sprint(want) {
			t.Fatalf("limit %d: paged listing\n%v\nwant\n%v", limit, got, want)
		}
	}
	for _, c := range []struct {
		after string
		limit int
		want  string
	}{
		{"e10", 3, "[e11 e12 e13]"},
		{"e10x", 2, "[e11 e12]"}, // between two names
		{"d", 1, "[e00]"},
		{"e22", 0, "[]"},
		{"zzz", 5, "[]"},
	} {
		var names []string
		for _, in := range must(s.List(ctx, d.ID, c.after, c.limit)) {
			names = append(names, in.Name)
		}
		if got := fmt.Sprint(names); got != c.want && !(c.want == "[]" && names == nil) {
			t.Errorf("after %q limit %d: %s, want %s", c.after, c.limit, got, c.want)
		}
	}
}

func testMkdir(t *testing.T, s catalog.Store) {
	a := must(s.Mkdir(ctx, dir(catalog.RootID, "a")))
	if a.ID == 0 || a.Kind != catalog.KindDir {
		t.Fatalf("mkdir: %+v", a)
	}
	must(s.Mkdir(ctx, dir(a.ID, "z")))
	must(s.Mkdir(ctx, dir(a.ID, "b")))
	_, err := s.Mkdir(ctx, dir(a.ID, "b"))
	wantErr(t, err, api.ErrExist)
	_, err = s.Mkdir(ctx, dir(12345, "x"))
	wantErr(t, err, api.ErrNotFound)
	f := must(s.Commit(ctx, file(a.ID, "f"), nil, false))
	_, err = s.Mkdir(ctx, dir(f.ID, "x"))
	wantErr(t, err, api.ErrNotDir)
	l := must(s.List(ctx, a.ID, "", 0))
	if len(l) != 3 || l[0].Name != "b" || l[1].Name != "f" || l[2].Name != "z" {
		t.Fatalf("list not sorted by name: %+v", l)
	}
	got := must(s.Lookup(ctx, a.ID, "b"))
	if got.Parent != a.ID || got.Mode != 0o755 {
		t.Fatalf("lookup: %+v", got)
	}
	_, err = s.Lookup(ctx, a.ID, "nope")
	wantErr(t, err, api.ErrNotFound)
}

func testCommitEmpty(t *testing.T, s catalog.Store) {
	f := must(s.Commit(ctx, file(catalog.RootID, "empty"), nil, false))
	got := must(s.Get(ctx, f.ID))
	if got.Kind != catalog.KindFile || got.Size != 0 || got.Bitfile != 0 || got.UID != 7 || got.GID != 8 || got.COS != "default" {
		t.Fatalf("empty file: %+v", got)
	}
	_, err := s.Commit(ctx, file(catalog.RootID, "empty"), nil, false)
	wantErr(t, err, api.ErrExist)
	_, err = s.Commit(ctx, file(4242, "x"), nil, false)
	wantErr(t, err, api.ErrNotFound)
	_, err = s.Commit(ctx, file(f.ID, "x"), nil, false) // parent is a file
	wantErr(t, err, api.ErrNotDir)
	d := must(s.Mkdir(ctx, dir(catalog.RootID, "adir")))
	_, err = s.Commit(ctx, file(catalog.RootID, d.Name), nil, false)
	wantErr(t, err, api.ErrIsDir)
	_, err = s.Commit(ctx, file(catalog.RootID, d.Name), nil, true)
	wantErr(t, err, api.ErrIsDir)
}

func testCommitData(t *testing.T, s catalog.Store) {
	addDevices(t, s, "d0", "d1")
	b := pending(t, s, 1000, "d0", "d1")
	if b.ID == 0 || b.Segments[0].Object == "" || b.Segments[0].Object == b.Segments[1].Object {
		t.Fatalf("pending: %+v", b)
	}
	if u := used(t, s); u["d0"] != 1000 || u["d1"] != 1000 {
		t.Fatalf("reservation not accounted: %v", u)
	}
	// Pending data is invisible.
	_, err := s.Lookup(ctx, catalog.RootID, "data")
	wantErr(t, err, api.ErrNotFound)
	f := must(s.Commit(ctx, file(catalog.RootID, "data"), finish(b, 300), false))
	if f.Size != 600 || f.Bitfile != b.ID {
		t.Fatalf("commit: %+v", f)
	}
	if u := used(t, s); u["d0"] != 300 || u["d1"] != 300 {
		t.Fatalf("commit did not settle use: %v", u)
	}
	got := must(s.Bitfile(ctx, b.ID))
	if got.State != catalog.Committed || got.Size != 600 || len(got.Segments) != 2 || got.Segments[1].CRC32C != 0xc0ffee01 || got.Fixity != "sha256:00" {
		t.Fatalf("bitfile: %+v", got)
	}
	// A bitfile commits once.
	_, err = s.Commit(ctx, file(catalog.RootID, "again"), finish(b, 300), false)
	wantErr(t, err, api.ErrInvalid)
	if _, err := s.Lookup(ctx, catalog.RootID, "again"); !errors.Is(err, api.ErrNotFound) {
		t.Fatal("failed commit left an entry")
	}
	// Unknown device is refused and leaves nothing behind.
	_, err = s.CreatePending(ctx, catalog.Bitfile{Size: 1, Segments: []catalog.Segment{{Device: "nope", Length: 1}}})
	wantErr(t, err, api.ErrNotFound)
}

// testCapacity: the catalog is where concurrent creates meet, so it is
// the one to refuse a reservation past a device's capacity; a refused
// create records nothing, not even its other stripes' reservations.
func testCapacity(t *testing.T, s catalog.Store) {
	for _, d := range []catalog.Device{{ID: "small", Pool: "disk", Mover: "m0", Capacity: 1000}, {ID: "race", Pool: "disk", Mover: "m0", Capacity: 1000},
		{ID: "big", Pool: "disk", Mover: "m0", Capacity: 1 << 30}} {
		if err := s.PutDevice(ctx, d); err != nil {
			t.Fatal(err)
		}
	}
	pending(t, s, 600, "small")
	two := catalog.Bitfile{Size: 1000, StripeWidth: 2, StripeUnit: 1 << 20, Epoch: 1, Lease: 100,
		Segments: []catalog.Segment{{Stripe: 0, Device: "big", Length: 500}, {Stripe: 1, Device: "small", Length: 500}}}
	_, err := s.CreatePending(ctx, two)
	wantErr(t, err, api.ErrNoSpace)
	if u := used(t, s); u["small"] != 600 || u["big"] != 0 {
		t.Fatalf("a refused reservation left use behind: %v", u)
	}
	pending(t, s, 400, "small") // exactly full is allowed
	_, err = s.CreatePending(ctx, catalog.Bitfile{Size: 1, StripeWidth: 1, Segments: []catalog.Segment{{Device: "small", Length: 1}}})
	wantErr(t, err, api.ErrNoSpace)

	// Racing reservations: of 16 creates of 100 bytes on 1000, exactly 10 fit.
	var wg sync.WaitGroup
	var mu sync.Mutex
	var ok, full int
	for range 16 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			_, err := s.CreatePending(ctx, catalog.Bitfile{Size: 100, StripeWidth: 1, StripeUnit: 1 << 20, Epoch: 1, Lease: 100,
				Segments: []catalog.Segment{{Device: "race", Length: 100}}})
			mu.Lock()
			defer mu.Unlock()
			switch {
			case err == nil:
				ok++
			case errors.Is(err, api.ErrNoSpace):
				full++
			default:
				t.Error(err)
			}
		}()
	}
	wg.Wait()
	if ok != 10 || full != 6 || used(t, s)["race"] != 1000 {
		t.Fatalf("racing reservations: %d reserved, %d refused, use %v", ok, full, used(t, s))
	}
}

func testReplace(t *testing.T, s catalog.Store) {
	addDevices(t, s, "d0")
	b1 := pending(t, s, 10, "d0")
	f1 := must(s.Commit(ctx, file(catalog.RootID, "f"), finish(b1, 10), false))
	b2 := pending(t, s, 20, "d0")
	_, err := s.Commit(ctx, file(catalog.RootID, "f"), finish(b2, 20), false)
	wantErr(t, err, api.ErrExist)
	// The failed commit rolled back: b2 is still pending and can commit.
	f2 := must(s.Commit(ctx, file(catalog.RootID, "f"), finish(b2, 20), true))
	if f2.ID != f1.ID || f2.Size != 20 || f2.Bitfile != b2.ID {
		t.Fatalf("replace: %+v", f2)
	}
	// What a commit replaced, for quota usage: the old file's owner, size
	// and residency; nothing where nothing was replaced.
	if f1.Replaced != nil || f2.Replaced == nil || *f2.Replaced != (catalog.Replaced{UID: 7, GID: 8, Size: 10, OnDisk: true}) {
		t.Fatalf("replaced: first %+v, second %+v", f1.Replaced, f2.Replaced)
	}
	if e := must(s.Commit(ctx, file(catalog.RootID, "e"), nil, true)); e.Replaced != nil {
		t.Fatalf("a new name replaced %+v", e.Replaced)
	}
	if e := must(s.Commit(ctx, file(catalog.RootID, "e"), nil, true)); e.Replaced == nil || *e.Replaced != (catalog.Replaced{UID: 7, GID: 8}) {
		t.Fatalf("an empty file replaced: %+v", e.Replaced)
	}
	if got := must(s.Lookup(ctx, catalog.RootID, "f")); got.Replaced != nil {
		t.Fatalf("a read carries Replaced: %+v", got.Replaced)
	}
	if must(s.Bitfile(ctx, b1.ID)).State != catalog.Dead {
		t.Fatal("replaced bitfile not dead")
	}
	must(s.Mkdir(ctx, dir(catalog.RootID, "d")))
	_, err = s.Commit(ctx, file(catalog.RootID, "d"), nil, true)
	wantErr(t, err, api.ErrIsDir)
}

// testConcat: files of one stripe become the stripes of a new file,
// their segments moved without a byte copied; the sources are gone, a
// file replaced dies, device use is unchanged. Sources that are not
// single-stripe committed files of the unit's size change nothing.
func testConcat(t *testing.T, s catalog.Store) {
	addDevices(t, s, "d0", "d1")
	parts := must(s.Mkdir(ctx, dir(catalog.RootID, "parts")))
	var ids []int64
	var segs []catalog.Segment
	for i, n := range []int64{100, 100, 30} {
		b := pending(t, s, n, fmt.Sprint("d", i%2))
		f := must(s.Commit(ctx, file(parts.ID, fmt.Sprint(i)), finish(b, n), false))
		ids = append(ids, f.ID)
		segs = append(segs, must(s.Bitfile(ctx, b.ID)).Segments[0])
	}
	old := must(s.Commit(ctx, file(catalog.RootID, "obj"), finish(pending(t, s, 5, "d0"), 5), false))
	before := used(t, s)
	// Refused: a source of the wrong size (the unit), one listed twice,
	// a short one that is not the last; nothing changes.
	for _, bad := range []struct {
		ids  []int64
		unit int64
	}{{ids, 90}, {[]int64{ids[0], ids[0]}, 100}, {[]int64{ids[2], ids[0]}, 100}, {nil, 100}} {
		in := file(catalog.RootID, "obj")
		in.UID = 7
		_, err := s.Concat(ctx, in, bad.ids, bad.unit, "", true)
		wantErr(t, err, api.ErrInvalid)
	}
	if got := must(s.List(ctx, parts.ID, "", 0)); len(got) != 3 {
		t.Fatalf("a refused concat removed sources: %v", got)
	}
	in := file(catalog.RootID, "obj")
	in.UID, in.Xattrs = 7, map[string][]byte{"user.k": []byte("v")}
	f := must(s.Concat(ctx, in, ids, 100, "blake3:00", true))
	if f.ID != old.ID || f.Size != 230 || f.UID != 7 {
		t.Fatalf("concat: %+v", f)
	}
	if f.Replaced == nil || *f.Replaced != (catalog.Replaced{UID: 7, GID: 8, Size: 5, OnDisk: true}) {
		t.Fatalf("concat replaced %+v", f.Replaced)
	}
	b := must(s.Bitfile(ctx, f.Bitfile))
	if b.State != catalog.Committed || b.Size != 230 || b.StripeWidth != 3 || b.StripeUnit != 100 || !b.OnDisk || len(b.Segments) != 3 || b.Fixity != "blake3:00" {
		t.Fatalf("joined bitfile: %+v", b)
	}
	for i, sg := range b.Segments {
		want := segs[i]
		if sg.Stripe != i || sg.Device != want.Device || sg.Object != want.Object || sg.Length != want.Length || sg.CRC32C != want.CRC32C {
			t.Fatalf("stripe %d: %+v, was %+v", i, sg, want)
		}
	}
	if got := must(s.List(ctx, parts.ID, "", 0)); len(got) != 0 {
		t.Fatalf("sources left: %v", got)
	}
	if must(s.Bitfile(ctx, old.Bitfile)).State != catalog.Dead {
		t.Fatal("the replaced file's data is not dead")
	}
	if x := must(s.Xattrs(ctx, f.ID)); string(x["user.k"]) != "v" {
		t.Fatalf("xattrs %v", x)
	}
	if after := used(t, s); after["d0"] != before["d0"] || after["d1"] != before["d1"] {
		t.Fatalf("device use %v, before %v", after, before)
	}
	// Nothing of the joined file is garbage: reclaim leaves its objects.
	for _, g := range must(s.Garbage(ctx, 100)) {
		for _, sg := range b.Segments {
			if g.Object == sg.Object {
				t.Fatalf("a joined segment is garbage: %+v", g)
			}
		}
	}
	// Without replace the name must be free.
	b4 := pending(t, s, 100, "d1")
	p4 := must(s.Commit(ctx, file(parts.ID, "4"), finish(b4, 100), false))
	_, err := s.Concat(ctx, file(catalog.RootID, "obj"), []int64{p4.ID}, 100, "", false)
	wantErr(t, err, api.ErrExist)
}

func testRename(t *testing.T, s catalog.Store) {
	a := must(s.Mkdir(ctx, dir(catalog.RootID, "a")))
	b := must(s.Mkdir(ctx, dir(a.ID, "b")))
	f := must(s.Commit(ctx, file(a.ID, "f"), nil, false))
	must(s.Commit(ctx, file(catalog.RootID, "g"), nil, false))

	cases := []struct {
		name    string
		sp      int64
		sn      string
		dp      int64
		dn      string
		replace bool
		want    error
	}{
		{"missing source", a.ID, "nope", a.ID, "x", false, api.ErrNotFound},
		{"into itself", catalog.RootID, "a", b.ID, "a2", false, api.ErrInvalid},
		{"onto itself", catalog.RootID, "a", a.ID, "a", false, api.ErrInvalid},
		{"existing target", a.ID, "f", catalog.RootID, "g", false, api.ErrExist},
		{"file over dir", catalog.RootID, "g", a.ID, "b", true, api.ErrIsDir},
		{"dir over file", a.ID, "b", catalog.RootID, "g", true, api.ErrNotDir},
		{"target parent is file", a.ID, "b", f.ID, "x", false, api.ErrNotDir},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, err := s.Rename(ctx, c.sp, c.sn, c.dp, c.dn, c.replace, 5)
			wantErr(t, err, c.want)
		})
	}
	if _, err := s.Rename(ctx, a.ID, "f", b.ID, "f2", false, 5); err != nil {
		t.Fatal(err)
	}
	got := must(s.Lookup(ctx, b.ID, "f2"))
	if got.ID != f.ID || got.Ctime != 5 {
		t.Fatalf("renamed: %+v", got)
	}
	if moved := must(s.Rename(ctx, b.ID, "f2", catalog.RootID, "g", true, 6)); moved.Replaced == nil || *moved.Replaced != (catalog.Replaced{UID: 7, GID: 8}) {
		t.Fatalf("a rename over an empty file replaced %+v", moved.Replaced)
	}
	if got := must(s.Lookup(ctx, catalog.RootID, "g")); got.ID != f.ID || got.Replaced != nil {
		t.Fatalf("replace by rename: %+v", got)
	}
	if moved := must(s.Rename(ctx, catalog.RootID, "a", catalog.RootID, "a3", false, 7)); moved.Replaced != nil {
		t.Fatalf("a rename to a new name replaced %+v", moved.Replaced)
	}
	if got := must(s.Lookup(ctx, catalog.RootID, "a3")); got.ID != a.ID {
		t.Fatal("dir rename lost identity")
	}
}

func testRemove(t *testing.T, s catalog.Store) {
	addDevices(t, s, "d0")
	a := must(s.Mkdir(ctx, dir(catalog.RootID, "a")))
	b := must(s.Mkdir(ctx, dir(a.ID, "b")))
	bf := pending(t, s, 5, "d0")
	must(s.Commit(ctx, file(b.ID, "deep"), finish(bf, 5), false))
	bf2 := pending(t, s, 5, "d0")
	must(s.Commit(ctx, file(a.ID, "top"), finish(bf2, 5), false))

	_, err := s.Remove(ctx, catalog.RootID, "a", false)
	wantErr(t, err, api.ErrNotEmpty)
	_, err = s.Remove(ctx, catalog.RootID, "zz", false)
	wantErr(t, err, api.ErrNotFound)
	if _, err := s.Remove(ctx, a.ID, "top", false); err != nil {
		t.Fatal(err)
	}
	if must(s.Bitfile(ctx, bf2.ID)).State != catalog.Dead {
		t.Fatal("removed file's bitfile not dead")
	}
	if _, err := s.Remove(ctx, catalog.RootID, "a", true); err != nil {
		t.Fatal(err)
	}
	for _, id := range []int64{a.ID, b.ID} {
		_, err := s.Get(ctx, id)
		wantErr(t, err, api.ErrNotFound)
	}
	if must(s.Bitfile(ctx, bf.ID)).State != catalog.Dead {
		t.Fatal("recursive remove left data alive")
	}
	empty := must(s.Mkdir(ctx, dir(catalog.RootID, "e")))
	_ = empty
	if _, err := s.Remove(ctx, catalog.RootID, "e", false); err != nil {
		t.Fatalf("remove empty dir: %v", err)
	}
}

// testCreateInRemovedDir: a directory that was used, and so is known to a
// store that remembers directories, is gone for creates once removed,
// whichever way it went.
func testCreateInRemovedDir(t *testing.T, s catalog.Store) {
	cases := []struct {
		name string
		gone func(d catalog.Inode) error // removes d, a child of /top
	}{
		{"rmdir", func(d catalog.Inode) error {
			_, err := s.Remove(ctx, d.Parent, d.Name, false)
			return err
		}},
		{"rm -r", func(d catalog.Inode) error {
			_, err := s.Remove(ctx, d.Parent, d.Name, true)
			return err
		}},
		{"rm -r of its parent", func(d catalog.Inode) error {
			top := must(s.Get(ctx, d.Parent))
			_, err := s.Remove(ctx, top.Parent, top.Name, true)
			return err
		}},
		{"renamed over", func(d catalog.Inode) error {
			must(s.Mkdir(ctx, dir(d.Parent, "other")))
			_, err := s.Rename(ctx, d.Parent, "other", d.Parent, d.Name, true, 3)
			return err
		}},
	}
	for i, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			top := must(s.Mkdir(ctx, dir(catalog.RootID, fmt.Sprintf("top%d", i))))
			d := must(s.Mkdir(ctx, dir(top.ID, "d")))
			must(s.Commit(ctx, file(d.ID, "before"), nil, false))
			if c.name == "rmdir" || c.name == "renamed over" { // these need it empty
				must(s.Remove(ctx, d.ID, "before", false))
			}
			if err := c.gone(d); err != nil {
				t.Fatal(err)
			}
			_, err := s.Commit(ctx, file(d.ID, "after"), nil, false)
			wantErr(t, err, api.ErrNotFound)
			_, err = s.Commit(ctx, file(d.ID, "after"), nil, true)
			wantErr(t, err, api.ErrNotFound)
			_, err = s.Mkdir(ctx, dir(d.ID, "sub"))
			wantErr(t, err, api.ErrNotFound)
		})
	}
}

// testCreateRacingRemove: creates in a directory while it is removed
// recursively either land before the removal (and go with it) or fail;
// none may outlive the directory as an orphan.
func testCreateRacingRemove(t *testing.T, s catalog.Store) {
	for round := range 5 {
		d := must(s.Mkdir(ctx, dir(catalog.RootID, fmt.Sprintf("r%d", round))))
		const workers = 4
		var wg sync.WaitGroup
		made := make([][]int64, workers)
		errs := make(chan error, workers+1)
		for w := range workers {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for i := range 2000 { // bounded: a store that misses the removal must not hang the test
					f, err := s.Commit(ctx, file(d.ID, fmt.Sprintf("w%d-%d", w, i)), nil, false)
					if errors.Is(err, api.ErrNotFound) {
						return
					}
					if err != nil {
						errs <- err
						return
					}
					made[w] = append(made[w], f.ID)
				}
			}()
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				n, err := s.List(ctx, d.ID, "", 0)
				if err != nil {
					errs <- err
					return
				}
				if len(n) >= 20 {
					break
				}
			}
			if _, err := s.Remove(ctx, catalog.RootID, d.Name, true); err != nil {
				errs <- err
			}
		}()
		wg.Wait()
		close(errs)
		for err := range errs {
			t.Fatal(err)
		}
		for _, ids := range made {
			for _, id := range ids {
				if in, err := s.Get(ctx, id); !errors.Is(err, api.ErrNotFound) {
					t.Fatalf("round %d: file %d outlived its directory: %+v, %v", round, id, in, err)
				}
			}
		}
	}
}

func testReclaim(t *testing.T, s catalog.Store) {
	addDevices(t, s, "d0", "d1")
	old := pending(t, s, 100, "d0") // epoch 1, lease 100
	b := catalog.Bitfile{Size: 7, StripeWidth: 1, Epoch: 2, Lease: 1000, Segments: []catalog.Segment{{Device: "d1", Length: 7}}}
	cur := must(s.CreatePending(ctx, b))
	aborted := pending(t, s, 50, "d0")
	b.Lease = 10
	expired := must(s.CreatePending(ctx, b))
	if err := s.Abort(ctx, aborted.ID); err != nil {
		t.Fatal(err)
	}
	wantErr(t, s.Abort(ctx, aborted.ID), api.ErrNotFound)
	// A write aborted (or expired) cannot be committed: nothing appears
	// and the devices' use is as it was.
	before := used(t, s)
	_, err := s.Commit(ctx, file(catalog.RootID, "late"), finish(aborted, 50), false)
	wantErr(t, err, api.ErrInvalid)
	_, err = s.Lookup(ctx, catalog.RootID, "late")
	wantErr(t, err, api.ErrNotFound)
	if u := used(t, s); u["d0"] != before["d0"] || u["d1"] != before["d1"] {
		t.Fatalf("use after a refused commit: %v, before %v", u, before)
	}
	// Epoch 2 starts at time 50: old epoch and expired lease die; cur lives.
	n := must(s.ExpirePending(ctx, 2, 50))
	if n != 2 {
		t.Fatalf("expired %d bitfiles, want 2", n)
	}
	if must(s.Bitfile(ctx, cur.ID)).State != catalog.Pending {
		t.Fatal("live pending bitfile expired")
	}
	dead := must(s.DeadBitfiles(ctx, math.MaxInt64, 10))
	ids := map[int64]bool{}
	for _, d := range dead {
		ids[d.ID] = true
		if len(d.Segments) != 1 {
			t.Fatalf("dead bitfile without segments: %+v", d)
		}
	}
	if len(dead) != 3 || !ids[old.ID] || !ids[aborted.ID] || !ids[expired.ID] {
		t.Fatalf("dead: %v", ids)
	}
	if l := must(s.DeadBitfiles(ctx, math.MaxInt64, 1)); len(l) != 1 {
		t.Fatalf("limit ignored: %d", len(l))
	}
	for _, d := range dead {
		if err := s.Purge(ctx, d.ID); err != nil {
			t.Fatal(err)
		}
	}
	wantErr(t, s.Purge(ctx, cur.ID), api.ErrInvalid)
	if u := used(t, s); u["d0"] != 0 || u["d1"] != 7 {
		t.Fatalf("use after purge: %v", u)
	}
	_, err = s.Bitfile(ctx, old.ID)
	wantErr(t, err, api.ErrNotFound)

	// A committed file removed, replaced or renamed over dies when that
	// happens: reclaim can spare its readers for a while.
	start := time.Now().UnixNano()
	commit := func(name string) catalog.Bitfile {
		b := pending(t, s, 10, "d0")
		must(s.Commit(ctx, file(catalog.RootID, name), finish(b, 10), true))
		return b
	}
	removed, replaced, renamedOver := commit("r"), commit("p"), commit("o")
	commit("p")
	commit("src")
	must(s.Remove(ctx, catalog.RootID, "r", false))
	if moved := must(s.Rename(ctx, catalog.RootID, "src", catalog.RootID, "o", true, 9)); moved.Replaced == nil || *moved.Replaced != (catalog.Replaced{UID: 7, GID: 8, Size: 10, OnDisk: true}) {
		t.Fatalf("a rename over a file replaced %+v", moved.Replaced)
	}
	if l := must(s.DeadBitfiles(ctx, start, 10)); len(l) != 0 {
		t.Fatalf("bitfiles dead before they died: %+v", l)
	}
	ids = map[int64]bool{}
	for _, d := range must(s.DeadBitfiles(ctx, time.Now().UnixNano()+1, 10)) {
		ids[d.ID] = true
	}
	if len(ids) != 3 || !ids[removed.ID] || !ids[replaced.ID] || !ids[renamedOver.ID] {
		t.Fatalf("dead after remove, replace, rename: %v, want %d %d %d", ids, removed.ID, replaced.ID, renamedOver.ID)
	}
}

// Inode and bitfile ids are never issued twice, even once the highest is
// gone: object names and FUSE inode numbers derive from them. Operations
// that fail (the name taken, a device unknown) run among others so that
// groups of them commit together.
func testIDsNeverReused(t *testing.T, s catalog.Store) {
	addDevices(t, s, "d0")
	seen := map[int64]string{}
	issued := func(id int64, what string) {
		t.Helper()
		if prev, ok := seen[id]; ok {
			t.Errorf("id %d issued to %s and again to %s", id, prev, what)
		}
		seen[id] = what
	}
	// The highest inode and bitfile go, then new ones come.
	f := must(s.Commit(ctx, file(catalog.RootID, "f"), nil, false))
	issued(f.ID, "inode f")
	must(s.Remove(ctx, catalog.RootID, "f", false))
	d := must(s.Mkdir(ctx, dir(catalog.RootID, "d")))
	issued(d.ID, "inode d")
	if d.ID < f.ID {
		t.Fatalf("inode %d after removed %d", d.ID, f.ID)
	}
	b := pending(t, s, 10, "d0")
	issued(b.ID+1<<40, "bitfile")
	must(0, s.Abort(ctx, b.ID))
	must(0, s.Purge(ctx, b.ID))
	b2 := pending(t, s, 10, "d0")
	issued(b2.ID+1<<40, "bitfile 2")

	var mu sync.Mutex
	var wg sync.WaitGroup
	for w := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range 300 {
				name := fmt.Sprintf("w%d-%d", w, i)
				var ids []int64
				var what []string
				switch i % 4 {
				case 0:
					in, err := s.Commit(ctx, file(d.ID, name), nil, false)
					if err == nil {
						ids, what = append(ids, in.ID), append(what, "inode "+name)
						var got catalog.Inode
						if got, err = s.Get(ctx, in.ID); err == nil && got.Name != name {
							err = fmt.Errorf("inode %d is %q, not %q", in.ID, got.Name, name)
						}
					}
					if err == nil {
						_, err = s.Remove(ctx, d.ID, name, false)
					}
					if err != nil {
						t.Error(err)
						return
					}
				case 1:
					if _, err := s.Commit(ctx, file(catalog.RootID, "d"), nil, false); !errors.Is(err, api.ErrIsDir) {
						t.Errorf("create over a directory: %v", err)
						return
					}
				case 2:
					_, err := s.CreatePending(ctx, catalog.Bitfile{Size: 1, StripeWidth: 1, Epoch: 1, Lease: 100, Segments: []catalog.Segment{{Device: "nodev", Length: 1}}})
					if !errors.Is(err, api.ErrNotFound) {
						t.Errorf("pending on an unknown device: %v", err)
						return
					}
				case 3:
					bf, err := s.CreatePending(ctx, catalog.Bitfile{Size: 1, StripeWidth: 1, Epoch: 1, Lease: 100, Segments: []catalog.Segment{{Device: "d0", Length: 1}}})
					if err == nil {
						ids, what = append(ids, bf.ID+1<<40), append(what, "bitfile of "+name)
						var got catalog.Bitfile
						if got, err = s.Bitfile(ctx, bf.ID); err == nil && (got.State != catalog.Pending || len(got.Segments) != 1 || got.Segments[0].Object != bf.Segments[0].Object) {
							err = fmt.Errorf("bitfile %d is %+v, not %+v", bf.ID, got, bf)
						}
					}
					if err == nil {
						if err = s.Abort(ctx, bf.ID); err == nil {
							err = s.Purge(ctx, bf.ID)
						}
					}
					if err != nil {
						t.Error(err)
						return
					}
				}
				mu.Lock()
				for j, id := range ids {
					issued(id, what[j])
				}
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
}

func testSetAttr(t *testing.T, s catalog.Store) {
	f := must(s.Commit(ctx, file(catalog.RootID, "f"), nil, false))
	mode, uid, mt := uint32(0o600), uint32(99), int64(12345)
	got := must(s.SetAttr(ctx, f.ID, catalog.Attr{Mode: &mode, UID: &uid, Mtime: &mt, Ctime: 777}))
	if got.Mode != 0o600 || got.UID != 99 || got.GID != 8 || got.Mtime != 12345 || got.Ctime != 777 {
		t.Fatalf("setattr: %+v", got)
	}
	if again := must(s.Get(ctx, f.ID)); !reflect.DeepEqual(again, got) {
		t.Fatalf("setattr not stored: %+v vs %+v", again, got)
	}
	_, err := s.SetAttr(ctx, 9999, catalog.Attr{Mode: &mode})
	wantErr(t, err, api.ErrNotFound)
}

func testEpoch(t *testing.T, s catalog.Store) {
	e1 := must(s.NextEpoch(ctx))
	e2 := must(s.NextEpoch(ctx))
	if e2 != e1+1 {
		t.Fatalf("epochs %d then %d", e1, e2)
	}
}

func testConcurrent(t *testing.T, s catalog.Store) {
	const workers, each = 8, 150
	var wg sync.WaitGroup
	errs := make(chan error, workers)
	for w := 0; w < workers; w++ {
		wg.Add(1)
		go func(w int) {
			defer wg.Done()
			d, err := s.Mkdir(ctx, dir(catalog.RootID, fmt.Sprintf("w%d", w)))
			if err != nil {
				errs <- err
				return
			}
			for i := 0; i < each; i++ {
				if _, err := s.Commit(ctx, file(d.ID, fmt.Sprintf("f%d", i)), nil, false); err != nil {
					errs <- err
					return
				}
				// Collisions in the same group must fail alone.
				if _, err := s.Commit(ctx, file(d.ID, fmt.Sprintf("f%d", i)), nil, false); !errors.Is(err, api.ErrExist) {
					errs <- fmt.Errorf("duplicate commit: %v", err)
					return
				}
			}
		}(w)
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	for w := 0; w < workers; w++ {
		d := must(s.Lookup(ctx, catalog.RootID, fmt.Sprintf("w%d", w)))
		if n := len(must(s.List(ctx, d.ID, "", 0))); n != each {
			t.Fatalf("w%d has %d entries, want %d", w, n, each)
		}
	}
}

func testResolve(t *testing.T, s catalog.Store) {
	a := must(s.Mkdir(ctx, dir(catalog.RootID, "a")))
	must(s.Commit(ctx, file(a.ID, "f"), nil, false))
	comps := must(catalog.SplitPath("//a///f"))
	if got := must(catalog.Resolve(ctx, s, comps)); got.Name != "f" {
		t.Fatalf("resolve: %+v", got)
	}
	_, err := catalog.Resolve(ctx, s, []string{"a", "f", "g"})
	wantErr(t, err, api.ErrNotDir)
	_, err = catalog.Resolve(ctx, s, []string{"a", "x"})
	wantErr(t, err, api.ErrNotFound)
	for _, bad := range []string{"rel", "/a/../b", "/a/./b", "/x\x00y"} {
		if _, err := catalog.SplitPath(bad); !errors.Is(err, api.ErrInvalid) {
			t.Errorf("SplitPath(%q): %v", bad, err)
		}
	}
}

// The tape tier: a file gains tape copies, loses its disk copy (never the
// last), gets one back; purged objects are garbage until deleted.
// testAddTapeCopies records the copies of a tape file of many files at
// once: more than one chunk of the store's, a file removed meanwhile, a
// bitfile not committed, one named twice (across chunks), a striped copy.
func testAddTapeCopies(t *testing.T, s catalog.Store) {
	addDevices(t, s, "d0")
	d := must(s.Mkdir(ctx, dir(catalog.RootID, "d")))
	const n = 1100
	var ids []int64
	for i := 0; i < n; i++ {
		b := pending(t, s, 100, "d0")
		must(s.Commit(ctx, file(d.ID, fmt.Sprintf("f%04d", i)), finish(b, 100), false))
		ids = append(ids, b.ID)
	}
	must(s.Remove(ctx, d.ID, "f0007", false))
	open := pending(t, s, 100, "d0")

	tc := func(stripe int, off int64) catalog.TapeCopy {
		return catalog.TapeCopy{Stripe: stripe, Volume: "T00001", Seq: 1, Position: 4096, Offset: off, Length: 100, CRC32C: uint32(off)}
	}
	var copies []catalog.NewTapeCopy
	for i, id := range ids {
		copies = append(copies, catalog.NewTapeCopy{Bitfile: id, Stripes: []catalog.TapeCopy{tc(0, int64(i)*100)}})
	}
	copies[5].Stripes = append(copies[5].Stripes, tc(1, 1<<20))
	copies = append(copies, catalog.NewTapeCopy{Bitfile: open.ID, Stripes: []catalog.TapeCopy{tc(0, 0)}},
		catalog.NewTapeCopy{Bitfile: ids[0], Stripes: []catalog.TapeCopy{tc(0, 1<<30)}})

	_, err := s.AddTapeCopies(ctx, append(slices.Clone(copies), catalog.NewTapeCopy{Bitfile: ids[1]}))
	wantErr(t, err, api.ErrInvalid)
	if b := must(s.Bitfile(ctx, ids[1])); len(b.Tapes) != 0 {
		t.Fatalf("a refused call recorded %+v", b.Tapes)
	}

	added := must(s.AddTapeCopies(ctx, copies))
	if len(added) != len(copies) {
		t.Fatalf("%d results for %d copies", len(added), len(copies))
	}
	for i, ok := range added {
		if want := i != 7 && i != n; ok != want {
			t.Errorf("copy %d (bitfile %d): added %v, want %v", i, copies[i].Bitfile, ok, want)
		}
	}
	res := must(s.Residency(ctx, ids))
	for i, id := range ids {
		want := 1
		switch i {
		case 0:
			want = 2
		case 7:
			want = 0
		}
		if i != 7 && res[id].Tapes != want {
			t.Errorf("bitfile %d: %d tape copies counted, want %d", id, res[id].Tapes, want)
		}
	}
	b := must(s.Bitfile(ctx, ids[0]))
	if len(b.Tapes) != 2 || b.Tapes[0].Copy != 1 || b.Tapes[1].Copy != 2 || b.Tapes[1].Offset != 1<<30 {
		t.Fatalf("a bitfile named twice: %+v", b.Tapes)
	}
	if b := must(s.Bitfile(ctx, ids[5])); len(b.Tapes) != 2 || b.Tapes[0].Copy != 1 || b.Tapes[1].Copy != 1 || b.Tapes[1].Stripe != 1 {
		t.Fatalf("a striped copy: %+v", b.Tapes)
	}
	if b := must(s.Bitfile(ctx, ids[n-1])); len(b.Tapes) != 1 || b.Tapes[0] != (catalog.TapeCopy{Copy: 1, Volume: "T00001", Seq: 1, Position: 4096, Offset: (n - 1) * 100, Length: 100, CRC32C: (n - 1) * 100}) {
		t.Fatalf("the last copy: %+v", b.Tapes)
	}
	if b := must(s.Bitfile(ctx, open.ID)); len(b.Tapes) != 0 {
		t.Fatalf("a pending bitfile got %+v", b.Tapes)
	}
	if added := must(s.AddTapeCopies(ctx, nil)); len(added) != 0 {
		t.Fatalf("no copies: %v", added)
	}
}

func testTapeCopies(t *testing.T, s catalog.Store) {
	addDevices(t, s, "d0", "d1")
	d := must(s.Mkdir(ctx, dir(catalog.RootID, "d")))
	mk := func(name, cos string, mtime int64) (catalog.Inode, catalog.Bitfile) {
		b := pending(t, s, 100, "d0")
		in := file(d.ID, name)
		in.COS, in.Mtime, in.Atime = cos, mtime, mtime
		in = must(s.Commit(ctx, in, finish(b, 100), false))
		return in, b
	}
	_, old := mk("old", "tape", 10)
	_, young := mk("young", "tape", 1000)
	_, other := mk("other", "disk", 10)

	cands := must(s.MigrationCandidates(ctx, []string{"tape"}, 1, 500, 0, 10))
	if len(cands) != 1 || cands[0].Bitfile.ID != old.ID || cands[0].Inode.Name != "old" || len(cands[0].Bitfile.Segments) != 1 {
		t.Fatalf("migration candidates: %+v", cands)
	}
	if p := must(s.Path(ctx, cands[0].Inode.ID)); p != "/d/old" {
		t.Fatalf("path %q", p)
	}
	if c := must(s.MigrationCandidates(ctx, []string{"tape"}, 1, 5000, old.ID, 10)); len(c) != 1 || c[0].Bitfile.ID != young.ID {
		t.Fatalf("candidates after %d: %+v", old.ID, c)
	}
	_ = other

	// Never the last copy.
	wantErr(t, s.DropDiskCopy(ctx, old.ID), api.ErrInvalid)
	if len(must(s.PurgeCandidates(ctx, 0, 10))) != 0 {
		t.Fatal("a file without a tape copy is a purge candidate")
	}
	tc := catalog.TapeCopy{Volume: "T00001", Seq: 3, Position: 4096, Offset: 200, Length: 200, CRC32C: 0xabcdef}
	if err := s.AddTapeCopy(ctx, old.ID, tc); err != nil {
		t.Fatal(err)
	}
	if c := must(s.MigrationCandidates(ctx, []string{"tape"}, 1, 500, 0, 10)); len(c) != 0 {
		t.Fatalf("migrated file still a candidate: %+v", c)
	}
	if c := must(s.MigrationCandidates(ctx, []string{"tape"}, 2, 5000, 0, 10)); len(c) != 2 {
		t.Fatal("a class wanting two tape copies does not ask for the second")
	} else {
		// A page carries each candidate's own segments and tape copies.
		for _, cd := range c {
			b := must(s.Bitfile(ctx, cd.Bitfile.ID))
			if !reflect.DeepEqual(cd.Bitfile.Segments, b.Segments) || !reflect.DeepEqual(cd.Bitfile.Tapes, b.Tapes) {
				t.Fatalf("candidate %d: segments %+v tapes %+v; the bitfile has %+v and %+v", cd.Bitfile.ID, cd.Bitfile.Segments, cd.Bitfile.Tapes, b.Segments, b.Tapes)
			}
		}
		if len(c[0].Bitfile.Tapes) != 1 || len(c[1].Bitfile.Tapes) != 0 {
			t.Fatalf("tape copies of the candidates: %+v", c)
		}
	}
	b := must(s.Bitfile(ctx, old.ID))
	tc.Copy = 1
	if !b.OnDisk || len(b.Tapes) != 1 || b.Tapes[0] != tc {
		t.Fatalf("bitfile after migration: %+v", b)
	}
	if r := must(s.Residency(ctx, []int64{old.ID, young.ID, 999999})); len(r) != 2 || r[old.ID] != (catalog.Residency{OnDisk: true, Tapes: 1}) || r[young.ID] != (catalog.Residency{OnDisk: true}) {
		t.Fatalf("residency: %+v", r)
	}
	pc := must(s.PurgeCandidates(ctx, 0, 10))
	if len(pc) != 1 || pc[0].Bitfile.ID != old.ID {
		t.Fatalf("purge candidates: %+v", pc)
	}
	// A pinned disk copy is left to the policy only once the pin expires.
	if err := s.Pin(ctx, old.ID, 5000); err != nil {
		t.Fatal(err)
	}
	wantErr(t, s.Pin(ctx, 999999, 1), api.ErrNotFound)
	if pc := must(s.PurgeCandidates(ctx, 4999, 10)); len(pc) != 0 {
		t.Fatalf("a pinned file is a purge candidate: %+v", pc)
	}
	if pc := must(s.PurgeCandidates(ctx, 5000, 10)); len(pc) != 1 || pc[0].Bitfile.PinnedUntil != 5000 {
		t.Fatalf("purge candidates once the pin expired: %+v", pc)
	}
	if b := must(s.Bitfile(ctx, old.ID)); b.PinnedUntil != 5000 {
		t.Fatalf("pin not recorded: %+v", b)
	}
	if err := s.Pin(ctx, old.ID, 0); err != nil {
		t.Fatal(err)
	}

	// Purge: the disk copy becomes garbage, still counted until deleted.
	if err := s.DropDiskCopy(ctx, old.ID); err != nil {
		t.Fatal(err)
	}
	wantErr(t, s.DropDiskCopy(ctx, old.ID), api.ErrInvalid)
	b = must(s.Bitfile(ctx, old.ID))
	if b.OnDisk || len(b.Segments) != 0 || len(b.Tapes) != 1 {
		t.Fatalf("bitfile after purge: %+v", b)
	}
	g := must(s.Garbage(ctx, 10))
	if len(g) != 1 || g[0].Device != "d0" || g[0].Object != catalog.ObjectName(old.ID, 0, 0) || g[0].Length != 100 {
		t.Fatalf("garbage: %+v", g)
	}
	if u := used(t, s); u["d0"] != 300 {
		t.Fatalf("use before the garbage is deleted: %v", u)
	}
	if err := s.ForgetGarbage(ctx, g[0]); err != nil {
		t.Fatal(err)
	}
	if u := used(t, s); u["d0"] != 200 || len(must(s.Garbage(ctx, 10))) != 0 {
		t.Fatalf("use after the garbage is deleted: %v", u)
	}

	// Recall: a new disk copy, under a new copy number.
	seg := catalog.Segment{Stripe: 0, Device: "d1", Object: catalog.ObjectName(old.ID, 1, 0), Length: 100, CRC32C: 7}
	if err := s.RestoreDiskCopy(ctx, old.ID, 1, 1<<20, []catalog.Segment{seg}); err != nil {
		t.Fatal(err)
	}
	wantErr(t, s.RestoreDiskCopy(ctx, old.ID, 1, 1<<20, []catalog.Segment{seg}), api.ErrExist)
	b = must(s.Bitfile(ctx, old.ID))
	seg.Copy = 1
	if !b.OnDisk || b.DiskGen != 1 || len(b.Segments) != 1 || b.Segments[0] != seg {
		t.Fatalf("bitfile after recall: %+v", b)
	}
	if u := used(t, s); u["d1"] != 100 {
		t.Fatalf("use after recall: %v", u)
	}

	// Repack's part: the copies on a volume, and dropping one (never the
	// last); copy numbers are not reused.
	on := must(s.CopiesOn(ctx, "T00001", 0, 10))
	if len(on) != 1 || on[0].Bitfile.ID != old.ID || on[0].Inode.Name != "old" {
		t.Fatalf("copies on T00001: %+v", on)
	}
	if on := must(s.CopiesOn(ctx, "T00001", old.ID, 10)); len(on) != 0 {
		t.Fatalf("copies on T00001 after bitfile %d: %+v", old.ID, on)
	}
	if err := s.DropDiskCopy(ctx, old.ID); err != nil {
		t.Fatal(err)
	}
	wantErr(t, s.DropTapeCopy(ctx, old.ID, 1), api.ErrInvalid)
	if err := s.AddTapeCopy(ctx, old.ID, catalog.TapeCopy{Volume: "T00002", Seq: 1, Length: 100}); err != nil {
		t.Fatal(err)
	}
	if err := s.DropTapeCopy(ctx, old.ID, 1); err != nil {
		t.Fatal(err)
	}
	wantErr(t, s.DropTapeCopy(ctx, old.ID, 1), api.ErrNotFound)
	if err := s.AddTapeCopy(ctx, old.ID, catalog.TapeCopy{Volume: "T00003", Seq: 1, Length: 100}); err != nil {
		t.Fatal(err)
	}
	b = must(s.Bitfile(ctx, old.ID))
	if len(b.Tapes) != 2 || b.Tapes[0].Copy != 2 || b.Tapes[1].Copy != 3 || len(must(s.CopiesOn(ctx, "T00001", 0, 10))) != 0 {
		t.Fatalf("tape copies after drop and add: %+v", b.Tapes)
	}

	// A striped copy: several stripes under one copy number, counted and
	// dropped as one copy.
	if err := s.AddTapeCopy(ctx, old.ID, catalog.TapeCopy{Stripe: 0, Volume: "T00004", Seq: 1, Length: 60}, catalog.TapeCopy{Stripe: 1, Volume: "T00005", Seq: 1, Length: 40}); err != nil {
		t.Fatal(err)
	}
	b = must(s.Bitfile(ctx, old.ID))
	if len(b.Tapes) != 4 || b.Tapes[2].Copy != 4 || b.Tapes[3].Copy != 4 || b.Tapes[3].Stripe != 1 || b.Tapes[3].Volume != "T00005" {
		t.Fatalf("striped copy: %+v", b.Tapes)
	}
	if on := must(s.CopiesOn(ctx, "T00005", 0, 10)); len(on) != 1 {
		t.Fatalf("copies on T00005: %+v", on)
	}
	if err := s.DropTapeCopy(ctx, old.ID, 4); err != nil {
		t.Fatal(err)
	}
	if b = must(s.Bitfile(ctx, old.ID)); len(b.Tapes) != 2 {
		t.Fatalf("after dropping the striped copy: %+v", b.Tapes)
	}
	wantErr(t, s.AddTapeCopy(ctx, old.ID), api.ErrInvalid)

	// Removing the file: its tape copies go with the bitfile.
	must(s.Remove(ctx, d.ID, "old", false))
	wantErr(t, s.AddTapeCopy(ctx, old.ID, tc), api.ErrNotFound)
	for _, db := range must(s.DeadBitfiles(ctx, math.MaxInt64, 10)) {
		if err := s.Purge(ctx, db.ID); err != nil {
			t.Fatal(err)
		}
	}
	_, err := s.Bitfile(ctx, old.ID)
	wantErr(t, err, api.ErrNotFound)
}

func testRecalls(t *testing.T, s catalog.Store) {
	if had := must(s.QueueRecall(ctx, catalog.Recall{Bitfile: 9, Queued: 100})); had {
		t.Fatal("new recall reported as queued")
	}
	if had := must(s.QueueRecall(ctx, catalog.Recall{Bitfile: 9, Queued: 200, Priority: 5})); !had {
		t.Fatal("second recall of the same file not coalesced")
	}
	must(s.QueueRecall(ctx, catalog.Recall{Bitfile: 3, Queued: 300}))
	got := must(s.Recalls(ctx))
	want := []catalog.Recall{{Bitfile: 3, Queued: 300}, {Bitfile: 9, Queued: 100, Priority: 5}}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("recalls %+v, want %+v", got, want)
	}
	if err := s.DoneRecall(ctx, 9); err != nil {
		t.Fatal(err)
	}
	if got := must(s.Recalls(ctx)); len(got) != 1 || got[0].Bitfile != 3 {
		t.Fatalf("after done: %+v", got)
	}
}

// A lost file stays marked, with the first reason given, and is listed
// with its inode while it lives; removed and its bitfile purged, the mark
// goes with it.
func testLost(t *testing.T, s catalog.Store) {
	addDevices(t, s, "d0")
	var files []catalog.Inode
	for _, name := range []string{"a", "b"} {
		b := pending(t, s, 100, "d0")
		files = append(files, must(s.Commit(ctx, file(catalog.RootID, name), finish(b, 100), false)))
	}
	a, b := files[0], files[1]
	for _, l := range []catalog.Lost{{Bitfile: b.Bitfile, Why: "damaged", Since: 10}, {Bitfile: b.Bitfile, Why: "again", Since: 20}, {Bitfile: a.Bitfile, Why: "gone", Since: 30}} {
		if err := s.MarkLost(ctx, l); err != nil {
			t.Fatal(err)
		}
	}
	want := []catalog.Lost{{Bitfile: a.Bitfile, Inode: a.ID, Why: "gone", Since: 30}, {Bitfile: b.Bitfile, Inode: b.ID, Why: "damaged", Since: 10}}
	if got := must(s.LostFiles(ctx)); !reflect.DeepEqual(got, want) {
		t.Fatalf("lost %+v, want %+v", got, want)
	}
	must(s.Remove(ctx, catalog.RootID, "a", false))
	if got := must(s.LostFiles(ctx)); len(got) != 1 || got[0].Bitfile != b.Bitfile {
		t.Fatalf("lost after removing a: %+v", got)
	}
	if err := s.Purge(ctx, a.Bitfile); err != nil {
		t.Fatal(err)
	}
	// Marked again once purged (a late report): the mark names no file.
	if err := s.MarkLost(ctx, catalog.Lost{Bitfile: a.Bitfile, Why: "late", Since: 40}); err != nil {
		t.Fatal(err)
	}
	if got := must(s.LostFiles(ctx)); len(got) != 1 || got[0].Bitfile != b.Bitfile {
		t.Fatalf("lost after purging a: %+v", got)
	}
}

// Drives and cartridges out of service: a second mark replaces the first,
// and bringing one back (no why) forgets it; bringing back what is in
// service is no error.
func testOutOfService(t *testing.T, s catalog.Store) {
	for _, o := range []catalog.OutOfService{
		{Kind: "cartridge", ID: "V2", Why: "offline (admin)", Since: 1},
		{Kind: "drive", ID: "d0", Why: "offline (admin)", Since: 2},
		{Kind: "cartridge", ID: "V1", Why: "offline (admin)", Since: 3},
		{Kind: "cartridge", ID: "V2", Why: "sent off site", Since: 4},
		{Kind: "cartridge-writes", ID: "V3", Why: "read-only", Since: 5, Count: 2},
		{Kind: "drive", ID: "d0"},
		{Kind: "drive", ID: "never"},
	} {
		if err := s.SetOutOfService(ctx, o); err != nil {
			t.Fatal(err)
		}
	}
	want := []catalog.OutOfService{{Kind: "cartridge", ID: "V1", Why: "offline (admin)", Since: 3}, {Kind: "cartridge", ID: "V2", Why: "sent off site", Since: 4}, {Kind: "cartridge-writes", ID: "V3", Why: "read-only", Since: 5, Count: 2}}
	if got := must(s.OutOfService(ctx)); !reflect.DeepEqual(got, want) {
		t.Fatalf("out of service %+v, want %+v", got, want)
	}
}

// The objects a recall writes: the one RestoreDiskCopy takes is the file's;
// the others (attempts given up, a recall that failed, a core that died
// writing one) become garbage, of length 0 (their bytes never counted),
// when the recall is done or its epoch has passed.
func testRecallObjects(t *testing.T, s catalog.Store) {
	addDevices(t, s, "d0", "d1")
	d := must(s.Mkdir(ctx, dir(catalog.RootID, "d")))
	var bs []catalog.Bitfile
	for _, name := range []string{"a", "b", "c"} {
		b := pending(t, s, 100, "d0")
		must(s.Commit(ctx, file(d.ID, name), finish(b, 100), false))
		if err := s.AddTapeCopy(ctx, b.ID, catalog.TapeCopy{Volume: "T00001", Seq: 1, Length: 100}); err != nil {
			t.Fatal(err)
		}
		if err := s.DropDiskCopy(ctx, b.ID); err != nil {
			t.Fatal(err)
		}
		bs = append(bs, b)
	}
	for _, g := range must(s.Garbage(ctx, 10)) {
		if err := s.ForgetGarbage(ctx, g); err != nil {
			t.Fatal(err)
		}
	}
	add := func(b catalog.Bitfile, epoch int64, dev, obj string) {
		t.Helper()
		if err := s.AddRecallObject(ctx, catalog.RecallObject{Bitfile: b.ID, Epoch: epoch, Device: dev, Object: obj}); err != nil {
			t.Fatal(err)
		}
	}
	add(bs[0], 2, "d0", "a-given-up")
	add(bs[0], 2, "d1", "a-taken")
	add(bs[1], 1, "d0", "b-crashed")
	add(bs[2], 2, "d1", "c-writing")
	if err := s.AddRecallObject(ctx, catalog.RecallObject{Bitfile: bs[2].ID, Epoch: 2, Device: "d1", Object: "c-writing"}); !errors.Is(err, api.ErrExist) {
		t.Fatalf("an object recorded twice: %v, want ErrExist", err)
	}
	if err := s.RestoreDiskCopy(ctx, bs[0].ID, 1, 1<<20, []catalog.Segment{{Device: "d1", Object: "a-taken", Length: 100}}); err != nil {
		t.Fatal(err)
	}
	if err := s.DoneRecall(ctx, bs[0].ID); err != nil {
		t.Fatal(err)
	}
	garbage := func() []catalog.Garbage { return must(s.Garbage(ctx, 10)) }
	if g := garbage(); len(g) != 1 || g[0] != (catalog.Garbage{Device: "d0", Object: "a-given-up"}) {
		t.Fatalf("garbage after a recall done: %+v", g)
	}
	if _, err := s.ExpirePending(ctx, 2, 0); err != nil { // a core of epoch 2 starts
		t.Fatal(err)
	}
	if g := garbage(); len(g) != 2 || g[1] != (catalog.Garbage{Device: "d0", Object: "b-crashed"}) {
		t.Fatalf("garbage after epoch 2 began: %+v", g)
	}
	if u := used(t, s); u["d0"] != 0 || u["d1"] != 100 {
		t.Fatalf("use: %v", u)
	}
	for _, g := range garbage() {
		if err := s.ForgetGarbage(ctx, g); err != nil {
			t.Fatal(err)
		}
	}
	if u := used(t, s); u["d0"] != 0 || u["d1"] != 100 {
		t.Fatalf("use after the garbage is deleted: %v", u)
	}
	if err := s.DoneRecall(ctx, bs[2].ID); err != nil { // c's recall failed
		t.Fatal(err)
	}
	if g := garbage(); len(g) != 1 || g[0] != (catalog.Garbage{Device: "d1", Object: "c-writing"}) {
		t.Fatalf("garbage after a recall failed: %+v", g)
	}
}

func testCOS(t *testing.T, s catalog.Store) {
	if l := must(s.ClassesOfService(ctx)); len(l) != 0 {
		t.Fatalf("new catalog has classes %+v", l)
	}
	a := catalog.COS{Name: "b", Pool: "disk", StripeWidth: 2, StripeUnit: 1 << 20, TapeCopies: 1}
	z := catalog.COS{Name: "a", Pool: "fast", StripeWidth: 8, StripeUnit: 4 << 20, TapeOnly: true, TapeCopies: 2}
	for _, k := range []catalog.COS{a, z} {
		if err := s.PutCOS(ctx, k); err != nil {
			t.Fatal(err)
		}
	}
	a.TapeCopies = 3
	if err := s.PutCOS(ctx, a); err != nil {
		t.Fatal(err)
	}
	if got := must(s.ClassesOfService(ctx)); !reflect.DeepEqual(got, []catalog.COS{z, a}) {
		t.Fatalf("classes %+v", got)
	}
}

func testTokens(t *testing.T, s catalog.Store) {
	if got := must(s.Tokens(ctx)); len(got) != 0 {
		t.Fatalf("new catalog has tokens: %v", got)
	}
	a := catalog.Token{ID: "00000000000000a1", User: "alice", UID: 1001, GID: 100, Groups: []uint32{100, 4000000000}, Scopes: []string{"storage.read:/proj", "storage.create:/proj/in"},
		Hash: "h1", Created: 10, Expires: 1 << 62}
	b := catalog.Token{ID: "00000000000000b2", User: "bob", UID: 1002, GID: 1002, Kind: catalog.TokenS3, Secret: "s3cr3t/+=", Created: 20}
	must(0, s.PutToken(ctx, a))
	must(0, s.PutToken(ctx, b))
	wantErr(t, s.PutToken(ctx, b), api.ErrExist)
	if got := must(s.Token(ctx, a.ID)); !reflect.DeepEqual(got, a) {
		t.Fatalf("token a: got %+v, want %+v", got, a)
	}
	if got := must(s.Tokens(ctx)); len(got) != 2 || got[0].ID != a.ID || !reflect.DeepEqual(got[1], b) {
		t.Fatalf("tokens: %+v", got)
	}
	_, err := s.Token(ctx, "0000000000000000")
	wantErr(t, err, api.ErrNotFound)
	wantErr(t, s.RevokeToken(ctx, "0000000000000000", 5), api.ErrNotFound)
	must(0, s.RevokeToken(ctx, b.ID, 30))
	must(0, s.RevokeToken(ctx, b.ID, 40)) // the first time is kept
	if got := must(s.Token(ctx, b.ID)); got.Revoked != 30 {
		t.Fatalf("revoked at %d, want 30", got.Revoked)
	}
	if got := must(s.Token(ctx, a.ID)); got.Revoked != 0 {
		t.Fatalf("revoking b touched a: %+v", got)
	}
}

func testQuotas(t *testing.T, s catalog.Store) {
	if got := must(s.Quotas(ctx)); len(got) != 0 {
		t.Fatalf("new catalog has quotas: %v", got)
	}
	qs := []catalog.Quota{{Kind: catalog.QuotaGroup, ID: 8, Files: 10}, {Kind: catalog.QuotaUser, ID: 7, Bytes: 1 << 40, Files: 1e6, DiskBytes: 1 << 30}, {Kind: catalog.QuotaUser, ID: 4000000000, Bytes: 5}}
	for _, q := range qs {
		must(0, s.PutQuota(ctx, q))
	}
	must(0, s.PutQuota(ctx, catalog.Quota{Kind: catalog.QuotaGroup, ID: 8, Files: 20})) // replaces
	must(0, s.PutQuota(ctx, catalog.Quota{Kind: catalog.QuotaUser, ID: 4000000000}))    // no limits: gone
	want := []catalog.Quota{{Kind: catalog.QuotaGroup, ID: 8, Files: 20}, qs[1]}
	if got := must(s.Quotas(ctx)); !reflect.DeepEqual(got, want) {
		t.Fatalf("quotas %+v, want %+v", got, want)
	}

	// Usage: files by owner and group, their bytes, and the bytes of
	// those on disk; directories and pending writes hold nothing.
	addDevices(t, s, "d0")
	d := must(s.Mkdir(ctx, dir(catalog.RootID, "d")))
	mk := func(name string, uid, gid uint32, per int64) catalog.Inode {
		in := file(d.ID, name)
		in.UID, in.GID = uid, gid
		if per == 0 {
			return must(s.Commit(ctx, in, nil, false))
		}
		b := pending(t, s, per, "d0")
		return must(s.Commit(ctx, in, finish(b, per), false))
	}
	mk("a", 7, 8, 100)
	mk("b", 7, 9, 250)
	mk("empty", 7, 8, 0)
	off := mk("c", 11, 8, 1000)
	pending(t, s, 5000, "d0") // not yet a file
	ob := must(s.Bitfile(ctx, off.Bitfile))
	must(0, s.AddTapeCopy(ctx, ob.ID, catalog.TapeCopy{Volume: "V1", Seq: 1, Length: ob.Size}))
	must(0, s.DropDiskCopy(ctx, ob.ID))
	got := map[string]catalog.Usage{}
	for _, u := range must(s.Usage(ctx)) {
		got[fmt.Sprintf("%s:%d", u.Kind, u.ID)] = u
	}
	for k, w := range map[string]catalog.Usage{
		"user:7":  {Kind: catalog.QuotaUser, ID: 7, Files: 3, Bytes: 350, DiskBytes: 350},
		"user:11": {Kind: catalog.QuotaUser, ID: 11, Files: 1, Bytes: 1000, DiskBytes: 0},
		"group:8": {Kind: catalog.QuotaGroup, ID: 8, Files: 3, Bytes: 1100, DiskBytes: 100},
		"group:9": {Kind: catalog.QuotaGroup, ID: 9, Files: 1, Bytes: 250, DiskBytes: 250},
	} {
		if got[k] != w {
			t.Errorf("usage %s: %+v, want %+v", k, got[k], w)
		}
	}
	if len(got) != 4 {
		t.Errorf("usage: %+v", got)
	}
}

// testSymlinks: a symbolic link is an entry with a target the catalog
// keeps and never follows; it takes a name as a file does, and a file
// stored over it replaces it.
func testSymlinks(t *testing.T, s catalog.Store) {
	d := must(s.Mkdir(ctx, dir(catalog.RootID, "d")))
	l := file(d.ID, "l")
	l.Target = "../some/where else"
	got := must(s.Symlink(ctx, l))
	if got.Kind != catalog.KindSymlink || got.Target != l.Target || got.Size != int64(len(l.Target)) || got.ID == 0 {
		t.Fatalf("symlink %+v", got)
	}
	if in := must(s.Lookup(ctx, d.ID, "l")); in.Kind != catalog.KindSymlink || in.Target != l.Target {
		t.Fatalf("lookup %+v", in)
	}
	if in := must(s.Get(ctx, got.ID)); in.Target != l.Target {
		t.Fatalf("get %+v", in)
	}
	if ls := must(s.List(ctx, d.ID, "", 0)); len(ls) != 1 || ls[0].Target != l.Target {
		t.Fatalf("list %+v", ls)
	}
	for _, c := range []struct {
		name string
		in   catalog.Inode
		want error
	}{
		{"name taken", l, api.ErrExist},
		{"parent gone", file(9999, "x"), api.ErrNotFound},
		{"parent a symlink", file(got.ID, "x"), api.ErrNotDir},
	} {
		if _, err := s.Symlink(ctx, c.in); !errors.Is(err, c.want) {
			t.Errorf("%s: %v, want %v", c.name, err, c.want)
		}
	}
	if _, err := s.Mkdir(ctx, dir(d.ID, "l")); !errors.Is(err, api.ErrExist) {
		t.Errorf("mkdir over a symlink: %v", err)
	}
	// Renamed, it keeps its target; a file stored over it replaces it.
	must(s.Rename(ctx, d.ID, "l", catalog.RootID, "l2", false, 1))
	if in := must(s.Lookup(ctx, catalog.RootID, "l2")); in.Target != l.Target {
		t.Fatalf("renamed %+v", in)
	}
	f := must(s.Commit(ctx, file(catalog.RootID, "l2"), nil, true))
	if in := must(s.Lookup(ctx, catalog.RootID, "l2")); in.Kind != catalog.KindFile || in.Target != "" || in.ID != f.ID {
		t.Fatalf("file over symlink %+v", in)
	}
	must(s.Symlink(ctx, l))
	must(s.Remove(ctx, d.ID, "l", false))
	if _, err := s.Lookup(ctx, d.ID, "l"); !errors.Is(err, api.ErrNotFound) {
		t.Fatalf("removed symlink: %v", err)
	}
}

// testXattrs: attributes are set, replaced, listed and removed as
// setxattr(2) says; they survive a rewrite of their file, and those of
// removed entries go with DropOrphanXattrs.
func testXattrs(t *testing.T, s catalog.Store) {
	f := must(s.Commit(ctx, file(catalog.RootID, "f"), nil, false))
	if got := must(s.Xattrs(ctx, f.ID)); len(got) != 0 {
		t.Fatalf("new file has %v", got)
	}
	bin := []byte{0, 1, 2, 255}
	must(0, s.SetXattr(ctx, f.ID, "user.a", []byte("x"), catalog.XattrAny))
	must(0, s.SetXattr(ctx, f.ID, "user.b", bin, catalog.XattrCreate))
	must(0, s.SetXattr(ctx, f.ID, "user.a", []byte("y"), catalog.XattrReplace))
	must(0, s.SetXattr(ctx, f.ID, "user.empty", nil, catalog.XattrAny))
	for _, c := range []struct {
		name string
		err  error
		want error
	}{
		{"create existing", s.SetXattr(ctx, f.ID, "user.a", nil, catalog.XattrCreate), api.ErrExist},
		{"replace missing", s.SetXattr(ctx, f.ID, "user.zz", nil, catalog.XattrReplace), api.ErrNoAttr},
		{"no such inode", s.SetXattr(ctx, 99999, "user.a", nil, catalog.XattrAny), api.ErrNotFound},
		{"remove missing", s.RemoveXattr(ctx, f.ID, "user.zz"), api.ErrNoAttr},
	} {
		if !errors.Is(c.err, c.want) {
			t.Errorf("%s: %v, want %v", c.name, c.err, c.want)
		}
	}
	want := map[string][]byte{"user.a": []byte("y"), "user.b": bin, "user.empty": {}}
	if got := must(s.Xattrs(ctx, f.ID)); !reflect.DeepEqual(got, want) {
		t.Fatalf("xattrs %q, want %q", got, want)
	}
	must(s.Commit(ctx, file(catalog.RootID, "f"), nil, true)) // rewritten in place
	must(0, s.RemoveXattr(ctx, f.ID, "user.empty"))
	if got := must(s.Xattrs(ctx, f.ID)); len(got) != 2 {
		t.Fatalf("after rewrite and remove: %q", got)
	}
	if n := must(s.DropOrphanXattrs(ctx)); n != 0 {
		t.Fatalf("dropped %d of a live file", n)
	}
	// A commit that brings attributes replaces them all, with the data
	// (an S3 object's metadata); a new file takes them too.
	g := file(catalog.RootID, "f")
	g.Xattrs = map[string][]byte{"user.s3.etag": []byte("e1")}
	must(s.Commit(ctx, g, nil, true))
	if got := must(s.Xattrs(ctx, f.ID)); !reflect.DeepEqual(got, g.Xattrs) {
		t.Fatalf("after a commit with attributes: %q", got)
	}
	h := file(catalog.RootID, "h")
	h.Xattrs = map[string][]byte{"user.x": {}}
	h = must(s.Commit(ctx, h, nil, false))
	if got := must(s.Xattrs(ctx, h.ID)); len(got) != 1 || h.Xattrs != nil {
		t.Fatalf("new file's attributes: %q (returned %q)", got, h.Xattrs)
	}
	must(s.Remove(ctx, catalog.RootID, "h", false))
	must(s.DropOrphanXattrs(ctx))
	must(s.Remove(ctx, catalog.RootID, "f", false))
	if n := must(s.DropOrphanXattrs(ctx)); n != 1 {
		t.Fatalf("dropped %d of a removed file, want 1", n)
	}
}
