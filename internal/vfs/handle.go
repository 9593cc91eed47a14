package vfs

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"slices"
	"sync"
	"syscall"
	"time"

	"github.com/strata-storage/strata/client"
	"github.com/strata-storage/strata/internal/api"
	"github.com/strata-storage/strata/internal/auth"
)

// Handle is an open file: what open(2) returns a descriptor for.
type Handle struct {
	fs    *FS
	ctx   context.Context // the handle's life: reads and uploads end with it
	stop  context.CancelFunc
	flags int

	mu    sync.Mutex
	path  string
	base  *client.FileInfo // the stored version this handle started from; nil if new
	mode  uint32           // of a new file
	excl  bool             // created with O_EXCL: storing must not replace
	fresh bool             // the stored content is replaced wholesale (new, O_TRUNC, truncated to 0)
	dirty bool             // holds writes not yet stored
	gone  bool             // unlinked: nothing more is stored
	// unsetID: written by someone other than the owner, which clears
	// the set-user-ID and set-group-ID bits (the store does, on the
	// server; the handle shows it at once).
	unsetID bool
	size    int64     // length including unstored writes
	mtime   time.Time // of the last unstored write

	attr   client.SetAttr    // attributes set while writes were unstored: made after storing
	xattrs map[string][]byte // extended attributes of a file not yet stored (nil: removed)

	st *stream  // streamed writes; nil when none
	wb *os.File // write-back file; nil when none
	rd *client.Reader
	ra readAhead
}

// stream is a file being written in order from its start: its first bytes
// in head, then, once there are more than Options.Head of them, an upload.
type stream struct {
	head     []byte
	up       *client.Upload
	reserved int64
}

// Create makes a handle for a new file p, stored when flushed, where the
// caller has just found nothing (FUSE sends CREATE only after a lookup
// failed; an NFS server asks first). flags are open(2)'s: with O_EXCL the
// store fails with EEXIST should another client have made p meanwhile,
// without it the new file replaces that one.
func (fs *FS) Create(ctx context.Context, p string, flags int, mode uint32) (*Handle, error) {
	return fs.CreateIn(ctx, p, nil, flags, mode)
}

// CreateIn is Create where the caller knows the parent directory's
// attributes (dir; nil: ask the server), fresh enough to check them.
func (fs *FS) CreateIn(ctx context.Context, p string, dir *client.FileInfo, flags int, mode uint32) (*Handle, error) {
	// The parent must exist and be a directory we may write: check now,
	// so that the error comes from creat(2) and not from close(2).
	if dir == nil {
		var err error
		if dir, err = fs.c.Stat(ctx, parentOf(p)); err != nil {
			return nil, err
		}
	}
	if dir.Type != client.TypeDir {
		return nil, syscall.ENOTDIR
	}
	// The server checks when the file is stored, at close; asking now
	// as well makes creat(2) fail as POSIX says, where programs look.
	if who, err := fs.whoami(ctx); err == nil && !permits(who, dir, auth.Write|auth.Exec) {
		return nil, syscall.EACCES
	}
	h := fs.handle(ctx, p, flags)
	h.mode, h.excl, h.fresh, h.dirty = mode&0o7777, flags&os.O_EXCL != 0, true, true
	if h.mode == 0 {
		// open(O_CREAT, 0): the API's 0 means its default mode, so the
		// mode is set once the file is stored, as a chmod would.
		zero := uint32(0)
		h.attr.Mode = &zero
	}
	h.mtime = time.Now()
	fs.track(h)
	return h, nil
}

// stored reports whether the handle's file has a stored version (it was
// opened, or its creation has been stored). The sweeper of an export may
// be storing it meanwhile, so this takes the handle's lock.
func (h *Handle) stored() bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.base != nil
}

