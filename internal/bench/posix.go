package bench

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"unsafe"

	"golang.org/x/sys/unix"
)

// posix is any mounted file system, through the system calls a program
// would use: buffered I/O made durable by fsync inside the timed region,
// or O_DIRECT.
type posix struct {
	root   string
	direct bool
	fsType string
	local  bool // localFS(), asked once
}

func openPosix(root string, o Options) (*posix, error) {
	if root == "" {
		return nil, errors.New("target posix: needs a directory (posix:PATH)")
	}
	abs, err := filepath.Abs(root)
	if err != nil {
		return nil, fmt.Errorf("target posix:%s: %w", root, err)
	}
	if err := os.MkdirAll(abs, 0o755); err != nil {
		return nil, fmt.Errorf("target posix:%s: %w", root, err)
	}
	var st unix.Statfs_t
	if err := unix.Statfs(abs, &st); err != nil {
		return nil, fmt.Errorf("target posix:%s: %w", root, err)
	}
	t := &posix{root: abs, direct: o.Direct, fsType: fsTypeName(int64(st.Type))}
	t.local = t.localFS()
	return t, nil
}

// localFS says whether the target is a local file system, whose stat
// returns in microseconds: only there may a call skip the Go scheduler's
// hand-off (rawLstat). A stat on NFS, FUSE (Strata's own mount) or a
// cluster file system can block for as long as the server takes.
func (t *posix) localFS() bool {
	switch t.fsType {
	case "ext4", "tmpfs", "xfs", "btrfs":
		return true
	}
	return false
}

// fsTypeName names the common statfs magic numbers.
func fsTypeName(magic int64) string {
	switch magic {
	case 0xEF53:
		return "ext4"
	case 0x01021994:
		return "tmpfs"
	case 0x58465342:
		return "xfs"
	case 0x9123683E:
		return "btrfs"
	case 0x6969:
		return "nfs"
	case 0x65735546:
		return "fuse"
	case 0x794c7630:
		return "overlayfs"
	case 0x2fc12fc1:
		return "zfs"
	case 0x0BD00BD0:
		return "lustre"
	case 0x47504653:
		return "gpfs"
	}
	return fmt.Sprintf("0x%x", magic)
}

func (t *posix) String() string { return "posix:" + t.root }

func (t *posix) Describe(ctx context.Context) TargetInfo {
	ti := TargetInfo{Spec: t.String(), Kind: "posix", FSType: t.fsType, Path: t.root, Direct: t.direct,
		Durability: "fsync before close, inside the timed region", Cache: cacheMethod(),
		MetaDurability: "none: created files are not fsynced (as mdtest without -y)"}
	if t.direct {
		ti.Durability = "O_DIRECT writes (4 KiB-aligned; an unaligned tail is written buffered), fsync before close"
	}
	return ti
}

// cacheMethod is how DropCache empties caches here.
func cacheMethod() string {
	if os.Geteuid() == 0 {
		return "sync + drop_caches (host-wide) before each read phase"
	}
	return "posix_fadvise(DONTNEED) of each file before each read phase (not root: cannot drop caches)"
}

// abs is p under the root. Scenario paths are clean and slash-separated,
// so a concatenation does (filepath.Join's cleaning costs a metadata
// benchmark a tenth of a create).
func (t *posix) abs(p string) string { return t.root + "/" + strings.TrimPrefix(p, "/") }

func (t *posix) Mkdir(ctx context.Context, p string) error { return os.MkdirAll(t.abs(p), 0o755) }

const directAlign = 4096

func (t *posix) openFlags() int {
	if t.direct {
		return unix.O_DIRECT
	}
	return 0
}

func (t *posix) Create(ctx context.Context, p string, size int64, stripes int) (Writer, error) {
	f, err := os.OpenFile(t.abs(p), os.O_CREATE|os.O_TRUNC|os.O_WRONLY|t.openFlags(), 0o644)
	if err != nil {
		return nil, err
	}
	return &posixWriter{f: f, direct: t.direct, pos: func(n int64) int64 { return n }}, nil
}

