package client

import (
	"context"
	"path"

	"github.com/strata-storage/strata/internal/api"
)

// walkPage is how many entries Walk asks for at a time.
const walkPage = 1000

// Walk calls fn for every file (and symbolic link) under root, depth
// first, directories in name order; root itself may be a file. It holds one
// page of a listing and the names of the directories still to visit, never
// the tree: a walk of a hundred million files takes the memory of the
// widest directory's subdirectories. An error from fn stops the walk and is
// returned. As with ListPages, entries made or removed meanwhile may or may
// not be seen.
func (c *Client) Walk(ctx context.Context, root string, fn func(fi *FileInfo) error) error {
	top, err := c.Stat(ctx, root)
	if err != nil {
		return err
	}
	if !top.IsDir() {
		return fn(top)
	}
	dirs := []string{top.Path}
	for len(dirs) > 0 {
		dir := dirs[len(dirs)-1]
		dirs = dirs[:len(dirs)-1]
		var sub []string
		err := c.ListPages(ctx, dir, walkPage, func(page []FileInfo) error {
			for i := range page {
				fi := &page[i]
				if fi.Path == "" {
					fi.Path = path.Join(dir, fi.Name)
				}
				if fi.Type == api.TypeDir {
					sub = append(sub, fi.Path)
					continue
				}
				if err := fn(fi); err != nil {
					return err
				}
			}
			return nil
		})
		if err != nil {
			return err
		}
		// Pushed in reverse, popped in name order.
		for i := len(sub) - 1; i >= 0; i-- {
			dirs = append(dirs, sub[i])
		}
	}
	return nil
}
