package s3

import (
	"context"
	"errors"
	"sort"
	"strings"
	"sync"

	"github.com/strata-storage/strata/client"
	"github.com/strata-storage/strata/internal/api"
)

// uploadsDir is where a bucket keeps its multipart uploads' parts: a
// directory of the bucket that listings and keys leave alone.
const uploadsDir = ".strata-multipart"

// object is one key a listing returns.
type object struct {
	key string
	fi  client.FileInfo
	dir bool // an empty directory: S3's "folder" object "key/"
}

// listing is one page of a bucket's keys.
type listing struct {
	objects   []object
	prefixes  []string
	truncated bool
	last      string // the last key or common prefix returned
}

var errFull = errors.New("page full")

// list returns up to max keys and common prefixes of bucket that start
// with prefix and sort after after, in S3's order (bytewise by key).
// Keys are paths, so the walk descends only into directories that can
// hold a key of the page: the one the prefix names, and those after the
// marker. A directory sorts as its name and "/", which is where its keys
// fall among its siblings. With a delimiter, a directory all of whose
// keys fold into one common prefix is reported without being read.
func (g *Gateway) list(ctx context.Context, bucket, prefix, delim, after string, max int) (*listing, error) {
	l := &listing{}
	if max <= 0 {
		_, err := g.c.Stat(ctx, g.path(bucket, ""))
		return l, err
	}
	emit := func(o *object, cp string) error {
		if len(l.objects)+len(l.prefixes) == max {
			l.truncated = true
			return errFull
		}
		if o != nil {
			l.objects = append(l.objects, *o)
			l.last = o.key
		} else {
			l.prefixes = append(l.prefixes, cp)
			l.last = cp
		}
		return nil
	}
	// fold is the common prefix key k folds into, or "".
	fold := func(k string) string {
		if delim == "" || !strings.HasPrefix(k, prefix) {
			return ""
		}
		if i := strings.Index(k[len(prefix):], delim); i >= 0 {
			return k[:len(prefix)+i+len(delim)]
		}
		return ""
	}
	var walk func(dir, base string) (bool, error)
	walk = func(dir, base string) (empty bool, err error) {
		ents, err := g.c.List(ctx, dir)
		if err != nil {
			return false, err
		}
		type item struct {
			key string
			fi  client.FileInfo
		}
		items := make([]item, 0, len(ents))
		for _, e := range ents {
			if base == "" && e.Name == uploadsDir {
				continue
			}
			k := base + e.Name
			if e.Type == client.TypeDir {
				k += "/"
			} else if e.Type != client.TypeFile {
				continue // symbolic links are not objects
			}
			items = append(items, item{k, e})
		}
		sort.Slice(items, func(i, j int) bool { return items[i].key < items[j].key })
		for _, it := range items {
			k := it.key
			if !strings.HasPrefix(k, prefix) && !strings.HasPrefix(prefix, k) {
				continue
			}
			if it.fi.Type == client.TypeDir {
				if len(prefix) > len(k) { // the prefix goes on below: descend
					if _, err := walk(dir+"/"+it.fi.Name, k); err != nil {
						return false, err
					}
					continue
				}
				if cp := fold(k); cp != "" {
					if cp > after && (len(l.prefixes) == 0 || l.prefixes[len(l.prefixes)-1] != cp) {
						if err := emit(nil, cp); err != nil {
							return false, err
						}
					}
					continue
				}
				if after >= k && !strings.HasPrefix(after, k) {
					continue // every key below sorts before the marker
				}
				sub, err := walk(dir+"/"+it.fi.Name, k)
				if err != nil {
					return false, err
				}
				if sub && k > after {
					if err := emit(&object{key: k, fi: it.fi, dir: true}, ""); err != nil {
						return false, err
					}
				}
				continue
			}
			if k <= after || !strings.HasPrefix(k, prefix) {
				continue
			}
			if cp := fold(k); cp != "" {
				if cp > after && (len(l.prefixes) == 0 || l.prefixes[len(l.prefixes)-1] != cp) {
					if err := emit(nil, cp); err != nil {
						return false, err
					}
				}
				continue
			}
			if err := emit(&object{key: k, fi: it.fi}, ""); err != nil {
				return false, err
			}
		}
		return len(items) == 0, nil
	}
	// Start at the deepest directory the prefix names.
	base := prefix[:strings.LastIndex(prefix, "/")+1]
	if base != "" && validKey(base) != nil {
		// No key can lie below a prefix like "/", "a//" or "../": keys
		// are paths.
		_, err := g.c.Stat(ctx, g.path(bucket, ""))
		return l, err
	}
	dir := g.path(bucket, "")
	if base != "" {
		dir = g.path(bucket, base)
		if _, err := g.c.Stat(ctx, g.path(bucket, "")); err != nil {
			return nil, err
		}
	}
	_, err := walk(dir, base)
	switch {
	case errors.Is(err, errFull):
		err = nil
	case base != "" && (errors.Is(err, api.ErrNotFound) || errors.Is(err, api.ErrNotDir)):
		err = nil // no key has this prefix
	}
	// The empty directory the prefix itself names is no key of its own
	// unless the prefix is exactly its key.
	return l, err
}

// objAttrs fetches the attributes of a page's objects, a few at a time
// (nil for folders and for an object that went meanwhile).
func (g *Gateway) objAttrs(ctx context.Context, objs []object) []map[string][]byte {
	out := make([]map[string][]byte, len(objs))
	sem := make(chan struct{}, 8)
	var wg sync.WaitGroup
	for i := range objs {
		if objs[i].dir {
			continue
		}
		wg.Add(1)
		sem <- struct{}{}
		go func(i int) {
			defer wg.Done()
			defer func() { <-sem }()
			out[i], _ = g.c.Xattrs(ctx, objs[i].fi.Path)
		}(i)
	}
	wg.Wait()
	return out
}

// etags are the ETags of a page's objects.
func (g *Gateway) etags(ctx context.Context, objs []object) []string {
	out := make([]string, len(objs))
	for i, attrs := range g.objAttrs(ctx, objs) {
		out[i] = emptyETag
		if !objs[i].dir {
			out[i] = etagOf(&objs[i].fi, attrs)
		}
	}
	return out
}