// posixWriter writes a stream of bytes at the offsets pos maps it to.
// With O_DIRECT the bytes go through an aligned staging buffer, whole
// blocks at a time.
type posixWriter struct {
	f      *os.File
	direct bool
	pos    func(n int64) int64 // stream offset → file offset
	block  int64               // shared parts: the bytes that are contiguous in the file
	n      int64               // stream bytes written
	stage  []byte
	staged int
}

func (w *posixWriter) Write(p []byte) (int, error) {
	if w.direct {
		return w.writeDirect(p)
	}
	done := 0
	for done < len(p) {
		m := len(p) - done
		if w.block > 0 {
			m = int(min(int64(m), w.block-w.n%w.block))
		}
		k, err := w.f.WriteAt(p[done:done+m], w.pos(w.n))
		done += k
		w.n += int64(k)
		if err != nil {
			return done, err
		}
	}
	return done, nil
}

func (w *posixWriter) writeDirect(p []byte) (int, error) {
	if w.stage == nil {
		w.stage = alignedBuf(1 << 20)
	}
	done := 0
	for done < len(p) {
		c := copy(w.stage[w.staged:], p[done:])
		w.staged += c
		done += c
		if w.staged == len(w.stage) {
			if err := w.flushStage(); err != nil {
				return done, err
			}
		}
	}
	return done, nil
}

// flushStage writes the staged bytes: whole blocks directly, a tail (only
// at close) through a descriptor without O_DIRECT.
func (w *posixWriter) flushStage() error {
	buf := w.stage[:w.staged]
	for len(buf) > 0 {
		m := int64(len(buf))
		if w.block > 0 {
			m = min(m, w.block-w.n%w.block)
		}
		off := w.pos(w.n)
		if m%directAlign != 0 || off%directAlign != 0 {
			if err := setDirect(w.f, false); err != nil {
				return err
			}
		}
		k, err := w.f.WriteAt(buf[:m], off)
		w.n += int64(k)
		if err != nil {
			return err
		}
		buf = buf[k:]
	}
	w.staged = 0
	return nil
}

func setDirect(f *os.File, on bool) error {
	fl, err := unix.FcntlInt(f.Fd(), unix.F_GETFL, 0)
	if err != nil {
		return err
	}
	if on {
		fl |= unix.O_DIRECT
	} else {
		fl &^= unix.O_DIRECT
	}
	_, err = unix.FcntlInt(f.Fd(), unix.F_SETFL, fl)
	return err
}

func (w *posixWriter) Close() error {
	if w.direct && w.staged > 0 {
		if err := w.flushStage(); err != nil {
			w.f.Close()
			return err
		}
	}
	if err := w.f.Sync(); err != nil {
		w.f.Close()
		return err
	}
	return w.f.Close()
}

func (w *posixWriter) Abort() { w.f.Close() }

// alignedBuf returns n bytes aligned for O_DIRECT.
func alignedBuf(n int) []byte {
	b := make([]byte, n+directAlign)
	shift := int(uintptr(unsafe.Pointer(&b[0])) & (directAlign - 1))
	if shift != 0 {
		shift = directAlign - shift
	}
	return b[shift : shift+n : shift+n]
}

type posixShared struct {
	t       *posix
	path    string
	writers int
	block   int64
}

func (t *posix) CreateShared(ctx context.Context, p string, size int64, writers int, block int64) (Shared, error) {
	f, err := os.OpenFile(t.abs(p), os.O_CREATE|os.O_TRUNC|os.O_WRONLY, 0o644)
	if err != nil {
		return nil, err
	}
	f.Close()
	return t.JoinShared(p, writers, block), nil
}

// JoinShared is the shared file p as another process sees it: each part
// opens it by name.
func (t *posix) JoinShared(p string, writers int, block int64) Shared {
	return &posixShared{t: t, path: t.abs(p), writers: writers, block: block}
}

