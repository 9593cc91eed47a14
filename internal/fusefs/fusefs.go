// Package fusefs is `strata mount`: Strata's namespace as a local file
// system through the kernel's FUSE, with github.com/hanwen/go-fuse/v2's fs
// API. It is a thin adapter: every operation is one call into internal/vfs
// (which the NFS export shares), and this package only translates FUSE's
// inodes, attributes and errnos, and tells the kernel which descriptors
// bypass its page cache (openFlags).
//
// Permissions are the server's: the mount does not ask the kernel to check
// modes (no default_permissions), so every operation reaches the core,
// which checks it for the identity the mount authenticated as — or, on a
// gateway mount (Options.AllowOther, run by an administrator), for each
// caller the kernel names, whom the mount asks the core to act for.
package fusefs

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/hanwen/go-fuse/v2/fs"
	"github.com/hanwen/go-fuse/v2/fuse"
	"golang.org/x/sys/unix"

	"github.com/strata-storage/strata/client"
	"github.com/strata-storage/strata/internal/auth"
	"github.com/strata-storage/strata/internal/vfs"
)

// Options configure a mount.
type Options struct {
	// AllowOther lets users other than the one who mounted use the mount
	// (FUSE's allow_other), each acting as themselves: the mount is then
	// a gateway, which the server trusts only from an administrator.
	AllowOther bool
	// NoRootSquash lets the host's root act as root through a gateway
	// mount (by default it acts as nobody, 65534, as NFS squashes it).
	NoRootSquash bool
	// AttrTimeout is how long the kernel may keep attributes and names
	// without asking again: the staleness another client's change may
	// have here (0: none; strata mount's default is 1 s).
	AttrTimeout time.Duration
	// Debug logs every FUSE request.
	Debug bool
}

// Mount mounts v at dir and returns the server; Wait on it, Unmount it.
func Mount(dir string, v *vfs.FS, o Options) (*fuse.Server, error) {
	neg := o.AttrTimeout
	root := &node{fs: v, ttl: o.AttrTimeout}
	if o.AllowOther {
		root.gw = &gateway{squash: !o.NoRootSquash, groups: map[uint32]groupsAt{}}
	}
	opts := &fs.Options{
		EntryTimeout:    &o.AttrTimeout,
		AttrTimeout:     &o.AttrTimeout,
		NegativeTimeout: &neg,
		// Mode 0 is a mode (chmod 0), not "unset": go-fuse would show
		// it as 0644.
		NullPermissions: true,
		MountOptions: fuse.MountOptions{
			FsName:     "strata",
			Name:       "strata",
			AllowOther: o.AllowOther,
			// Large requests: a stripe frame is 1 MiB, and every FUSE
			// request is a round trip into this process.
			MaxWrite:     1 << 20,
			MaxReadAhead: 1 << 20,
			// Shared mappings of files read past the page cache
			// (see openFlags), as kernels since 6.6 allow.
			ExtraCapabilities: fuse.CAP_DIRECT_IO_ALLOW_MMAP,
			Debug:             o.Debug,
		},
	}
	srv, err := fs.Mount(dir, root, opts)
	if err == nil {
		raiseReadAhead(dir, opts.MaxReadAhead)
	}
	return srv, err
}

// raiseReadAhead sets the kernel's read-ahead for the mount to n bytes.
// The kernel takes the smaller of what the mount offers and its default
// for the device, 128 KiB: each read of a file read in order then costs a
// round trip into this process per 128 KiB. Raising it to 1 MiB read 1.73
// GB/s where 128 KiB read 1.45 (see docs/PERFORMANCE.md). Only root may
// write /sys; for others it stays as it was.
func raiseReadAhead(dir string, n int) {
	fi, err := os.Stat(dir)
	if err != nil {
		return
	}
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !ok {
		return
	}
	p := fmt.Sprintf("/sys/class/bdi/%d:%d/read_ahead_kb", unix.Major(st.Dev), unix.Minor(st.Dev))
	os.WriteFile(p, []byte(strconv.Itoa(n>>10)), 0)
}

