// Package nfsfs exports Strata's namespace over NFSv3 with
// github.com/willscott/go-nfs (the server rclone's `serve nfs` uses): a
// billy.Filesystem on internal/vfs, the layer the FUSE mount uses too, so
// both give the same answers from the same code.
//
// NFS is stateless: go-nfs opens and closes a file for every READ and
// WRITE call, and no close(2) of the client's reaches the server. So the
// export keeps the vfs handles of files in use in a table of its own: the
// WRITE calls of a file land in one read-write handle, and the file is
// stored (appears, or replaces the old version) once its writes have
// paused for Options.WriteIdle. A client's page cache may send a file's
// WRITEs in any order, so they go through the handle's write-back file
// (vfs streams only write-only handles, which cannot take a write behind
// what they have sent), stored by one Put. READ calls share one handle per file, with
// its read-ahead, until reads pause for Options.ReadIdle.
//
// What go-nfs v0.0.4 decides, and the export therefore cannot:
//   - It accepts AUTH_NULL only and hands the file system no per-call
//     credential. Every client of an export acts as the one Strata user
//     the export authenticates as (the user who runs `strata nfs`, or its
//     token), like an NFS export with all_squash; who may connect at all
//     is Options.Allow, by address, from privileged ports unless
//     Options.Insecure.
//   - It answers every WRITE as FILE_SYNC, so clients never send COMMIT:
//     data a client has written is durable once the file is stored, up to
//     WriteIdle later, not when the WRITE is answered.
//   - It maps most failures to a few statuses (NOENT, ACCES, IO) and has
//     no NFS3ERR_JUKEBOX: a READ of a file on tape waits for its recall.
//   - File handles come from an in-memory table (helpers.CachingHandler):
//     they go stale when the export restarts.
package nfsfs

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"net"
	"net/netip"
	"os"
	"path"
	"strings"
	"sync"
	"syscall"
	"time"

	billy "github.com/go-git/go-billy/v5"
	nfs "github.com/willscott/go-nfs"
	nfsfile "github.com/willscott/go-nfs/file"
	"github.com/willscott/go-nfs/helpers"

	"github.com/strata-storage/strata/client"
	"github.com/strata-storage/strata/internal/vfs"
)

// Options tune an export.
type Options struct {
	// WriteIdle is how long a file's writes must pause before it is
	// stored (default 2s).
	WriteIdle time.Duration
	// ReadIdle is how long a file's read handle stays open after its last
	// READ (default 5s).
	ReadIdle time.Duration
	// ReadOnly refuses every change.
	ReadOnly bool
	// Allow lists the client addresses that may connect (default: the
	// loopback addresses only).
	Allow []netip.Prefix
	// Insecure accepts connections from unprivileged ports (1024 and up).
	// By default only privileged ports may connect, as with the "secure"
	// option of Linux's exports: on a client host only root can bind
	// them, and the kernel's NFS client does, so the host's other users
	// cannot talk to the export directly.
	Insecure bool
	// Handles is how many file handles the export remembers (default
	// 100,000); a client holding an older one gets ESTALE and looks the
	// path up again.
	Handles int
	// Debug logs every call (go-nfs's trace); otherwise go-nfs says
	// nothing, as it reports a name that does not exist as an error.
	Debug bool
	Log   *slog.Logger
}

// Export is a Strata namespace served over NFSv3.
type Export struct {
	v    *vfs.FS
	o    Options
	root *FS

	mu      sync.Mutex
	files   map[string]*openFile     // by path: handles in use
	opening map[string]chan struct{} // paths being opened
	stop    chan struct{}
	closing sync.Once
	done    chan struct{}
}

// openFile is a vfs handle shared by the READ or WRITE calls of one file.
type openFile struct {
	h       *vfs.Handle
	writing bool
	users   int // calls using it now
	last    time.Time
	retired bool // out of the table: released by its last call
}

