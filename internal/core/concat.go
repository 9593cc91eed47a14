package core

import (
	"context"
	"fmt"

	"github.com/strata-storage/strata/internal/api"
	"github.com/strata-storage/strata/internal/auth"
	"github.com/strata-storage/strata/internal/catalog"
)

// maxConcat bounds the files one Concat joins: S3's 10,000 parts.
const maxConcat = 10000

// Concat makes r.Path the files r.Sources joined in order, and removes
// them, without a byte read or written (catalog.Store.Concat): S3's
// CompleteMultipartUpload of parts stored one stripe each. Each source
// needs what removing it needs (write and search on its directory, the
// sticky rule there) and read permission; r.Path what creating (with
// Overwrite, replacing) a file there needs.
func (c *Core) Concat(ctx context.Context, r api.ConcatRequest) (api.FileInfo, error) {
	who, dirComps, name, err := fileRequest(ctx, "concat", r.Path, r.Mode, r.Xattrs)
	if err != nil {
		return api.FileInfo{}, err
	}
	if len(r.Sources) == 0 || len(r.Sources) > maxConcat {
		return api.FileInfo{}, api.Errorf(api.ErrInvalid, "concat %s: %d sources (1 to %d)", r.Path, len(r.Sources), maxConcat)
	}
	ids := make([]int64, len(r.Sources))
	srcs := make([]catalog.Inode, len(r.Sources))
	pools := map[string]bool{} // of the sources' classes
	var unit, size int64
	for i, p := range r.Sources {
		dir, dirPath, path, in, err := c.entryIn(ctx, who, p, auth.ScopeModify, func(dentry) bool { return true })
		if err == nil {
			err = scoped(who, auth.ScopeRead, path)
		}
		if err == nil {
			err = sticky(who, dir, dirPath, in, path)
		}
		if err == nil {
			err = may(who, in, path, path, auth.Read)
		}
		if err != nil {
			return api.FileInfo{}, fmt.Errorf("concat %s: %w", p, err)
		}
		if i == 0 {
			unit = in.Size
		}
		ids[i], srcs[i], size = in.ID, in, size+in.Size
		if k, ok := c.class(in.COS); ok {
			pools[k.Pool] = true
		}
	}
	path := joinPath(append(dirComps, name))
	dir, _, err := c.writeTarget(ctx, who, dirComps, name, path, false)
	if err != nil {
		return api.FileInfo{}, fmt.Errorf("concat %s: %w", r.Path, err)
	}
	if r.Overwrite {
		if err := c.mayReplace(ctx, who, dir, dirComps, name, path); err != nil {
			return api.FileInfo{}, err
		}
	}
	k, err := c.chooseCOS(r.COS, dir.cos, size)
	if err != nil {
		return api.FileInfo{}, fmt.Errorf("concat %s: %w", r.Path, err)
	}
	// The data stays where it is: in the pool the new file's class keeps
	// its files.
	for p := range pools {
		if p != k.Pool {
			return api.FileInfo{}, api.Errorf(api.ErrInvalid, "concat %s: the sources are in disk pool %s, class %s keeps files in %s", r.Path, p, k.Name, k.Pool)
		}
	}
	now := c.now().UnixNano()
	in := c.newEntry(who, dir, r.Mode, 0o666, false)
	in.Parent, in.Name, in.Mtime, in.Ctime, in.Atime, in.COS = dir.id, name, now, now, now, k.Name
	in.Xattrs = r.Xattrs
	in, err = c.store.Concat(ctx, in, ids, unit, r.Fixity, r.Overwrite)
	if err != nil {
		return api.FileInfo{}, fmt.Errorf("concat %s: %w", r.Path, err)
	}
	for _, s := range srcs {
		c.quota.gone(s, true) // a source is on disk, or Concat refuses it
	}
	c.quota.settle(0, in)
	c.quota.replaced(in)
	fi := info(path, in)
	if b, err := c.store.Bitfile(ctx, in.Bitfile); err == nil {
		fi.Layout, fi.Fixity = layout(b), b.Fixity
	}
	return fi, nil
}