// Open opens the existing file p. A read of a file on tape only waits
// for its recall first (see the package doc). Only that wait ends with
// ctx (a FUSE interrupt: the caller got a signal); the rest is done
// whatever befalls ctx, as a local file system's open would be.
func (fs *FS) Open(ctx context.Context, p string, flags int) (*Handle, error) {
	waiting := ctx
	ctx = context.WithoutCancel(ctx)
	if h := fs.writer(p); h != nil && !h.stored() {
		// Created by another handle here and not stored yet: share its
		// bytes by storing them now.
		if err := h.Flush(ctx); err != nil {
			return nil, err
		}
	}
	fi, err := fs.c.Stat(ctx, p)
	if err != nil {
		return nil, err
	}
	acc := flags & syscall.O_ACCMODE
	if fi.Type == client.TypeDir {
		return nil, syscall.EISDIR
	}
	// The server checks each read and the store at close; asking now as
	// well makes open(2) fail as POSIX says (a shell does not look at
	// what close returns for "echo x >> file").
	var want uint32
	if acc != os.O_WRONLY {
		want |= auth.Read
	}
	if acc != os.O_RDONLY || flags&os.O_TRUNC != 0 {
		want |= auth.Write
	}
	if who, err := fs.whoami(ctx); err == nil && !permits(who, fi, want) {
		return nil, syscall.EACCES
	}
	if acc != os.O_WRONLY && flags&os.O_TRUNC == 0 {
		if err := fs.recall(waiting, p, fi, flags&syscall.O_NONBLOCK != 0); err != nil {
			return nil, err
		}
	}
	h := fs.handle(ctx, p, flags)
	if acc == os.O_RDONLY && flags&os.O_TRUNC == 0 {
		// The layout now, with the attributes it goes with: the handle
		// reads the version it opened even if a rename replaces it
		// before the first read.
		if err := h.openReader(); err != nil {
			h.stop()
			return nil, err
		}
		h.base, h.size = h.rd.Info(), h.rd.Size()
		return h, nil
	}
	h.base, h.size = fi, fi.Size
	if flags&os.O_TRUNC != 0 && acc != os.O_RDONLY {
		h.fresh, h.dirty, h.size, h.mtime = true, true, 0, time.Now()
		fs.track(h)
	}
	return h, nil
}

// permits is the server's POSIX check (auth.Identity.May) of want on fi,
// made here so that open(2) and creat(2) fail where programs look.
func permits(who *api.WhoAmI, fi *client.FileInfo, want uint32) bool {
	id := auth.Identity{UID: who.UID, GID: who.GID, Groups: who.Groups, Admin: who.Admin}
	return id.May(fi.Mode, fi.UID, fi.GID, want)
}

func (fs *FS) handle(opener context.Context, p string, flags int) *Handle {
	// The handle's own work (uploads, reads, the store at release) is
	// done for whoever opened it.
	ctx, stop := context.WithCancel(client.WithActor(context.Background(), client.ActorOf(opener)))
	return &Handle{fs: fs, ctx: ctx, stop: stop, flags: flags, path: p}
}

// recall waits until a file on tape only is back on disk.
func (fs *FS) recall(ctx context.Context, p string, fi *client.FileInfo, nowait bool) error {
	if fi.Residency != "tape" && fi.Residency != "staging" {
		return nil
	}
	if fs.o.RecallTimeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, fs.o.RecallTimeout)
		defer cancel()
	}
	r, err := fs.c.Open(ctx, p, client.GetOptions{NoWait: nowait})
	if err != nil {
		return err
	}
	return r.Close()
}

func (fs *FS) track(h *Handle) {
	fs.mu.Lock()
	fs.writers[h.path] = h
	fs.mu.Unlock()
}

func (fs *FS) untrack(h *Handle) {
	fs.mu.Lock()
	if fs.writers[h.path] == h {
		delete(fs.writers, h.path)
	}
	fs.mu.Unlock()
}

func parentOf(p string) string {
	for i := len(p) - 1; i > 0; i-- {
		if p[i] == '/' {
			return p[:i]
		}
	}
	return "/"
}

// forOpener makes ctx act for whoever opened the handle: a release, say,
// comes from the kernel, not from a caller.
func (h *Handle) forOpener(ctx context.Context) context.Context {
	return client.WithActor(ctx, client.ActorOf(h.ctx))
}