// New returns an export of v.
func New(v *vfs.FS, o Options) *Export {
	if o.WriteIdle <= 0 {
		o.WriteIdle = 2 * time.Second
	}
	if o.ReadIdle <= 0 {
		o.ReadIdle = 5 * time.Second
	}
	if len(o.Allow) == 0 {
		o.Allow = []netip.Prefix{netip.MustParsePrefix("127.0.0.0/8"), netip.MustParsePrefix("::1/128")}
	}
	if o.Handles <= 0 {
		o.Handles = 100000
	}
	if o.Log == nil {
		o.Log = slog.New(slog.DiscardHandler)
	}
	e := &Export{v: v, o: o, files: map[string]*openFile{}, opening: map[string]chan struct{}{}, stop: make(chan struct{}), done: make(chan struct{})}
	e.root = &FS{e: e, root: "/"}
	go e.sweep()
	return e
}

// Serve answers NFS and MOUNT calls on l (one port for both) until l is
// closed.
func (e *Export) Serve(l net.Listener) error {
	if e.o.Debug {
		nfs.Log.SetLevel(nfs.TraceLevel)
	} else {
		nfs.Log.SetLevel(nfs.FatalLevel)
	}
	h := helpers.NewCachingHandler(&handler{e: e}, e.o.Handles)
	return nfs.Serve(&allowListener{Listener: l, e: e}, h)
}