// node is a file, directory or symbolic link of the mount.
type node struct {
	fs.Inode
	fs  *vfs.FS
	ttl time.Duration // the mount's attribute timeout
	gw  *gateway      // set when the mount acts for each caller

	// listed holds a directory's entries from its last Readdir, for a
	// short while: the kernel's READDIRPLUS asks for each entry's
	// attributes next, one lookup per entry, which the listing already
	// answered (ls -l of 10,000 entries: 10,000 stats saved).
	mu       sync.Mutex
	listed   map[string]*client.FileInfo
	listedAt time.Time
	// info is the node's attributes as last seen (Lookup, Getattr,
	// Mkdir): a create in a directory checks its permissions with them
	// while they are younger than the attribute timeout.
	info   *client.FileInfo
	infoAt time.Time
}

// remember keeps fi as the node's attributes.
func (n *node) remember(fi *client.FileInfo) {
	n.mu.Lock()
	n.info, n.infoAt = fi, time.Now()
	n.mu.Unlock()
}

// recent is the node's attributes if they are younger than the
// attribute timeout (and a second), else nil.
func (n *node) recent() *client.FileInfo {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.info == nil || time.Since(n.infoAt) > min(n.ttl, time.Second) {
		return nil
	}
	return n.info
}

// maxListed bounds the entries a directory keeps from its listing.
const maxListed = 50_000

// fromListing takes name's attributes from the directory's last listing,
// if it is younger than the mount's attribute timeout (and a second).
func (n *node) fromListing(name string) *client.FileInfo {
	n.mu.Lock()
	defer n.mu.Unlock()
	fi := n.listed[name]
	if fi == nil || time.Since(n.listedAt) > min(n.ttl, time.Second) {
		return nil
	}
	delete(n.listed, name)
	return fi
}

var (
	_ fs.NodeLookuper   = (*node)(nil)
	_ fs.NodeGetattrer  = (*node)(nil)
	_ fs.NodeSetattrer  = (*node)(nil)
	_ fs.NodeReaddirer  = (*node)(nil)
	_ fs.NodeMkdirer    = (*node)(nil)
	_ fs.NodeCreater    = (*node)(nil)
	_ fs.NodeOpener     = (*node)(nil)
	_ fs.NodeUnlinker   = (*node)(nil)
	_ fs.NodeRmdirer    = (*node)(nil)
	_ fs.NodeRenamer    = (*node)(nil)
	_ fs.NodeStatfser   = (*node)(nil)
	_ fs.NodeLinker     = (*node)(nil)
	_ fs.NodeMknoder    = (*node)(nil)
	_ fs.NodeSymlinker  = (*node)(nil)
	_ fs.NodeReadlinker = (*node)(nil)
	_ fs.NodeOpendirer  = (*node)(nil)
	_ fs.NodeAccesser   = (*node)(nil)
)

// Opendir checks read permission: opendir(2) of a directory the caller
// may not read fails there, as on a local file system, not at the listing.
func (n *node) Opendir(ctx context.Context) syscall.Errno { return n.may(ctx, auth.Read) }

// Access answers access(2) with the server's rule (its R_OK, W_OK and X_OK
// are the permission bits).
func (n *node) Access(ctx context.Context, mask uint32) syscall.Errno {
	return n.may(ctx, mask&(auth.Read|auth.Write|auth.Exec))
}

// may checks that the request's caller has the permission bits want on n.
func (n *node) may(ctx context.Context, want uint32) syscall.Errno {
	ctx = n.req(ctx)
	p, en := n.path()
	if en != 0 {
		return en
	}
	return errno(n.fs.Access(ctx, p, want))
}

// path is the node's path in Strata's namespace. A node that has lost
// its name (replaced by a rename, removed) while the kernel still holds
// it has none: ESTALE, on which the kernel looks the path up again.
func (n *node) path() (string, syscall.Errno) {
	var names []string
	for p := &n.Inode; !p.IsRoot(); {
		name, parent := p.Parent()
		if parent == nil {
			return "", syscall.ESTALE
		}
		names = append(names, name)
		p = parent
	}
	slices.Reverse(names)
	return "/" + strings.Join(names, "/"), 0
}

func (n *node) child(name string) (string, syscall.Errno) {
	p, en := n.path()
	return vfs.Join(p, name), en
}