// Info describes the file as this handle sees it.
func (h *Handle) Info() *client.FileInfo {
	h.mu.Lock()
	defer h.mu.Unlock()
	fi := client.FileInfo{Path: h.path, Type: client.TypeFile, Mode: h.mode}
	if h.base != nil {
		fi = *h.base
	} else {
		now := time.Now()
		fi.Ctime, fi.Atime = now, now
		if who, err := h.fs.whoami(h.ctx); err == nil {
			fi.UID, fi.GID = who.UID, who.GID
		}
	}
	h.overlayLocked(&fi)
	return &fi
}

// overlay puts the handle's unstored length and time on fi.
func (h *Handle) overlay(fi *client.FileInfo) {
	h.mu.Lock()
	h.overlayLocked(fi)
	h.mu.Unlock()
}

func (h *Handle) overlayLocked(fi *client.FileInfo) {
	if !h.dirty && !h.gone {
		// (An unlinked file's descriptor still sees what it wrote.)
		return
	}
	fi.Size, fi.Mtime = h.size, h.mtime
	if h.unsetID {
		fi.Mode &^= 0o6000
	}
	a := &h.attr
	if a.Mode != nil {
		fi.Mode = *a.Mode
	}
	if a.UID != nil {
		fi.UID = *a.UID
	}
	if a.GID != nil {
		fi.GID = *a.GID
	}
	if a.Mtime != nil {
		fi.Mtime = *a.Mtime
	}
	if a.Atime != nil {
		fi.Atime = *a.Atime
	}
}

// setAttr keeps r for when the file is stored, if the handle holds
// unstored writes; ok is false if it holds none (r goes to the server).
func (h *Handle) setAttr(r client.SetAttr) (fi *client.FileInfo, ok bool) {
	h.mu.Lock()
	if !h.dirty {
		h.mu.Unlock()
		return nil, false
	}
	a := &h.attr
	for _, f := range []struct{ dst, src **uint32 }{{&a.Mode, &r.Mode}, {&a.UID, &r.UID}, {&a.GID, &r.GID}} {
		if *f.src != nil {
			*f.dst = *f.src
		}
	}
	if r.Mtime != nil {
		a.Mtime = r.Mtime
	}
	if r.Atime != nil {
		a.Atime = r.Atime
	}
	h.mu.Unlock()
	return h.Info(), true
}

// pendingXattr is attribute name of a file not yet stored (stored: it
// is, ask the server).
func (h *Handle) pendingXattr(name string) (v []byte, ok, stored bool) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.base != nil {
		return nil, false, true
	}
	v, ok = h.xattrs[name]
	return v, ok && v != nil, false
}

// pendingXattrs lists the attributes of a file not yet stored.
func (h *Handle) pendingXattrs() (names []string, stored bool) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.base != nil {
		return nil, true
	}
	for n, v := range h.xattrs {
		if v != nil {
			names = append(names, n)
		}
	}
	slices.Sort(names)
	return names, false
}

// setPendingXattr sets (how: "", create, replace) or removes (how:
// remove) an attribute of a file not yet stored; kept is false when the
// file is stored and the server takes the change.
func (h *Handle) setPendingXattr(name string, v []byte, how string) (kept bool, err error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.base != nil {
		return false, nil
	}
	old, has := h.xattrs[name]
	has = has && old != nil
	switch {
	case how == "create" && has:
		return true, syscall.EEXIST
	case (how == "replace" || how == "remove") && !has:
		return true, syscall.ENODATA
	}
	if h.xattrs == nil {
		h.xattrs = map[string][]byte{}
	}
	if how == "remove" {
		h.xattrs[name] = nil
	} else {
		h.xattrs[name] = append([]byte{}, v...)
	}
	return true, nil
}

// discard forgets the handle's unstored writes: its file was unlinked.
// It reports whether the file was never stored (so there is nothing on
// the server to remove). A store in progress finishes first.
func (h *Handle) discard() (neverStored bool) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.gone, h.dirty = true, false
	if h.st != nil && h.st.up != nil {
		h.st.up.Abort()
	}
	h.st = nil
	h.fs.untrack(h)
	return h.base == nil
}

// Size is the file's length as this handle sees it.
func (h *Handle) Size() int64 {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.size
}