// Part opens the file again for writer k, as each rank of an MPI job does.
func (s *posixShared) Part(k int) (Writer, error) {
	f, err := os.OpenFile(s.path, os.O_WRONLY|s.t.openFlags(), 0)
	if err != nil {
		return nil, err
	}
	w, b := int64(s.writers), s.block
	return &posixWriter{f: f, direct: s.t.direct, block: b, pos: func(n int64) int64 {
		i := n / b
		return (i*w+int64(k))*b + n%b
	}}, nil
}

func (s *posixShared) Close() error { return nil }
func (s *posixShared) Abort()       {}

type posixReader struct {
	f      *os.File
	fd     int
	direct bool
	raw    bool // local file system: small preads without the scheduler hand-off
}

func (t *posix) Open(ctx context.Context, p string) (Reader, error) {
	f, err := os.OpenFile(t.abs(p), os.O_RDONLY|t.openFlags(), 0)
	if err != nil {
		return nil, err
	}
	return &posixReader{f: f, fd: int(f.Fd()), direct: t.direct, raw: t.local}, nil
}

var bouncePool = sync.Pool{New: func() any { b := alignedBuf(1 << 20); return &b }}

// ReadAt reads through an aligned bounce buffer with O_DIRECT; the copy is
// part of the cost of O_DIRECT from unaligned application buffers.
func (r *posixReader) ReadAt(p []byte, off int64) (int, error) {
	if !r.direct {
		return readAt(r.fd, r.raw, p, off)
	}
	done := 0
	bp := bouncePool.Get().(*[]byte)
	defer bouncePool.Put(bp)
	b := *bp
	for done < len(p) {
		pos := off + int64(done)
		a := pos &^ (directAlign - 1)
		want := min(int64(len(b)), (pos-a+int64(len(p)-done)+directAlign-1)&^(directAlign-1))
		k, err := r.f.ReadAt(b[:want], a)
		skip := int(pos - a)
		if k > skip {
			done += copy(p[done:], b[skip:k])
		}
		if err != nil || k < int(want) {
			if done < len(p) {
				if err == nil {
					err = errShort
				}
				return done, err
			}
		}
	}
	return done, nil
}

var errShort = errors.New("short read")

func (r *posixReader) Close() error { return r.f.Close() }

// posixRW and posixReader call pread and pwrite directly: os.File's
// locking and poller bookkeeping cost a fifth of a 4 KiB read from the page
// cache, which fio does not pay either.
type posixRW struct {
	f   *os.File
	fd  int
	raw bool // local file system: pwrite without the scheduler hand-off
}

func (t *posix) OpenRW(ctx context.Context, p string) (ReadWriter, error) {
	f, err := os.OpenFile(t.abs(p), os.O_RDWR|t.openFlags(), 0)
	if err != nil {
		return nil, err
	}
	return posixRW{f, int(f.Fd()), t.local}, nil
}

func (rw posixRW) ReadAt(p []byte, off int64) (int, error) { return readAt(rw.fd, rw.raw, p, off) }

// rawReadMax is the largest read made as a raw system call: small reads
// from the page cache, where the scheduler hand-off is a tenth of the
// call. Larger ones (which may wait on the device for longer) keep it.
const rawReadMax = 64 << 10

func readAt(fd int, raw bool, p []byte, off int64) (int, error) {
	if raw && len(p) <= rawReadMax {
		return preadWith(rawPread, fd, p, off)
	}
	return preadWith(unix.Pread, fd, p, off)
}
func (rw posixRW) WriteAt(p []byte, off int64) (int, error) {
	pwrite := unix.Pwrite
	if rw.raw {
		pwrite = rawPwrite
	}
	n, err := pwrite(rw.fd, p, off)
	if err == nil && n < len(p) {
		err = errShort
	}
	return n, err
}