// fill sets a FUSE attribute from Strata's.
func fill(fi *client.FileInfo, a *fuse.Attr) {
	a.Mode = typeOf(fi) | fi.Mode&0o7777
	a.Ino = uint64(fi.ID)
	a.Size = uint64(fi.Size)
	a.Blocks = (a.Size + 511) / 512
	a.Blksize = 1 << 20
	a.Nlink = 1
	if fi.Type == client.TypeDir {
		a.Nlink = 2
	}
	a.Uid, a.Gid = fi.UID, fi.GID
	a.SetTimes(&fi.Atime, &fi.Mtime, &fi.Ctime)
}

func typeOf(fi *client.FileInfo) uint32 {
	switch fi.Type {
	case client.TypeDir:
		return syscall.S_IFDIR
	case client.TypeSymlink:
		return syscall.S_IFLNK
	}
	return syscall.S_IFREG
}

// newChild makes the inode of a looked-up or created entry.
func (n *node) newChild(ctx context.Context, fi *client.FileInfo, out *fuse.EntryOut) *fs.Inode {
	ctx = n.req(ctx)
	fill(fi, &out.Attr)
	child := n.NewInode(ctx, &node{fs: n.fs, ttl: n.ttl, gw: n.gw}, fs.StableAttr{Mode: typeOf(fi), Ino: uint64(fi.ID)})
	if c, ok := child.Operations().(*node); ok && fi.Type == client.TypeDir {
		c.remember(fi)
	}
	return child
}

// errno is err's errno. An EIO tells the program nothing: what it stands
// for is said on the mount's stderr as well, where its user (or a log)
// can read it.
func errno(err error) syscall.Errno {
	en := vfs.Errno(err)
	if en == syscall.EIO && err != syscall.EIO {
		fmt.Fprintf(os.Stderr, "strata mount: %v\n", err)
	}
	return en
}

// uninterrupted keeps a request's values but not its cancellation. The
// kernel interrupts a FUSE request whenever its caller gets a signal,
// and Go programs get one for every goroutine preemption: a create or a
// close cut off half-way would have happened on the server and still
// fail (mkdir again: EEXIST), and a store cut off would lose the file.
// Only the wait for a recall in Open honours interruption (Ctrl-C).
func uninterrupted(ctx context.Context) context.Context { return context.WithoutCancel(ctx) }

// req is the context of a request on n: uninterrupted, and on a gateway
// mount acting for the caller.
func (n *node) req(ctx context.Context) context.Context { return n.act(uninterrupted(ctx)) }

// act makes ctx act for the request's caller on a gateway mount: the
// kernel's uid and gid, the process's supplementary groups, root
// squashed to nobody unless asked otherwise.
func (n *node) act(ctx context.Context) context.Context {
	c, ok := fuse.FromContext(ctx)
	if n.gw == nil || !ok {
		return ctx
	}
	if c.Uid == 0 && n.gw.squash {
		return client.OnBehalfOf(ctx, nobody, nobody, nil)
	}
	return client.OnBehalfOf(ctx, c.Uid, c.Gid, n.gw.groupsOf(c.Pid))
}

// nobody is the uid and gid root acts as through a squashing gateway.
const nobody = 65534

// gateway remembers callers' supplementary groups, which FUSE does not
// pass: read from /proc/PID/status, kept a few seconds per process.
type gateway struct {
	squash bool
	mu     sync.Mutex
	groups map[uint32]groupsAt
}

type groupsAt struct {
	gs []uint32
	at time.Time
}

func (g *gateway) groupsOf(pid uint32) []uint32 {
	g.mu.Lock()
	e, ok := g.groups[pid]
	g.mu.Unlock()
	if ok && time.Since(e.at) < 2*time.Second {
		return e.gs
	}
	var gs []uint32
	if b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid)); err == nil {
		for _, l := range strings.Split(string(b), "\n") {
			if v, ok := strings.CutPrefix(l, "Groups:"); ok {
				for _, f := range strings.Fields(v) {
					if n, err := strconv.ParseUint(f, 10, 32); err == nil {
						gs = append(gs, uint32(n))
					}
				}
			}
		}
	}
	g.mu.Lock()
	if len(g.groups) > 4096 {
		g.groups = map[uint32]groupsAt{}
	}
	g.groups[pid] = groupsAt{gs, time.Now()}
	g.mu.Unlock()
	return gs
}

