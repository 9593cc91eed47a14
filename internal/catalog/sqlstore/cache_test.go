package sqlstore

import (
	"fmt"
	"reflect"
	"testing"
	"unsafe"

	"github.com/strata-storage/strata/internal/catalog"
)

// The cache stays at its cap however many entries pass through it, losing
// a few at a time (the newest always stays), and counts its hits and
// misses.
func TestInodeCacheCap(t *testing.T) {
	c := newInodeCache()
	const capacity = 64 * 10
	c.setSize(capacity)
	for i := range 20000 {
		in := catalog.Inode{ID: int64(i + 2), Parent: 1, Name: fmt.Sprintf("f%d", i), Kind: catalog.KindFile}
		c.set(in)
		if got, _, ok := c.get(1, in.Name); !ok || got.ID != in.ID {
			t.Fatalf("entry %d not found right after it was set", i)
		}
		if n, _, _ := c.stats(); n > capacity {
			t.Fatalf("%d entries after %d sets, cap %d", n, i+1, capacity)
		}
	}
	n, hits, misses := c.stats()
	if n < capacity*9/10 {
		t.Fatalf("%d entries at the end: evicting more than needed (cap %d)", n, capacity)
	}
	if hits != 20000 || misses != 0 {
		t.Fatalf("hits %d, misses %d", hits, misses)
	}
	held := 0
	for i := range 20000 {
		if _, _, ok := c.get(1, fmt.Sprintf("f%d", i)); ok {
			held++
		}
	}
	if _, h, m := c.stats(); int(h) != 20000+held || int(m) != 20000-held || held != int(n) {
		t.Fatalf("after a scan: hits %d, misses %d, %d held of %d", h, m, held, n)
	}
	// Shrinking the cap takes effect as entries arrive.
	c.setSize(64)
	for i := range 5000 {
		c.set(catalog.Inode{ID: int64(100000 + i), Parent: 2, Name: fmt.Sprint(i), Kind: catalog.KindFile})
	}
	if n, _, _ := c.stats(); n > 64 {
		t.Fatalf("%d entries after shrinking to 64", n)
	}
}

// What the cache gives back is the entry it was given, every field a read
// has (a new field of catalog.Inode fails here until the cache keeps it),
// and its values stay small enough for Go's map to hold in place.
func TestInodeCacheKeepsEveryField(t *testing.T) {
	if n := unsafe.Sizeof(cached{}); n > 128 {
		t.Fatalf("a cached entry is %d bytes: over 128, each is a heap object of its own", n)
	}
	var in catalog.Inode
	v := reflect.ValueOf(&in).Elem()
	for i := range v.NumField() {
		f := v.Field(i)
		switch name := v.Type().Field(i).Name; {
		case name == "Xattrs" || name == "Replaced": // never part of a read
		case f.Kind() == reflect.String:
			f.SetString("s" + name)
		case f.CanInt():
			f.SetInt(int64(i + 1))
		case f.CanUint():
			f.SetUint(uint64(i + 100))
		default:
			t.Fatalf("catalog.Inode.%s: a field of kind %s this test does not fill", name, f.Kind())
		}
	}
	c := newInodeCache()
	c.set(in)
	got, _, ok := c.get(in.Parent, in.Name)
	if !ok || !reflect.DeepEqual(got, in) {
		t.Fatalf("cached %+v, got back %+v", in, got)
	}
}