// WriteAt writes p at off (at the end with O_APPEND).
func (h *Handle) WriteAt(ctx context.Context, p []byte, off int64) (int, error) {
	ctx = h.forOpener(ctx)
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.flags&os.O_APPEND != 0 {
		off = h.size
	}
	if !h.dirty && !h.gone { // (an unlinked file's writes go nowhere)
		h.fs.track(h)
	}
	h.dirty, h.mtime = true, time.Now()
	if h.base != nil && h.base.Mode&0o6000 != 0 && !h.unsetID && !h.fs.Owns(ctx, h.base) {
		h.unsetID = true
	}
	if h.wb == nil && h.st == nil && off == 0 && h.size == 0 && h.base != nil && h.base.Size == 0 {
		// Writing an empty stored file from its start (a shell's "> f"
		// stores the empty file when it closes the descriptor it
		// opened, before the program it runs writes): replacing it
		// wholesale loses nothing.
		h.fresh = true
	}
	if h.wb == nil && h.fresh && off == h.size && h.flags&syscall.O_ACCMODE == os.O_WRONLY {
		return h.streamWrite(ctx, p)
	}
	if err := h.toWriteBack(ctx); err != nil {
		return 0, err
	}
	n, err := h.wb.WriteAt(p, off)
	h.size = max(h.size, off+int64(n))
	return n, err
}

// streamWrite appends p to the stream, starting its upload once the head
// is full.
func (h *Handle) streamWrite(ctx context.Context, p []byte) (int, error) {
	if h.st == nil {
		h.st = &stream{}
	}
	s := h.st
	if s.up == nil {
		s.head = append(s.head, p...)
		h.size += int64(len(p))
		if int64(len(s.head)) <= h.fs.o.Head {
			return len(p), nil
		}
		if err := h.startUpload(ctx); err != nil {
			return 0, err
		}
		head := s.head
		s.head = nil
		if _, err := s.up.Write(head); err != nil {
			return 0, err
		}
		return len(p), nil
	}
	if h.size+int64(len(p)) > s.reserved {
		return 0, syscall.EFBIG
	}
	n, err := s.up.Write(p)
	h.size += int64(n)
	return n, err
}

// startUpload creates the upload of a streamed file, reserving as much as
// the servers and the quota grant up to Options.Reserve.
func (h *Handle) startUpload(ctx context.Context) error {
	need := 2 * int64(len(h.st.head))
	var refused error
	for r := h.fs.o.Reserve; r >= need; r /= 2 {
		up, err := h.fs.c.Create(h.ctx, h.path, r, h.putOptions())
		if err == nil {
			h.st.up, h.st.reserved = up, r
			return nil
		}
		if !errors.Is(err, client.ErrNoSpace) && !errors.Is(err, client.ErrQuota) {
			return err
		}
		refused = err // the last refusal says why (ENOSPC or EDQUOT)
	}
	if refused == nil {
		refused = syscall.ENOSPC
	}
	return refused
}

func (h *Handle) putOptions() client.PutOptions {
	o := client.PutOptions{COS: h.fs.o.COS, Overwrite: !h.excl, Mode: h.mode}
	if h.base != nil {
		// A file that existed when it was opened is written into, not
		// replaced: its owner, group, mode and class stay, and write
		// permission on it is what the server asks for.
		o.Mode = h.base.Mode & 0o7777
		o.COS, o.Rewrite = "", true
	}
	if h.attr.Mode != nil {
		o.Mode = *h.attr.Mode
	}
	return o
}

// toWriteBack moves the handle's content to a write-back file (fetching
// the stored version first unless it is being replaced).
func (h *Handle) toWriteBack(ctx context.Context) error {
	if h.wb != nil {
		return nil
	}
	if h.st != nil && h.st.up != nil {
		// Its bytes are on their way to the movers and cannot be read
		// back: a write-only handle that streamed past its head must go
		// on in order.
		return fmt.Errorf("%s: a write out of order after %d bytes written in order: %w", h.path, h.size, syscall.EINVAL)
	}
	f, err := os.CreateTemp(h.fs.o.CacheDir, "wb-*")
	if err != nil {
		return fmt.Errorf("write-back file: %w", err)
	}
	os.Remove(f.Name()) // nothing to clean up after a crash
	switch {
	case h.st != nil:
		_, err = f.Write(h.st.head)
		h.st = nil
	case !h.fresh && h.base != nil && h.base.Size > 0:
		_, err = h.fs.c.Get(ctx, h.path, f, client.GetOptions{})
	}
	if err != nil {
		f.Close()
		return err
	}
	h.wb = f
	return nil
}