func (n *node) Lookup(ctx context.Context, name string, out *fuse.EntryOut) (*fs.Inode, syscall.Errno) {
	ctx = n.req(ctx)
	p, en := n.child(name)
	if en != 0 {
		return nil, en
	}
	if fi := n.fromListing(name); fi != nil {
		n.fs.Overlay(p, fi)
		return n.newChild(ctx, fi, out), 0
	}
	fi, err := n.fs.Stat(ctx, p)
	if err != nil {
		return nil, errno(err)
	}
	return n.newChild(ctx, fi, out), 0
}

func (n *node) Getattr(ctx context.Context, f fs.FileHandle, out *fuse.AttrOut) syscall.Errno {
	ctx = n.req(ctx)
	if h, ok := f.(*handle); ok {
		// fstat(2): the open file, whatever its name is now; one that
		// has no name left has no links.
		fill(h.h.Info(), &out.Attr)
		if _, en := n.path(); en != 0 {
			out.Attr.Nlink = 0
		}
		return 0
	}
	p, en := n.path()
	if en != 0 {
		return en
	}
	fi, err := n.fs.Stat(ctx, p)
	if err != nil {
		return errno(err)
	}
	fill(fi, &out.Attr)
	if fi.Type == client.TypeDir {
		n.remember(fi)
	}
	return 0
}

func (n *node) Setattr(ctx context.Context, f fs.FileHandle, in *fuse.SetAttrIn, out *fuse.AttrOut) syscall.Errno {
	ctx = n.req(ctx)
	p, en := n.path()
	if en != 0 {
		return en
	}
	if size, ok := in.GetSize(); ok {
		var err error
		if h, isH := f.(*handle); isH {
			err = h.h.Truncate(ctx, int64(size))
		} else {
			err = n.fs.Truncate(ctx, p, int64(size))
		}
		if err != nil {
			return errno(err)
		}
	}
	var r client.SetAttr
	r.Path = p
	set := false
	if m, ok := in.GetMode(); ok {
		m &= 0o7777
		if !n.killPriv(ctx, p, f, m) {
			r.Mode, set = &m, true
		}
	}
	if u, ok := in.GetUID(); ok {
		r.UID, set = &u, true
	}
	if g, ok := in.GetGID(); ok {
		r.GID, set = &g, true
	}
	mNow := in.Valid&fuse.FATTR_MTIME == 0 || in.Valid&fuse.FATTR_MTIME_NOW != 0
	aNow := in.Valid&fuse.FATTR_ATIME == 0 || in.Valid&fuse.FATTR_ATIME_NOW != 0
	if in.Valid&(fuse.FATTR_MTIME|fuse.FATTR_ATIME) != 0 && mNow && aNow {
		// touch, utimensat(UTIME_NOW): the server's now, which whoever
		// may write the file may set.
		r.Now, set = true, true
	} else {
		if t, ok := in.GetMTime(); ok {
			r.Mtime, set = &t, true
		}
		if t, ok := in.GetATime(); ok {
			r.Atime, set = &t, true
		}
	}
	if set {
		if _, err := n.fs.SetAttr(ctx, r); err != nil {
			return errno(err)
		}
	}
	return n.Getattr(ctx, f, out)
}

// killPriv recognises the kernel dropping the set-ID bits of a file before
// someone other than its owner writes or truncates it (file_remove_privs:
// go-fuse does not take FUSE's HANDLE_KILLPRIV, so the kernel sends a
// chmod of its own, with no file handle). The server would refuse that
// caller the chmod, and it is needless: the store of the write clears the
// bits (client.PutOptions.Rewrite). So a chmod by a non-owner that only
// clears set-ID bits succeeds here and changes nothing until then.
func (n *node) killPriv(ctx context.Context, p string, f fs.FileHandle, m uint32) bool {
	if m&0o6000 != 0 {
		return false
	}
	var cur *client.FileInfo
	if h, ok := f.(*handle); ok {
		cur = h.h.Info()
	} else if fi, err := n.fs.Stat(ctx, p); err == nil {
		cur = fi
	} else {
		return false
	}
	return cur.Mode&0o6000 != 0 && m == cur.Mode&^0o6000 && !n.fs.Owns(ctx, cur)
}

