package core

import (
	"context"
	"errors"
	"fmt"
	"sync"

	"github.com/strata-storage/strata/internal/api"
	"github.com/strata-storage/strata/internal/catalog"
)

// dcache caches directory entries that name directories, so resolving a
// deep path costs one catalog lookup (the last component) instead of one per
// component. The core is the only writer of the namespace, so it invalidates
// exactly: a rename or removal of a directory clears the cache. A generation
// number keeps a lookup that raced with such a change from re-inserting a
// stale entry.
type dcache struct {
	mu  sync.RWMutex
	gen uint64
	m   map[dkey]int64
}

type dkey struct {
	parent int64
	name   string
}

const dcacheMax = 1 << 18

func (d *dcache) init() { d.m = map[dkey]int64{} }

func (d *dcache) get(parent int64, name string) (int64, uint64, bool) {
	d.mu.RLock()
	defer d.mu.RUnlock()
	id, ok := d.m[dkey{parent, name}]
	return id, d.gen, ok
}

func (d *dcache) put(parent int64, name string, id int64, gen uint64) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if gen != d.gen {
		return
	}
	if len(d.m) >= dcacheMax {
		d.m = map[dkey]int64{}
	}
	d.m[dkey{parent, name}] = id
}

func (d *dcache) invalidate() {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.gen++
	d.m = map[dkey]int64{}
}

// resolveDir returns the inode ID of the directory named by comps.
func (c *Core) resolveDir(ctx context.Context, comps []string) (int64, error) {
	id := catalog.RootID
	for i, name := range comps {
		if child, _, ok := c.dc.get(id, name); ok {
			id = child
			continue
		}
		_, gen, _ := c.dc.get(0, "")
		in, err := c.store.Lookup(ctx, id, name)
		if err != nil {
			return 0, notFoundAt(err, comps[:i+1])
		}
		if in.Kind != catalog.KindDir {
			return 0, api.Errorf(api.ErrNotDir, "%s", joinPath(comps[:i+1]))
		}
		c.dc.put(id, name, in.ID, gen)
		id = in.ID
	}
	return id, nil
}

// resolve returns the inode named by comps.
func (c *Core) resolve(ctx context.Context, comps []string) (catalog.Inode, error) {
	if len(comps) == 0 {
		return c.store.Get(ctx, catalog.RootID)
	}
	parent, err := c.resolveDir(ctx, comps[:len(comps)-1])
	if err != nil {
		return catalog.Inode{}, err
	}
	in, err := c.store.Lookup(ctx, parent, comps[len(comps)-1])
	if err != nil {
		return in, notFoundAt(err, comps)
	}
	return in, nil
}

// notFoundAt names the path in a lookup failure.
func notFoundAt(err error, comps []string) error {
	if errors.Is(err, api.ErrNotFound) {
		return api.Errorf(api.ErrNotFound, "%s", joinPath(comps))
	}
	return fmt.Errorf("%s: %w", joinPath(comps), err)
}