// Close stores every file with unstored writes and closes all handles.
func (e *Export) Close() error {
	e.closing.Do(func() { close(e.stop) })
	<-e.done
	e.mu.Lock()
	files := e.files
	e.files = map[string]*openFile{}
	e.mu.Unlock()
	var errs []error
	for p, f := range files {
		if err := e.release(p, f); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// sweep stores and closes the handles whose calls have paused.
func (e *Export) sweep() {
	defer close(e.done)
	t := time.NewTicker(min(e.o.WriteIdle, e.o.ReadIdle) / 4)
	defer t.Stop()
	for {
		select {
		case <-e.stop:
			return
		case now := <-t.C:
			e.mu.Lock()
			idle := map[string]*openFile{}
			for p, f := range e.files {
				wait := e.o.ReadIdle
				if f.writing {
					wait = e.o.WriteIdle
				}
				if f.users == 0 && now.Sub(f.last) >= wait {
					idle[p] = f
					delete(e.files, p)
				}
			}
			e.mu.Unlock()
			for p, f := range idle {
				if err := e.release(p, f); err != nil {
					// The client was told its writes were safe: say
					// loudly that they were not stored.
					e.o.Log.Error("nfs: storing a file failed; the writes to it are lost", "path", p, "err", err)
				}
			}
		}
	}
}

func (e *Export) release(p string, f *openFile) error {
	ctx := context.Background()
	if err := f.h.Release(ctx); err != nil {
		return fmt.Errorf("store %s: %w", p, err)
	}
	return nil
}

// use returns p's handle for a call, opening it if needed; done1 must
// be called when the call is over. A write call to a file open for
// reading gets a write handle; the read handle ends with its last call.
func (e *Export) use(p string, write bool, open func() (*vfs.Handle, error)) (*openFile, error) {
	e.mu.Lock()
	for {
		if f := e.files[p]; f != nil && (f.writing || !write) {
			f.users++
			e.mu.Unlock()
			return f, nil
		}
		ch := e.opening[p]
		if ch == nil {
			break
		}
		// One open per path at a time: two creates of one new file
		// must not become two handles that both store it.
		e.mu.Unlock()
		<-ch
		e.mu.Lock()
	}
	ch := make(chan struct{})
	e.opening[p] = ch
	old := e.files[p] // a read handle, since a write is asked for
	delete(e.files, p)
	e.mu.Unlock()
	if old != nil {
		e.retire(p, old)
	}
	h, err := open()
	e.mu.Lock()
	delete(e.opening, p)
	close(ch)
	var f *openFile
	if err == nil {
		f = &openFile{h: h, writing: write, users: 1}
		e.files[p] = f
	}
	e.mu.Unlock()
	return f, err
}

// done1 ends a call's use of f.
func (e *Export) done1(p string, f *openFile) {
	e.mu.Lock()
	f.users--
	f.last = time.Now()
	last := f.retired && f.users == 0
	e.mu.Unlock()
	if last {
		e.release(p, f)
	}
}

// retire ends f, no longer in the table: now if no call uses it, else
// when the last one is done.
func (e *Export) retire(p string, f *openFile) {
	e.mu.Lock()
	f.retired = true
	now := f.users == 0
	e.mu.Unlock()
	if now {
		e.release(p, f)
	}
}

// forget drops p's read handle, if any: the file changed under it.
func (e *Export) forget(p string) {
	e.mu.Lock()
	f := e.files[p]
	if f == nil || f.writing {
		e.mu.Unlock()
		return
	}
	delete(e.files, p)
	e.mu.Unlock()
	e.retire(p, f)
}

// moved follows a rename: a handle of src (and of anything under it)
// now belongs to dst.
func (e *Export) moved(src, dst string) {
	e.mu.Lock()
	replaced := e.files[dst] // the file the rename replaced, if open
	delete(e.files, dst)
	for p, f := range e.files {
		if p == src || strings.HasPrefix(p, src+"/") {
			delete(e.files, p)
			e.files[dst+p[len(src):]] = f
		}
	}
	e.mu.Unlock()
	if replaced != nil {
		// Its name is gone: what it had not stored goes with it, as
		// writes to a replaced file do.
		e.retire(dst, replaced)
	}
}

// FS is the export's billy.Filesystem, rooted at a directory of Strata's
// namespace.
type FS struct {
	e    *Export
	root string
}

var (
	_ billy.Filesystem = (*FS)(nil)
	_ billy.Change     = (*FS)(nil)
	_ billy.Capable    = (*FS)(nil)
)

// abs is the Strata path of a name of this file system.
func (f *FS) abs(name string) string {
	return path.Join(f.root, path.Clean("/"+name))
}

// ctx is the context of a call: go-nfs has none to give.
func ctx() context.Context { return context.Background() }

// pathErr wraps err in what billy's callers test (os.IsNotExist, errno).
func pathErr(op, p string, err error) error {
	if err == nil {
		return nil
	}
	return &fs.PathError{Op: op, Path: p, Err: vfs.Errno(err)}
}

// Capabilities implements billy.Capable.
func (f *FS) Capabilities() billy.Capability {
	if f.e.o.ReadOnly {
		return billy.ReadCapability | billy.SeekCapability
	}
	return billy.DefaultCapabilities &^ billy.LockCapability
}

func (f *FS) writable(op, p string) error {
	if f.e.o.ReadOnly {
		return &fs.PathError{Op: op, Path: p, Err: syscall.EROFS}
	}
	return nil
}

// Join implements billy.Basic.
func (f *FS) Join(elem ...string) string { return path.Join(elem...) }

// Create implements billy.Basic: a new, empty file, truncating an
// existing one.
func (f *FS) Create(name string) (billy.File, error) {
	return f.OpenFile(name, os.O_RDWR|os.O_CREATE|os.O_TRUNC, 0o666)
}

// Open implements billy.Basic.
func (f *FS) Open(name string) (billy.File, error) {
	return f.OpenFile(name, os.O_RDONLY, 0)
}

// OpenFile implements billy.Basic. The file returned shares the export's
// handle of the file; closing it ends the call, not the handle.
func (f *FS) OpenFile(name string, flag int, perm os.FileMode) (billy.File, error) {
	p := f.abs(name)
	write := flag&(os.O_WRONLY|os.O_RDWR) != 0 || flag&os.O_TRUNC != 0
	if write {
		if err := f.writable("open", p); err != nil {
			return nil, err
		}
	}
	of, err := f.e.use(p, write, func() (*vfs.Handle, error) {
		if flag&os.O_CREATE != 0 {
			return f.e.v.Create(ctx(), p, os.O_RDWR|flag&(os.O_EXCL|os.O_TRUNC), uint32(perm.Perm()))
		}
		if write {
			return f.e.v.Open(ctx(), p, os.O_RDWR)
		}
		return f.e.v.Open(ctx(), p, os.O_RDONLY)
	})
	if err != nil {
		return nil, pathErr("open", p, err)
	}
	fl := &file{fs: f, of: of, name: name, path: p}
	if flag&os.O_TRUNC != 0 && of.h.Size() > 0 {
		// Created again while a handle of it was open.
		if err := of.h.Truncate(ctx(), 0); err != nil {
			fl.Close()
			return nil, pathErr("open", p, err)
		}
	}
	return fl, nil
}

// Stat implements billy.Basic. A read handle of a file that changed since
// it was opened is dropped, so that a client that sees the new size
// reads the new bytes.
func (f *FS) Stat(name string) (os.FileInfo, error) {
	p := f.abs(name)
	f.e.mu.Lock()
	of := f.e.files[p]
	f.e.mu.Unlock()
	if of != nil && of.writing {
		// The handle's view is the file's until it is stored (go-nfs
		// asks before and after every WRITE: no round trip for those).
		fi := of.h.Info()
		fi.Name = path.Base(p)
		return info{fi}, nil
	}
	fi, err := f.e.v.Stat(ctx(), p)
	if err != nil {
		return nil, pathErr("stat", p, err)
	}
	f.e.mu.Lock()
	of = f.e.files[p]
	stale := of != nil && !of.writing && func() bool {
		base := of.h.Info()
		return base.ID != fi.ID || base.Size != fi.Size || !base.Mtime.Equal(fi.Mtime)
	}()
	f.e.mu.Unlock()
	if stale {
		f.e.forget(p)
	}
	return info{fi}, nil
}

// Lstat implements billy.Symlink (Strata's Stat does not follow links).
func (f *FS) Lstat(name string) (os.FileInfo, error) { return f.Stat(name) }

// Rename implements billy.Basic.
func (f *FS) Rename(from, to string) error {
	src, dst := f.abs(from), f.abs(to)
	if err := f.writable("rename", src); err != nil {
		return err
	}
	f.e.forget(dst)
	if err := f.e.v.Rename(ctx(), src, dst); err != nil {
		return &os.LinkError{Op: "rename", Old: src, New: dst, Err: vfs.Errno(err)}
	}
	f.e.moved(src, dst)
	return nil
}

// Remove implements billy.Basic: a file or an empty directory.
func (f *FS) Remove(name string) error {
	p := f.abs(name)
	if err := f.writable("remove", p); err != nil {
		return err
	}
	fi, err := f.e.v.Stat(ctx(), p)
	if err != nil {
		return pathErr("remove", p, err)
	}
	if fi.Type == client.TypeDir {
		return pathErr("remove", p, f.e.v.Rmdir(ctx(), p))
	}
	if err := f.e.v.Unlink(ctx(), p); err != nil {
		return pathErr("remove", p, err)
	}
	f.e.mu.Lock()
	of := f.e.files[p]
	delete(f.e.files, p)
	f.e.mu.Unlock()
	if of != nil {
		// Unlinked: vfs discards what the handle had not stored.
		f.e.retire(p, of)
	}
	return nil
}

// TempFile implements billy.TempFile.
func (f *FS) TempFile(dir, prefix string) (billy.File, error) {
	name := path.Join(dir, fmt.Sprintf("%s%d", prefix, time.Now().UnixNano()))
	return f.OpenFile(name, os.O_RDWR|os.O_CREATE|os.O_EXCL, 0o600)
}

// ReadDir implements billy.Dir.
func (f *FS) ReadDir(name string) ([]os.FileInfo, error) {
	p := f.abs(name)
	var out []os.FileInfo
	err := f.e.v.List(ctx(), p, func(page []client.FileInfo) error {
		for i := range page {
			fi := page[i]
			f.e.v.Overlay(vfs.Join(p, fi.Name), &fi)
			out = append(out, info{&fi})
		}
		return nil
	})
	if err != nil {
		return nil, pathErr("readdir", p, err)
	}
	return out, nil
}

// MkdirAll implements billy.Dir.
func (f *FS) MkdirAll(name string, perm os.FileMode) error {
	p := f.abs(name)
	if err := f.writable("mkdir", p); err != nil {
		return err
	}
	if p == "/" {
		return nil
	}
	if fi, err := f.e.v.Stat(ctx(), p); err == nil {
		if fi.Type != client.TypeDir {
			return pathErr("mkdir", p, syscall.ENOTDIR)
		}
		return nil
	}
	if err := f.MkdirAll(strings.TrimPrefix(path.Dir(p), f.root), perm); err != nil {
		return err
	}
	if _, err := f.e.v.Mkdir(ctx(), p, uint32(perm.Perm())); err != nil && !errors.Is(err, client.ErrExist) {
		return pathErr("mkdir", p, err)
	}
	return nil
}

// Symlink implements billy.Symlink.
func (f *FS) Symlink(target, link string) error {
	p := f.abs(link)
	if err := f.writable("symlink", p); err != nil {
		return err
	}
	_, err := f.e.v.Symlink(ctx(), p, target)
	return pathErr("symlink", p, err)
}

// Readlink implements billy.Symlink.
func (f *FS) Readlink(link string) (string, error) {
	p := f.abs(link)
	t, err := f.e.v.Readlink(ctx(), p)
	return t, pathErr("readlink", p, err)
}

// Chroot implements billy.Chroot.
func (f *FS) Chroot(p string) (billy.Filesystem, error) {
	return &FS{e: f.e, root: f.abs(p)}, nil
}

// Root implements billy.Chroot.
func (f *FS) Root() string { return f.root }

func (f *FS) setAttr(op, name string, r client.SetAttr) error {
	r.Path = f.abs(name)
	if err := f.writable(op, r.Path); err != nil {
		return err
	}
	_, err := f.e.v.SetAttr(ctx(), r)
	return pathErr(op, r.Path, err)
}

// Chmod implements billy.Change.
func (f *FS) Chmod(name string, mode os.FileMode) error {
	m := uint32(mode.Perm())
	if mode&os.ModeSetuid != 0 {
		m |= syscall.S_ISUID
	}
	if mode&os.ModeSetgid != 0 {
		m |= syscall.S_ISGID
	}
	if mode&os.ModeSticky != 0 {
		m |= syscall.S_ISVTX
	}
	return f.setAttr("chmod", name, client.SetAttr{Mode: &m})
}

// Lchown implements billy.Change.
func (f *FS) Lchown(name string, uid, gid int) error {
	u, g := uint32(uid), uint32(gid)
	return f.setAttr("chown", name, client.SetAttr{UID: &u, GID: &g})
}

// Chown implements billy.Change.
func (f *FS) Chown(name string, uid, gid int) error { return f.Lchown(name, uid, gid) }

// Chtimes implements billy.Change.
func (f *FS) Chtimes(name string, atime, mtime time.Time) error {
	return f.setAttr("chtimes", name, client.SetAttr{Atime: &atime, Mtime: &mtime})
}

// file is one call's view of a shared handle: its own offset.
type file struct {
	fs     *FS
	of     *openFile
	name   string
	path   string
	off    int64
	closed bool
}

var _ billy.File = (*file)(nil)

func (f *file) Name() string { return f.name }

func (f *file) Write(p []byte) (int, error) {
	n, err := f.of.h.WriteAt(ctx(), p, f.off)
	f.off += int64(n)
	return n, pathErr("write", f.path, err)
}

func (f *file) Read(p []byte) (int, error) {
	n, err := f.ReadAt(p, f.off)
	f.off += int64(n)
	return n, err
}

func (f *file) ReadAt(p []byte, off int64) (int, error) {
	n, err := f.of.h.ReadAt(ctx(), p, off)
	if err == io.EOF {
		return n, err
	}
	return n, pathErr("read", f.path, err)
}

func (f *file) Seek(off int64, whence int) (int64, error) {
	switch whence {
	case io.SeekStart:
	case io.SeekCurrent:
		off += f.off
	case io.SeekEnd:
		off += f.of.h.Size()
	default:
		return 0, pathErr("seek", f.path, syscall.EINVAL)
	}
	if off < 0 {
		return 0, pathErr("seek", f.path, syscall.EINVAL)
	}
	f.off = off
	return off, nil
}

func (f *file) Truncate(size int64) error {
	return pathErr("truncate", f.path, f.of.h.Truncate(ctx(), size))
}

// Close ends the call; the handle stays for the next one.
func (f *file) Close() error {
	if !f.closed {
		f.closed = true
		f.fs.e.done1(f.path, f.of)
	}
	return nil
}

func (f *file) Lock() error   { return nil }
func (f *file) Unlock() error { return nil }

// info is a Strata entry as an os.FileInfo; Sys carries what go-nfs reads
// beyond it (owner, inode number).
type info struct{ fi *client.FileInfo }

func (i info) Name() string       { return i.fi.Name }
func (i info) Size() int64        { return i.fi.Size }
func (i info) ModTime() time.Time { return i.fi.Mtime }
func (i info) IsDir() bool        { return i.fi.Type == client.TypeDir }
func (i info) Mode() os.FileMode {
	m := os.FileMode(i.fi.Mode & 0o777)
	switch i.fi.Type {
	case client.TypeDir:
		m |= os.ModeDir
	case client.TypeSymlink:
		m |= os.ModeSymlink
	}
	if i.fi.Mode&syscall.S_ISUID != 0 {
		m |= os.ModeSetuid
	}
	if i.fi.Mode&syscall.S_ISGID != 0 {
		m |= os.ModeSetgid
	}
	if i.fi.Mode&syscall.S_ISVTX != 0 {
		m |= os.ModeSticky
	}
	return m
}
func (i info) Sys() any {
	return nfsfile.FileInfo{Nlink: 1, UID: i.fi.UID, GID: i.fi.GID, Fileid: uint64(i.fi.ID)}
}

// handler answers MOUNT and FSSTAT; file handles are the caching
// handler's that wraps it.
type handler struct{ e *Export }

func (h *handler) Mount(_ context.Context, _ net.Conn, req nfs.MountRequest) (nfs.MountStatus, billy.Filesystem, []nfs.AuthFlavor) {
	p := path.Clean("/" + string(req.Dirpath))
	fi, err := h.e.v.Stat(ctx(), p)
	switch {
	case err != nil && errors.Is(err, client.ErrNotFound):
		return nfs.MountStatusErrNoEnt, nil, nil
	case err != nil:
		return nfs.MountStatusErrAcces, nil, nil
	case fi.Type != client.TypeDir:
		return nfs.MountStatusErrNotDir, nil, nil
	}
	h.e.o.Log.Info("nfs: mounted", "path", p)
	return nfs.MountStatusOk, &FS{e: h.e, root: p}, []nfs.AuthFlavor{nfs.AuthFlavorNull}
}

func (h *handler) Change(f billy.Filesystem) billy.Change {
	if c, ok := f.(billy.Change); ok && !h.e.o.ReadOnly {
		return c
	}
	return nil
}

func (h *handler) FSStat(_ context.Context, _ billy.Filesystem, s *nfs.FSStat) error {
	total, free, err := h.e.v.StatFS(ctx())
	if err != nil {
		return err
	}
	s.TotalSize, s.FreeSize, s.AvailableSize = total, free, free
	s.TotalFiles, s.FreeFiles, s.AvailableFiles = 1<<40, 1<<40, 1<<40
	return nil
}

// The caching handler that wraps this one answers these.
func (h *handler) ToHandle(billy.Filesystem, []string) []byte { return nil }
func (h *handler) FromHandle([]byte) (billy.Filesystem, []string, error) {
	return nil, nil, errors.New("nfsfs: handles are the caching handler's")
}
func (h *handler) InvalidateHandle(billy.Filesystem, []byte) error { return nil }
func (h *handler) HandleLimit() int                                { return h.e.o.Handles }

// allowListener closes connections from addresses not in Options.Allow.
type allowListener struct {
	net.Listener
	e *Export
}

func (l *allowListener) Accept() (net.Conn, error) {
	for {
		c, err := l.Listener.Accept()
		if err != nil {
			return nil, err
		}
		ap, perr := netip.ParseAddrPort(c.RemoteAddr().String())
		switch {
		case perr != nil || !l.e.allowed(ap.Addr().Unmap()):
			l.e.o.Log.Warn("nfs: connection refused: address not allowed", "from", c.RemoteAddr().String())
		case ap.Port() >= 1024 && !l.e.o.Insecure:
			l.e.o.Log.Warn("nfs: connection refused: unprivileged source port (the client is not root; --insecure allows it)", "from", c.RemoteAddr().String())
		default:
			return c, nil
		}
		c.Close()
	}
}

func (e *Export) allowed(a netip.Addr) bool {
	for _, p := range e.o.Allow {
		if p.Contains(a) {
			return true
		}
	}
	return false
}
