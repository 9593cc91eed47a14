// Package vfs is Strata's namespace as a POSIX file system, built on the
// public client package: the one layer the FUSE mount (internal/fusefs)
// and the NFS export share, so that both give the same answers.
//
// It owns what POSIX has and Strata's API does not: file handles with
// byte-range writes, and the errno of every failure.
//
//   - A file written from its start in order (create or O_TRUNC, then
//     write, write, close: cp, dd, tar, most codes) is streamed: its first
//     bytes wait in memory (Options.Head); a file closed by then is stored
//     by one Put of its exact size, a longer one streams into a striped
//     Upload, stripe by stripe in parallel, as `strata put` does.
//   - Anything else (a write out of order, O_APPEND or O_RDWR on an
//     existing file, truncate) goes through a write-back file in
//     Options.CacheDir holding the whole file, stored by one Put.
//   - Either way the file appears, or its new version replaces the old,
//     only when the handle is flushed (close or fsync) and the server has
//     committed it; a failure returns EIO and leaves the old version.
//     Readers that opened the file before see the old version to the end.
//   - Reads fetch ranges from the movers directly, one stripe row (stripe
//     width × unit) ahead of a sequential reader.
//   - Opening a file that is on tape only waits for its recall (EAGAIN at
//     once with O_NONBLOCK; ETIMEDOUT after Options.RecallTimeout).
package vfs

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path"
	"sync"
	"syscall"
	"time"

	"github.com/strata-storage/strata/client"
	"github.com/strata-storage/strata/internal/api"
)

// Options tune an FS.
type Options struct {
	// CacheDir holds the write-back files of handles that do not write in
	// order (default: strata-cache-UID under os.TempDir()); it must be
	// the user's own, mode 0700.
	CacheDir string
	// Head is how many bytes a streamed file gathers in memory before it
	// starts an upload (default 8 MiB): files smaller than this are
	// stored by one Put of known size.
	Head int64
	// Reserve is the space a streamed upload reserves before its length
	// is known (default 1 TiB); when the servers or the caller's quota
	// cannot grant it, the reservation halves until they can. A stream
	// that outgrows its reservation fails with EFBIG.
	Reserve int64
	// RecallTimeout bounds how long an open waits for a recall from tape
	// (0: no bound).
	RecallTimeout time.Duration
	// COS is the class of service of new files ("" for the directory's or
	// the server's default).
	COS string
}

// FS is a Strata namespace as a file system.
type FS struct {
	c *client.Client
	o Options

	mu      sync.Mutex
	writers map[string]*Handle     // paths with a handle holding unflushed writes
	who     map[string]*api.WhoAmI // by the caller acted for (client.ActorOf)
}

// New returns the file system of c's server.
func New(c *client.Client, o Options) (*FS, error) {
	if o.Head <= 0 {
		o.Head = 8 << 20
	}
	if o.Reserve <= 0 {
		o.Reserve = 1 << 40
	}
	if o.CacheDir == "" {
		o.CacheDir = path.Join(os.TempDir(), fmt.Sprintf("strata-cache-%d", os.Getuid()))
	}
	if err := os.MkdirAll(o.CacheDir, 0o700); err != nil {
		return nil, err
	}
	// Write-back files hold other people's data: the directory must be
	// ours and closed to everyone else (not one someone made in /tmp
	// before us).
	if fi, err := os.Lstat(o.CacheDir); err != nil {
		return nil, err
	} else if st, ok := fi.Sys().(*syscall.Stat_t); !fi.IsDir() || !ok || int(st.Uid) != os.Getuid() || fi.Mode().Perm()&0o077 != 0 {
		return nil, fmt.Errorf("cache directory %s: must be a directory of uid %d closed to others (mode %v)", o.CacheDir, os.Getuid(), fi.Mode())
	}
	return &FS{c: c, o: o, writers: map[string]*Handle{}}, nil
}

// Client is the client the file system is built on.
func (fs *FS) Client() *client.Client { return fs.c }

// Join joins a directory path and a name.
func Join(dir, name string) string {
	if dir == "/" {
		return "/" + name
	}
	return dir + "/" + name
}

// Stat returns path's attributes, with the size and times of writes not
// yet flushed by a handle of this file system.
func (fs *FS) Stat(ctx context.Context, p string) (*client.FileInfo, error) {
	fi, err := fs.c.Stat(ctx, p)
	if err != nil {
		if h := fs.writer(p); h != nil {
			// Created here and not yet stored: it exists for us.
			return h.Info(), nil
		}
		return nil, err
	}
	if h := fs.writer(p); h != nil {
		h.overlay(fi)
	}
	return fi, nil
}

// Overlay puts on fi (p's attributes from the server, by a listing) the
// size and times of writes a handle here has not stored yet.
func (fs *FS) Overlay(p string, fi *client.FileInfo) {
	if h := fs.writer(p); h != nil {
		h.overlay(fi)
	}
}

func (fs *FS) writer(p string) *Handle {
	fs.mu.Lock()
	defer fs.mu.Unlock()
	return fs.writers[p]
}

// List calls fn with the entries of directory p, a page at a time.
func (fs *FS) List(ctx context.Context, p string, fn func([]client.FileInfo) error) error {
	return fs.c.ListPages(ctx, p, 1000, fn)
}

// Mkdir creates directory p.
func (fs *FS) Mkdir(ctx context.Context, p string, mode uint32) (*client.FileInfo, error) {
	return fs.c.Mkdir(ctx, p, false, mode)
}

// Symlink creates the symbolic link p pointing at target.
func (fs *FS) Symlink(ctx context.Context, p, target string) (*client.FileInfo, error) {
	return fs.c.Symlink(ctx, p, target)
}