func (n *node) Readdir(ctx context.Context) (fs.DirStream, syscall.Errno) {
	ctx = n.req(ctx)
	p, en := n.path()
	if en != 0 {
		return nil, en
	}
	entries := []fuse.DirEntry{{Name: ".", Mode: syscall.S_IFDIR}, {Name: "..", Mode: syscall.S_IFDIR}}
	var listed map[string]*client.FileInfo
	if n.ttl > 0 {
		listed = map[string]*client.FileInfo{}
	}
	err := n.fs.List(ctx, p, func(page []client.FileInfo) error {
		for i := range page {
			entries = append(entries, fuse.DirEntry{Name: page[i].Name, Mode: typeOf(&page[i]), Ino: uint64(page[i].ID)})
			if listed != nil && len(listed) < maxListed {
				listed[page[i].Name] = &page[i]
			}
		}
		return nil
	})
	if err != nil {
		return nil, errno(err)
	}
	n.mu.Lock()
	n.listed, n.listedAt = listed, time.Now()
	n.mu.Unlock()
	return fs.NewListDirStream(entries), 0
}

func (n *node) Mkdir(ctx context.Context, name string, mode uint32, out *fuse.EntryOut) (*fs.Inode, syscall.Errno) {
	ctx = n.req(ctx)
	p, en := n.child(name)
	if en != 0 {
		return nil, en
	}
	fi, err := n.fs.Mkdir(ctx, p, mode&0o7777)
	if err != nil {
		return nil, errno(err)
	}
	return n.newChild(ctx, fi, out), 0
}

func (n *node) Create(ctx context.Context, name string, flags uint32, mode uint32, out *fuse.EntryOut) (*fs.Inode, fs.FileHandle, uint32, syscall.Errno) {
	ctx = n.req(ctx)
	p, en := n.child(name)
	if en != 0 {
		return nil, nil, 0, en
	}
	h, err := n.fs.CreateIn(ctx, p, n.recent(), int(flags), mode&0o7777)
	if err != nil {
		return nil, nil, 0, errno(err)
	}
	return n.newChild(ctx, h.Info(), out), newHandle(ctx, h), openFlags(flags, 0), 0
}

func (n *node) Open(ctx context.Context, flags uint32) (fs.FileHandle, uint32, syscall.Errno) {
	ctx = n.act(ctx) // interruptible: the wait for a recall
	p, en := n.path()
	if en != 0 {
		return nil, 0, en
	}
	h, err := n.fs.Open(ctx, p, int(flags))
	if err != nil {
		return nil, 0, errno(err)
	}
	return newHandle(ctx, h), openFlags(flags, h.Size()), 0
}

// directReadMin is the smallest file a read-only descriptor reads past
// the page cache: below it, the kernel's read-ahead answers a small
// file's reads (and the read that finds its end) from one request.
const directReadMin = 1 << 20

// openFlags tells the kernel how to treat a new descriptor of a file of
// size bytes. Write-only descriptors, and read-only ones of files of at
// least directReadMin, bypass the page cache (FOPEN_DIRECT_IO): write(2)
// and read(2) then copy between the program's buffer and this process
// directly, instead of through page cache pages the kernel fills and
// drops. On this project's machines the copies into fresh pages cost more
// than the rest of a streamed transfer together (docs/PERFORMANCE.md:
// streaming 4 GiB through the mount went from 0.4 to 1.1 GB/s writing and
// from 1.3 to 1.8 reading). Nothing is lost: the mount keeps no page cache
// across opens (no FOPEN_KEEP_CACHE), the vfs reads ahead itself, and
// such files may still be mapped (CAP_DIRECT_IO_ALLOW_MMAP). Descriptors
// open for reading and writing keep the cache.
func openFlags(flags uint32, size int64) uint32 {
	switch int(flags) & syscall.O_ACCMODE {
	case syscall.O_WRONLY:
		return fuse.FOPEN_DIRECT_IO
	case syscall.O_RDONLY:
		if size >= directReadMin {
			return fuse.FOPEN_DIRECT_IO
		}
	}
	return 0
}

func (n *node) Unlink(ctx context.Context, name string) syscall.Errno {
	ctx = n.req(ctx)
	p, en := n.child(name)
	if en != 0 {
		return en
	}
	return errno(n.fs.Unlink(ctx, p))
}

func (n *node) Rmdir(ctx context.Context, name string) syscall.Errno {
	ctx = n.req(ctx)
	p, en := n.child(name)
	if en != 0 {
		return en
	}
	return errno(n.fs.Rmdir(ctx, p))
}