// Truncate sets the file's length.
func (h *Handle) Truncate(ctx context.Context, size int64) error {
	ctx = h.forOpener(ctx)
	h.mu.Lock()
	defer h.mu.Unlock()
	if !h.dirty && !h.gone {
		h.fs.track(h)
	}
	h.dirty, h.mtime = true, time.Now()
	if size == 0 && h.wb == nil {
		// Truncating to nothing replaces the content wholesale: no need
		// to fetch it.
		if h.st != nil && h.st.up != nil {
			h.st.up.Abort()
		}
		h.st, h.fresh, h.size = nil, true, 0
		return nil
	}
	if size == h.size && h.st != nil && h.st.up == nil {
		return nil
	}
	if err := h.toWriteBack(ctx); err != nil {
		return err
	}
	if err := h.wb.Truncate(size); err != nil {
		return err
	}
	h.size = size
	return nil
}

// ReadAt reads at off: unstored writes from the handle itself, stored
// data from the movers.
func (h *Handle) ReadAt(ctx context.Context, p []byte, off int64) (int, error) {
	b, release, err := h.ReadRef(ctx, p, off)
	if release != nil {
		copy(p, b)
		release()
	}
	return len(b), err
}

// ReadRef is ReadAt that may lend its bytes instead of copying them into
// p: a read in order of stored data is answered in place in the
// read-ahead's window, and release must be called once the bytes have
// been used (a FUSE reply written), before which the window is not
// reused. Otherwise the bytes are in p and release is nil. A reader that
// sends the bytes on (the mount) saves a copy of each.
func (h *Handle) ReadRef(ctx context.Context, p []byte, off int64) (b []byte, release func(), err error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if off >= h.size {
		return nil, nil, io.EOF
	}
	if h.wb != nil {
		n, err := h.wb.ReadAt(p[:min(int64(len(p)), h.size-off)], off)
		if err == nil && n < len(p) {
			err = io.EOF
		}
		return p[:n], nil, err
	}
	if h.st != nil && h.st.up == nil && h.dirty {
		n := copy(p, h.st.head[off:])
		return p[:n], nil, nil
	}
	if h.fresh {
		return nil, nil, io.EOF
	}
	for retried := false; ; retried = true {
		if h.rd == nil {
			if err := h.openReader(); err != nil {
				return nil, nil, err
			}
		}
		b, release, err := h.ra.readRef(p, off)
		if err == nil || err == io.EOF || retried || !errors.Is(err, client.ErrDenied) {
			return b, release, err
		}
		// The read tokens of an open file expire (an hour at most):
		// open it again, once, as the user may still read it.
		h.ra.stopAll()
		h.rd, h.ra = nil, readAhead{}
	}
}

// openReader opens the stored file for reading. The objects of the
// version the handle opened (base) outlive its removal, or a rename over
// it, for the server's reclaim grace, but a path opened again may name
// another file by then: that is ESTALE, as NFS has it, never another
// file's bytes under this handle.
func (h *Handle) openReader() error {
	rd, err := h.fs.c.Open(h.ctx, h.path, client.GetOptions{})
	if err != nil {
		return err
	}
	if h.base != nil && h.base.ID != 0 && rd.Info().ID != h.base.ID {
		return fmt.Errorf("read %s: replaced since it was opened: %w", h.path, syscall.ESTALE)
	}
	h.rd = rd
	h.ra.init(rd)
	return nil
}