// preadWith reads len(p) bytes at off with pread, as io.ReaderAt.
func preadWith(pread func(int, []byte, int64) (int, error), fd int, p []byte, off int64) (int, error) {
	done := 0
	for done < len(p) {
		n, err := pread(fd, p[done:], off+int64(done))
		if err == unix.EINTR {
			continue
		}
		if err != nil {
			return done, err
		}
		if n == 0 {
			return done, io.EOF
		}
		done += n
	}
	return done, nil
}
func (rw posixRW) Close() error {
	if err := rw.f.Sync(); err != nil {
		rw.f.Close()
		return err
	}
	return rw.f.Close()
}

// Touch is open(O_CREAT|O_EXCL), a write when data is given, close — the
// system calls mdtest makes, without os.File's poller registration (a
// failed epoll_ctl per regular file) and allocation.
func (t *posix) Touch(ctx context.Context, p string, data []byte) error {
	fd, err := unix.Open(t.abs(p), unix.O_CREAT|unix.O_EXCL|unix.O_WRONLY|unix.O_CLOEXEC, 0o644)
	if err != nil {
		return &os.PathError{Op: "create", Path: p, Err: err}
	}
	if len(data) > 0 {
		if n, err := unix.Write(fd, data); err != nil || n < len(data) {
			unix.Close(fd)
			if err == nil {
				err = errShort
			}
			return &os.PathError{Op: "write", Path: p, Err: err}
		}
	}
	if err := unix.Close(fd); err != nil {
		return &os.PathError{Op: "close", Path: p, Err: err}
	}
	return nil
}

// Remove unlinks a file (os.Remove tries rmdir too when unlink fails).
func (t *posix) Remove(ctx context.Context, p string) error {
	var err error
	if t.local {
		err = rawUnlink(t.root, strings.TrimPrefix(p, "/"))
	} else {
		err = unix.Unlink(t.abs(p))
	}
	if err != nil {
		return &os.PathError{Op: "unlink", Path: p, Err: err}
	}
	return nil
}

// Stat calls lstat without building an os.FileInfo: a metadata benchmark
// should spend its time in the file system, not in allocation.
func (t *posix) Stat(ctx context.Context, p string) error {
	var st unix.Stat_t // on the stack: called directly, not through a func value
	var err error
	if t.local {
		err = rawLstat(t.root, strings.TrimPrefix(p, "/"), &st)
	} else {
		err = unix.Lstat(t.abs(p), &st)
	}
	if err != nil {
		return &os.PathError{Op: "lstat", Path: p, Err: err}
	}
	return nil
}

func (t *posix) ReadDir(ctx context.Context, p string) ([]DirEntry, error) {
	es, err := os.ReadDir(t.abs(p))
	if err != nil {
		return nil, err
	}
	out := make([]DirEntry, len(es))
	for i, e := range es {
		out[i] = DirEntry{Name: e.Name(), IsDir: e.IsDir()}
	}
	return out, nil
}

func (t *posix) RemoveAll(ctx context.Context, p string) error { return os.RemoveAll(t.abs(p)) }

func (t *posix) DropCache(ctx context.Context, p string) string {
	if dropCaches() == nil {
		return "drop_caches"
	}
	filepath.Walk(t.abs(p), func(path string, info os.FileInfo, err error) error {
		if err == nil && info.Mode().IsRegular() {
			if f, err := os.Open(path); err == nil {
				unix.Fadvise(int(f.Fd()), 0, 0, unix.FADV_DONTNEED)
				f.Close()
			}
		}
		return nil
	})
	return "fadvise"
}

// dropCaches writes back and drops the host's page cache, dentries and
// inodes (root only).
func dropCaches() error {
	if os.Geteuid() != 0 {
		return os.ErrPermission
	}
	unix.Sync()
	return os.WriteFile("/proc/sys/vm/drop_caches", []byte("3\n"), 0)
}

func (t *posix) Close() error { return nil }