func (n *node) Rename(ctx context.Context, name string, newParent fs.InodeEmbedder, newName string, flags uint32) syscall.Errno {
	ctx = n.req(ctx)
	p, en := n.child(name)
	if en != 0 {
		return en
	}
	if flags != 0 {
		// RENAME_NOREPLACE, RENAME_EXCHANGE: not offered atomically.
		return syscall.EINVAL
	}
	np, ok := newParent.(*node)
	if !ok {
		return syscall.EXDEV
	}
	q, en := np.child(newName)
	if en != 0 {
		return en
	}
	return errno(n.fs.Rename(ctx, p, q))
}

func (n *node) Symlink(ctx context.Context, target, name string, out *fuse.EntryOut) (*fs.Inode, syscall.Errno) {
	ctx = n.req(ctx)
	p, en := n.child(name)
	if en != 0 {
		return nil, en
	}
	fi, err := n.fs.Symlink(ctx, p, target)
	if err != nil {
		return nil, errno(err)
	}
	return n.newChild(ctx, fi, out), 0
}

func (n *node) Readlink(ctx context.Context) ([]byte, syscall.Errno) {
	ctx = n.req(ctx)
	p, en := n.path()
	if en != 0 {
		return nil, en
	}
	t, err := n.fs.Readlink(ctx, p)
	if err != nil {
		return nil, errno(err)
	}
	return []byte(t), 0
}

// Link: Strata's namespace is a tree; a file has one name.
func (n *node) Link(ctx context.Context, target fs.InodeEmbedder, name string, out *fuse.EntryOut) (*fs.Inode, syscall.Errno) {
	return nil, syscall.EPERM
}

// Mknod: only regular files (which Create makes), no devices, FIFOs or
// sockets.
func (n *node) Mknod(ctx context.Context, name string, mode uint32, dev uint32, out *fuse.EntryOut) (*fs.Inode, syscall.Errno) {
	return nil, syscall.EPERM
}

func (n *node) Statfs(ctx context.Context, out *fuse.StatfsOut) syscall.Errno {
	ctx = n.req(ctx)
	total, free, err := n.fs.StatFS(ctx)
	if err != nil {
		return errno(err)
	}
	const bs = 1 << 20
	out.Bsize, out.Frsize = bs, bs
	out.Blocks, out.Bfree, out.Bavail = total/bs, free/bs, free/bs
	out.NameLen = 255
	return 0
}

// Extended attributes: see internal/vfs (user.* stored, user.strata.*
// computed, other namespaces unsupported). A zero-length buffer asks
// for the size; a short one gets ERANGE.
func (n *node) Getxattr(ctx context.Context, attr string, dest []byte) (uint32, syscall.Errno) {
	ctx = n.req(ctx)
	p, en := n.path()
	if en != 0 {
		return 0, en
	}
	v, err := n.fs.Getxattr(ctx, p, attr)
	if err != nil {
		return 0, errno(err)
	}
	return fitInto(dest, v)
}

func (n *node) Listxattr(ctx context.Context, dest []byte) (uint32, syscall.Errno) {
	ctx = n.req(ctx)
	p, en := n.path()
	if en != 0 {
		return 0, en
	}
	names, err := n.fs.Listxattr(ctx, p)
	if err != nil {
		return 0, errno(err)
	}
	var b []byte
	for _, name := range names {
		b = append(append(b, name...), 0)
	}
	return fitInto(dest, b)
}

func (n *node) Setxattr(ctx context.Context, attr string, data []byte, flags uint32) syscall.Errno {
	ctx = n.req(ctx)
	p, en := n.path()
	if en != 0 {
		return en
	}
	return errno(n.fs.Setxattr(ctx, p, attr, data, flags))
}

func (n *node) Removexattr(ctx context.Context, attr string) syscall.Errno {
	ctx = n.req(ctx)
	p, en := n.path()
	if en != 0 {
		return en
	}
	return errno(n.fs.Removexattr(ctx, p, attr))
}

// fitInto answers a getxattr/listxattr: the size for an empty buffer,
// ERANGE for one too small.
func fitInto(dest, v []byte) (uint32, syscall.Errno) {
	if len(dest) == 0 {
		return uint32(len(v)), 0
	}
	if len(dest) < len(v) {
		return uint32(len(v)), syscall.ERANGE
	}
	return uint32(copy(dest, v)), 0
}