// Flush stores the handle's writes, if any: the file appears, or its new
// version replaces the old, when this returns nil. close(2) and fsync(2)
// call it.
func (h *Handle) Flush(ctx context.Context) error {
	ctx = h.forOpener(ctx)
	h.mu.Lock()
	defer h.mu.Unlock()
	if !h.dirty || h.gone {
		return nil
	}
	var fi *client.FileInfo
	var err error
	o := h.putOptions()
	switch {
	case h.wb != nil:
		fi, err = h.fs.c.Put(ctx, h.path, h.wb, h.size, o)
	case h.st != nil && h.st.up != nil:
		fi, err = h.st.up.Commit(ctx)
	default:
		var head []byte
		if h.st != nil {
			head = h.st.head
		}
		fi, err = h.fs.c.Put(ctx, h.path, bytes.NewReader(head), int64(len(head)), o)
	}
	if err != nil {
		if h.st != nil && h.st.up != nil {
			// The upload is gone; what it held cannot be sent again.
			h.st, h.dirty = nil, false
			h.fs.untrack(h)
		}
		return fmt.Errorf("store %s: %w", h.path, err)
	}
	h.base, h.size, h.dirty, h.fresh, h.st = fi, fi.Size, false, false, nil
	h.excl = false
	if a := h.attr; a.Mode != nil && *a.Mode != fi.Mode || a.UID != nil || a.GID != nil || a.Mtime != nil || a.Atime != nil {
		a.Path, h.attr = h.path, client.SetAttr{}
		if a.Mode != nil && *a.Mode == fi.Mode {
			a.Mode = nil
		}
		if fi, err = h.fs.c.SetAttr(ctx, a); err != nil {
			h.fs.untrack(h)
			return fmt.Errorf("store %s: stored, but setting its attributes: %w", h.path, err)
		}
		h.base = fi
	}
	h.attr = client.SetAttr{}
	for n, v := range h.xattrs {
		if v != nil {
			err = h.fs.c.SetXattr(ctx, h.path, n, v, "")
		}
		if err != nil {
			h.fs.untrack(h)
			return fmt.Errorf("store %s: stored, but setting attribute %s: %w", h.path, n, err)
		}
	}
	h.xattrs = nil
	if h.rd != nil {
		h.rd, h.ra = nil, readAhead{}
	}
	h.fs.untrack(h)
	return nil
}

// Release ends the handle: unstored writes are stored (their error is
// returned, though close(2) has already had Flush's), the write-back
// file goes, an unfinished upload is aborted.
func (h *Handle) Release(ctx context.Context) error {
	err := h.Flush(ctx)
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.st != nil && h.st.up != nil {
		h.st.up.Abort()
	}
	if h.wb != nil {
		h.wb.Close()
		h.wb = nil
	}
	h.stop() // ends reads in flight
	h.ra.stopAll()
	h.fs.untrack(h)
	return err
}

// Access checks that the caller ctx acts for has every permission bit of
// want (auth.Read, Write, Exec) on p, by the server's rule: access(2), and
// opening a directory, which reads it.
func (fs *FS) Access(ctx context.Context, p string, want uint32) error {
	fi, err := fs.Stat(ctx, p)
	if err != nil {
		return err
	}
	who, err := fs.whoami(ctx)
	if err != nil {
		return err
	}
	if !permits(who, fi, want) {
		return syscall.EACCES
	}
	return nil
}

// Owns reports whether the caller ctx acts for owns fi (or is an admin),
// as the server would judge it.
func (fs *FS) Owns(ctx context.Context, fi *client.FileInfo) bool {
	who, err := fs.whoami(ctx)
	return err == nil && (who.Admin || who.UID == fi.UID)
}

// whoami is the caller as the server sees it (the owner of new files),
// asked once.
func (fs *FS) whoami(ctx context.Context) (*api.WhoAmI, error) {
	a := client.ActorOf(ctx)
	fs.mu.Lock()
	w := fs.who[a]
	fs.mu.Unlock()
	if w != nil {
		return w, nil
	}
	w, err := fs.c.WhoAmI(ctx)
	if err == nil {
		fs.mu.Lock()
		if fs.who == nil || len(fs.who) > 1000 {
			fs.who = map[string]*api.WhoAmI{}
		}
		fs.who[a] = w
		fs.mu.Unlock()
	}
	return w, err
}
