package core

import (
	"context"
	"errors"
	"fmt"
	"sync"

	"github.com/strata-storage/strata/internal/api"
	"github.com/strata-storage/strata/internal/auth"
	"github.com/strata-storage/strata/internal/catalog"
)

// dcache caches directory entries that name directories, so resolving a
// deep path costs one catalog lookup (the last component) instead of one per
// component. Each entry also carries the class of service the directory
// hands down to new files (its own, else its nearest ancestor's), so a
// create does not walk back up the tree through the catalog either, and
// the directory's mode and owner, so the search permission every
// directory on a path needs is checked without a catalog read. The
// core is the only writer of the namespace, so it invalidates exactly: a
// rename or removal of a directory, or a change of a directory's class of
// service, mode or owner, clears the cache. A generation number keeps a lookup that raced
// with such a change from re-inserting a stale entry.
type dcache struct {
	mu  sync.RWMutex
	gen uint64
	m   map[dkey]dentry
	// the root directory, once read
	rootEnt dentry
	rootOK  bool
}

type dentry struct {
	id       int64
	cos      string // class of service inherited by files created below
	mode     uint32
	uid, gid uint32
}

type dkey struct {
	parent int64
	name   string
}

const dcacheMax = 1 << 18

func (d *dcache) init() { d.m = map[dkey]dentry{} }

func (d *dcache) get(parent int64, name string) (dentry, uint64, bool) {
	d.mu.RLock()
	defer d.mu.RUnlock()
	e, ok := d.m[dkey{parent, name}]
	return e, d.gen, ok
}

func (d *dcache) put(parent int64, name string, e dentry, gen uint64) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if gen != d.gen {
		return
	}
	if len(d.m) >= dcacheMax {
		d.m = map[dkey]dentry{}
	}
	d.m[dkey{parent, name}] = e
}

func (d *dcache) root() (dentry, uint64, bool) {
	d.mu.RLock()
	defer d.mu.RUnlock()
	return d.rootEnt, d.gen, d.rootOK
}

func (d *dcache) putRoot(e dentry, gen uint64) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if gen == d.gen {
		d.rootEnt, d.rootOK = e, true
	}
}

func (d *dcache) invalidate() {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.gen++
	d.m = map[dkey]dentry{}
	d.rootEnt, d.rootOK = dentry{}, false
}

// resolveDir returns the inode ID of the directory named by comps, which
// who must be allowed to search (see resolveDirCOS).
func (c *Core) resolveDir(ctx context.Context, who *auth.Identity, comps []string) (int64, error) {
	e, err := c.resolveDirCOS(ctx, who, comps)
	return e.id, err
}

// resolveDirCOS returns the directory named by comps with the class of
// service it hands down to new files. who must have search permission on
// every directory from the root to the named one, inclusive (to look
// anything up in it); who nil is the server's own work, which may go
// anywhere.
func (c *Core) resolveDirCOS(ctx context.Context, who *auth.Identity, comps []string) (dentry, error) {
	cur, gen, ok := c.dc.root()
	if !ok {
		root, err := c.store.Get(ctx, catalog.RootID)
		if err != nil {
			return dentry{}, fmt.Errorf("/: %w", err)
		}
		cur = dentry{id: catalog.RootID, cos: root.COS, mode: root.Mode, uid: root.UID, gid: root.GID}
		c.dc.putRoot(cur, gen)
	}
	for i, name := range comps {
		if err := searchable(who, cur, comps[:i]); err != nil {
			return dentry{}, err
		}
		child, gen, ok := c.dc.get(cur.id, name)
		if ok {
			cur = child
			continue
		}
		in, err := c.store.Lookup(ctx, cur.id, name)
		if err != nil {
			return dentry{}, notFoundAt(err, comps[:i+1])
		}
		if in.Kind != catalog.KindDir {
			return dentry{}, api.Errorf(api.ErrNotDir, "%s", joinPath(comps[:i+1]))
		}
		child = dentry{id: in.ID, cos: cur.cos, mode: in.Mode, uid: in.UID, gid: in.GID}
		if in.COS != "" {
			child.cos = in.COS
		}
		c.dc.put(cur.id, name, child, gen)
		cur = child
	}
	return cur, searchable(who, cur, comps)
}

// resolve returns the inode named by comps.
func (c *Core) resolve(ctx context.Context, who *auth.Identity, comps []string) (catalog.Inode, error) {
	if len(comps) == 0 {
		return c.store.Get(ctx, catalog.RootID)
	}
	parent, err := c.resolveDir(ctx, who, comps[:len(comps)-1])
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