// handle is an open file.
type handle struct {
	h *vfs.Handle
	// opener is the process that opened it (its thread group), or 0.
	opener int
}

func newHandle(ctx context.Context, h *vfs.Handle) *handle {
	return &handle{h: h, opener: processOf(ctx)}
}

// processOf is the process (thread group) of a request's caller, or 0.
func processOf(ctx context.Context) int {
	c, ok := fuse.FromContext(ctx)
	if !ok || c.Pid == 0 {
		return 0
	}
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", c.Pid))
	if err != nil {
		return 0
	}
	for _, l := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(l, "Tgid:"); ok {
			n, _ := strconv.Atoi(strings.TrimSpace(v))
			return n
		}
	}
	return 0
}

var (
	_ fs.FileReader   = (*handle)(nil)
	_ fs.FileWriter   = (*handle)(nil)
	_ fs.FileFlusher  = (*handle)(nil)
	_ fs.FileFsyncer  = (*handle)(nil)
	_ fs.FileReleaser = (*handle)(nil)
)

func (f *handle) Read(ctx context.Context, dest []byte, off int64) (fuse.ReadResult, syscall.Errno) {
	ctx = uninterrupted(ctx)
	b, release, err := f.h.ReadRef(ctx, dest, off)
	if err != nil && !errors.Is(err, io.EOF) {
		if release != nil {
			release()
		}
		return nil, errno(err)
	}
	if release != nil {
		return &lentResult{b: b, release: release}, 0
	}
	return fuse.ReadResultData(b), 0
}

// lentResult is a read's reply sent from the read-ahead's window itself
// (vfs.Handle.ReadRef), without a copy into go-fuse's buffer: go-fuse
// writes a result with Slices straight from its slices (writev) and calls
// Done once the kernel has them, which releases the window.
type lentResult struct {
	b       []byte
	release func()
}

func (r *lentResult) Bytes([]byte) ([]byte, fuse.Status) { return r.b, fuse.OK }
func (r *lentResult) Size() int                          { return len(r.b) }
func (r *lentResult) Done()                              { r.release() }

// Slices makes go-fuse write the reply with writev from r.b and call Done
// only after (go-fuse's unexported withSlice), splice or not.
func (r *lentResult) Slices() ([][]byte, fuse.Status) { return [][]byte{r.b}, fuse.OK }

func (f *handle) Write(ctx context.Context, data []byte, off int64) (uint32, syscall.Errno) {
	ctx = uninterrupted(ctx)
	n, err := f.h.WriteAt(ctx, data, off)
	if err != nil {
		return uint32(n), errno(err)
	}
	return uint32(n), 0
}

// Flush runs at every close(2) of a descriptor: the file is stored, and a
// failure is close's EIO. The kernel also flushes when a child process
// that inherited the descriptor closes its copy (every fork and exec of
// a program that holds a file open for writing); those do not store a
// file that its opener is still writing. The last close stores it
// (Release) in any case.
func (f *handle) Flush(ctx context.Context) syscall.Errno {
	ctx = uninterrupted(ctx)
	if p := processOf(ctx); f.opener != 0 && p != 0 && p != f.opener {
		return 0
	}
	return f.store(ctx)
}

func (f *handle) store(ctx context.Context) syscall.Errno {
	ctx = uninterrupted(ctx)
	err := f.h.Flush(ctx)
	e := errno(err) // an EIO says its cause itself
	if e == 0 || e == syscall.EIO {
		return e
	}
	// The program sees only EIO, ENOSPC, EDQUOT or EACCES: say what
	// happened where its user (or a log) can read it.
	fmt.Fprintf(os.Stderr, "strata mount: %v\n", err)
	if e != syscall.ENOSPC && e != syscall.EDQUOT && e != syscall.EACCES {
		return syscall.EIO
	}
	return e
}

func (f *handle) Fsync(ctx context.Context, flags uint32) syscall.Errno {
	ctx = uninterrupted(ctx)
	return f.store(ctx)
}

func (f *handle) Release(ctx context.Context) syscall.Errno {
	if err := f.h.Release(uninterrupted(ctx)); err != nil {
		// close(2) has returned already: nobody is left to tell.
		fmt.Fprintf(os.Stderr, "strata mount: %v\n", err)
	}
	return 0
}
