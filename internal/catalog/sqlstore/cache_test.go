package sqlstore

import (
	"fmt"
	"testing"

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