// Readlink returns the target of the symbolic link p.
func (fs *FS) Readlink(ctx context.Context, p string) (string, error) {
	fi, err := fs.c.Stat(ctx, p)
	if err != nil {
		return "", err
	}
	if fi.Type != client.TypeSymlink {
		return "", syscall.EINVAL
	}
	return fi.Target, nil
}

// Unlink removes the file p (EISDIR for a directory). Writes still
// unstored by a handle of p go nowhere, as writes to an unlinked file do;
// a file never stored is gone without asking the server.
func (fs *FS) Unlink(ctx context.Context, p string) error {
	if h := fs.writer(p); h != nil && h.discard() {
		return nil
	}
	fi, err := fs.c.Stat(ctx, p)
	if err != nil {
		return err
	}
	if fi.Type == client.TypeDir {
		return syscall.EISDIR
	}
	return fs.c.Remove(ctx, p, false)
}

// Rmdir removes the empty directory p (ENOTDIR for a file).
func (fs *FS) Rmdir(ctx context.Context, p string) error {
	fi, err := fs.c.Stat(ctx, p)
	if err != nil {
		return err
	}
	if fi.Type != client.TypeDir {
		return syscall.ENOTDIR
	}
	return fs.c.Remove(ctx, p, false)
}

// Rename moves src to dst, replacing dst as rename(2) does: a file by a
// file, an empty directory by a directory.
func (fs *FS) Rename(ctx context.Context, src, dst string) error {
	if src == dst {
		return nil
	}
	h := fs.writer(src)
	if err := fs.c.Rename(ctx, src, dst, true); err != nil {
		if h == nil || !errors.Is(err, client.ErrNotFound) {
			return err
		}
		// Created here and not yet stored: it moves here alone, and is
		// stored under its new name.
		if _, err := fs.c.Stat(ctx, parentOf(dst)); err != nil {
			return err
		}
	}
	if d := fs.writer(dst); d != nil && d != h {
		// The file the rename replaced has no name now: what its
		// descriptors write is stored nowhere, as on a local file
		// system, and never over the file that took its place.
		d.discard()
	}
	if h != nil {
		// An open writer follows its file, as an fd does. (Lock order:
		// a handle's, then the file system's.)
		h.mu.Lock()
		h.path = dst
		fs.mu.Lock()
		if fs.writers[src] == h {
			delete(fs.writers, src)
			fs.writers[dst] = h
		}
		fs.mu.Unlock()
		h.mu.Unlock()
	}
	return nil
}

// SetAttr changes mode, owner or times. On a file with unstored writes
// (cp -a and rsync set them on the open descriptor before closing it) the
// change waits for the file to be stored, and is made just after.
func (fs *FS) SetAttr(ctx context.Context, r client.SetAttr) (*client.FileInfo, error) {
	if h := fs.writer(r.Path); h != nil {
		pending := r
		if pending.Now {
			// Kept for the store, made by the handle's opener.
			t := time.Now()
			pending.Mtime, pending.Atime, pending.Now = &t, &t, false
		}
		if fi, ok := h.setAttr(pending); ok {
			return fi, nil
		}
	}
	return fs.c.SetAttr(ctx, r)
}

// Truncate sets the length of file p (through a handle: it is a write).
func (fs *FS) Truncate(ctx context.Context, p string, size int64) error {
	h, err := fs.Open(ctx, p, os.O_RDWR)
	if err != nil {
		return err
	}
	err = h.Truncate(ctx, size)
	if ferr := h.Release(ctx); err == nil {
		err = ferr
	}
	return err
}

// StatFS reports the space of all pools together: total and free bytes.
func (fs *FS) StatFS(ctx context.Context) (total, free uint64, err error) {
	df, err := fs.c.DF(ctx)
	if err != nil {
		return 0, 0, err
	}
	for _, d := range df.Devices {
		total += uint64(d.Capacity)
		if d.Capacity > d.Used {
			free += uint64(d.Capacity - d.Used)
		}
	}
	return total, free, nil
}

// Errno is the errno of an error from this package or the client.
func Errno(err error) syscall.Errno {
	var en syscall.Errno
	switch {
	case err == nil:
		return 0
	case errors.As(err, &en):
		return en
	case errors.Is(err, api.ErrNoAttr):
		return syscall.ENODATA
	case errors.Is(err, client.ErrNotFound):
		return syscall.ENOENT
	case errors.Is(err, client.ErrExist):
		return syscall.EEXIST
	case errors.Is(err, client.ErrNotDir):
		return syscall.ENOTDIR
	case errors.Is(err, client.ErrIsDir):
		return syscall.EISDIR
	case errors.Is(err, client.ErrNotEmpty):
		return syscall.ENOTEMPTY
	case errors.Is(err, client.ErrNotOwner):
		return syscall.EPERM
	case errors.Is(err, client.ErrDenied), errors.Is(err, client.ErrUnauthenticated):
		return syscall.EACCES
	case errors.Is(err, client.ErrNoSpace):
		return syscall.ENOSPC
	case errors.Is(err, client.ErrQuota):
		return syscall.EDQUOT
	case errors.Is(err, client.ErrOffline), errors.Is(err, client.ErrUnavailable):
		return syscall.EAGAIN
	case errors.Is(err, context.DeadlineExceeded):
		return syscall.ETIMEDOUT
	case errors.Is(err, context.Canceled):
		return syscall.EINTR
	case errors.Is(err, api.ErrNameTooLong):
		return syscall.ENAMETOOLONG
	case errors.Is(err, client.ErrInvalid):
		return syscall.EINVAL
	}
	return syscall.EIO
}
