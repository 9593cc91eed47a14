// Package disk owns disk devices: a directory on a local file system that
// stands for one disk or RAID array and stores segment objects.
//
// Each object is the segment's data followed by a trailer: a CRC32C per
// 1 MiB chunk and a footer with the length and whole-object CRC. Data starts
// at offset 0, so large writes stay aligned and a read needs no index; the
// chunk table lets any range be verified at rest without reading the whole
// object. Writes are durable before a receipt is issued, so a receipt
// means the bytes survive a crash: a large object is fsynced (file, then
// directory) by itself, small ones together by one syncfs of their file
// system per group of writers (groupsync.go).
//
// Aligned data goes to the disk directly (O_DIRECT) where the file system
// allows it: a mover's data is not read back soon, and a write through the
// page cache costs a copy into it plus the file system's delayed-allocation
// and writeback bookkeeping, about half of a mover's CPU in a profile of a
// 4 GiB put. The first unaligned piece (a stream's short tail, the
// trailer) and every write after it go through the page cache, with
// write-behind so that cache does not fill. The buffers such writes go
// from are the package's pool (Buffers, buffers.go), on huge pages.
//
// A device accounts its capacity (a configured size, never more than the
// file system offers) and may be capped in bandwidth so that one machine can
// emulate many slower devices. It refuses to create an object it was asked
// to delete before it existed (graveyard), so a late write cannot leave an
// object no one will delete.
//
// Its files go through an fsio.FS (Options.FS): the operating system's in
// production, faultfs in the tests that make writes, fsyncs and syncfs
// fail and that crash a server to check what its receipts promised.
package disk

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"hash/fnv"
	"io"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"
	"golang.org/x/time/rate"

	"github.com/strata-storage/strata/internal/api"
	"github.com/strata-storage/strata/internal/fsio"
	"github.com/strata-storage/strata/internal/wire"
)

// ChunkSize is the granularity of at-rest checksums.
const ChunkSize = 1 << 20

const (
	footerSize = 32
	magic      = "STRATA01"
	fanout     = 256
)

// Device is one disk device.
type Device struct {
	id       string
	dir      string
	capacity int64
	bw       int64
	sharing  int64
	limiter  *rate.Limiter // nil when uncapped

	mu       sync.Mutex
	used     int64 // bytes in objects on the device
	reserved int64 // bytes promised to writes in flight

	fs       fsio.FS
	dirSync  []sync.Mutex // serialises directory fsyncs per fan-out dir
	dirs     [fanout]fsio.File
	syncer   *fsSyncer // group syncs of small objects (groupsync.go)
	fsName   string    // mount point of its file system (FS)
	writes   atomic.Int64
	direct   atomic.Bool // the file system takes O_DIRECT (until it refuses)
	directOK atomic.Bool // a direct write has succeeded: they may run concurrently

	graves graveyard // objects deleted before they were written
}

// graveyard remembers objects removed while they did not exist, so that a
// write that arrives after the delete (a client gave up, the core
// reclaimed the aborted file, and the mover had yet to read the request
// waiting in its socket) cannot create an object no one will delete.
// Object names are never reused, so refusing such a create is always
// right. Such deletes are rare; the graveyard forgets the oldest past
// maxGraves, and any entry after graveAge, when no token for the object
// can still be valid.
type graveyard struct {
	mu    sync.Mutex
	at    map[string]time.Time
	order []string
}

const (
	maxGraves = 100000
	graveAge  = 48 * time.Hour
)

func (g *graveyard) bury(object string) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.at == nil {
		g.at = map[string]time.Time{}
	}
	now := time.Now()
	for len(g.order) > 0 && (len(g.order) >= maxGraves || now.Sub(g.at[g.order[0]]) > graveAge) {
		delete(g.at, g.order[0])
		g.order = g.order[1:]
	}
	if _, ok := g.at[object]; !ok {
		g.order = append(g.order, object)
	}
	g.at[object] = now
}

func (g *graveyard) buried(object string) bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	_, ok := g.at[object]
	return ok
}

// Options configure a device.
type Options struct {
	// Capacity in bytes; 0 means what the file system holds.
	Capacity int64
	// Bandwidth cap in bytes per second for reads and writes; 0 means none.
	Bandwidth int64
	// Sharing is how many devices (this one included) live on the same file
	// system; each reports that share of its free space, so that a pool's
	// sum is true. 0 means 1.
	Sharing int
	// FS is the file system the device's files go through; nil means
	// fsio.OS. Tests inject faults and crashes with faultfs.
	FS fsio.FS
}

// Open opens (creating if needed) the device rooted at dir.
func Open(id, dir string, o Options) (*Device, error) {
	d := &Device{id: id, dir: dir, fs: o.FS, capacity: o.Capacity, bw: o.Bandwidth, sharing: int64(max(o.Sharing, 1)), dirSync: make([]sync.Mutex, fanout)}
	if d.fs == nil {
		d.fs = fsio.OS
	}
	d.direct.Store(true)
	if err := d.open(); err != nil {
		d.Close() // what it opened before failing
		return nil, fmt.Errorf("disk %s: %w", id, err)
	}
	return d, nil
}

// open opens the device's directories, syncer and accounts.
func (d *Device) open() error {
	for i := 0; i < fanout; i++ {
		p := filepath.Join(d.dir, "objects", fmt.Sprintf("%02x", i))
		if err := d.fs.MkdirAll(p, 0o700); err != nil {
			return err
		}
		f, err := d.fs.Open(p)
		if err != nil {
			return err
		}
		d.dirs[i] = f
	}
	var err error
	if d.syncer, err = syncerFor(d.fs, d.dir); err != nil {
		return err
	}
	d.fsName = mountPoint(d.dir, d.syncer.id.dev)
	if d.capacity == 0 {
		total, _, err := fsSpace(d.dir)
		if err != nil {
			return err
		}
		d.capacity = total
	}
	if d.bw > 0 {
		// A 4 MiB burst lets 1 MiB frames through without stalling while
		// keeping the long-run rate within the cap.
		d.limiter = rate.NewLimiter(rate.Limit(d.bw), 4<<20)
	}
	used, err := d.scan()
	if err != nil {
		return fmt.Errorf("scan: %w", err)
	}
	d.used = used
	return nil
}

// Close releases the device's directory handles and its share of the
// file system's syncer.
func (d *Device) Close() error {
	for _, f := range d.dirs {
		if f != nil {
			f.Close()
		}
	}
	if d.syncer != nil {
		d.syncer.release()
		d.syncer = nil
	}
	return nil
}

func (d *Device) scan() (int64, error) {
	var used int64
	err := filepath.WalkDir(filepath.Join(d.dir, "objects"), func(p string, e os.DirEntry, err error) error {
		if err != nil || e.IsDir() {
			return err
		}
		info, err := e.Info()
		if err != nil {
			return err
		}
		used += info.Size()
		return nil
	})
	return used, err
}

// ID returns the device's name.
func (d *Device) ID() string { return d.id }

// Dir returns the device's root directory.
func (d *Device) Dir() string { return d.dir }

// Bandwidth returns the configured cap in bytes/s (0 = none).
func (d *Device) Bandwidth() int64 { return d.bw }

// FS describes the file system a device lives on, as df(1) sees it: its
// name (the mount point, which devices sharing it have in common), its
// size and the bytes it has free for Strata. Devices on one file system
// share its space; reports count it once.
type FS struct {
	Name        string
	Size, Avail int64
}

// FS reports the device's file system (zero sizes if statfs fails).
func (d *Device) FS() FS {
	total, avail, _ := fsSpace(d.dir)
	return FS{Name: d.fsName, Size: total, Avail: avail}
}

// Usage reports capacity, bytes used and bytes free. Free is bounded by the
// device's share of what the file system really has, so devices sharing a
// disk never promise space that is gone, nor count it twice.
func (d *Device) Usage() (capacity, used, free int64) {
	d.mu.Lock()
	used, res := d.used, d.reserved
	d.mu.Unlock()
	free = d.capacity - used - res
	if _, avail, err := fsSpace(d.dir); err == nil && avail/d.sharing < free {
		free = avail / d.sharing
	}
	if free < 0 {
		free = 0
	}
	return d.capacity, used, free
}

func fsSpace(dir string) (total, avail int64, err error) {
	var st syscall.Statfs_t
	if err := syscall.Statfs(dir, &st); err != nil {
		return 0, 0, err
	}
	return int64(st.Blocks) * st.Bsize, int64(st.Bavail) * st.Bsize, nil
}

func (d *Device) slot(object string) int {
	h := fnv.New32a()
	h.Write([]byte(object))
	return int(h.Sum32() % fanout)
}

func (d *Device) path(object string) (string, error) {
	if object == "" || strings.ContainsAny(object, "/\\\x00") || object == "." || object == ".." {
		return "", api.Errorf(api.ErrInvalid, "disk %s: bad object name %q", d.id, object)
	}
	return filepath.Join(d.dir, "objects", fmt.Sprintf("%02x", d.slot(object)), object), nil
}

// trailerSize is the number of bytes the trailer adds to n bytes of data.
func trailerSize(n int64) int64 { return 4*((n+ChunkSize-1)/ChunkSize) + footerSize }

func (d *Device) wait(ctx context.Context, n int) error {
	if d.limiter == nil {
		return nil
	}
	for n > 0 {
		k := min(n, d.limiter.Burst())
		if err := d.limiter.WaitN(ctx, k); err != nil {
			return err
		}
		n -= k
	}
	return nil
}

// Create starts writing object, reserving room for up to maxLen data bytes.
func (d *Device) Create(ctx context.Context, object string, maxLen int64) (*Writer, error) {
	p, err := d.path(object)
	if err != nil {
		return nil, err
	}
	if d.graves.buried(object) {
		return nil, api.Errorf(api.ErrNotFound, "disk %s: object %s was deleted before it was written", d.id, object)
	}
	need := maxLen + trailerSize(maxLen)
	d.mu.Lock()
	free := d.capacity - d.used - d.reserved
	if need > free {
		d.mu.Unlock()
		return nil, api.Errorf(api.ErrNoSpace, "disk %s: %d bytes requested, %d free", d.id, need, max(free, 0))
	}
	d.reserved += need
	d.mu.Unlock()
	// A small object is written through the page cache and made durable
	// with its neighbours (groupsync.go); O_DIRECT would only add a device
	// write of its own.
	small := maxLen <= smallObject
	direct := d.direct.Load() && !small
	f, err := d.openNew(p, direct)
	if err != nil && direct && errors.Is(err, syscall.EINVAL) {
		d.direct.Store(false) // a file system without O_DIRECT (tmpfs, some FUSE)
		direct = false
		f, err = d.openNew(p, false)
	}
	if err != nil {
		d.release(need)
		if errors.Is(err, os.ErrExist) {
			return nil, api.Errorf(api.ErrExist, "disk %s: object %s", d.id, object)
		}
		return nil, mapErr(fmt.Errorf("disk %s: create %s: %w", d.id, object, err))
	}
	d.writes.Add(1)
	return &Writer{d: d, f: f, behind: fsio.NewWriteBehind(f), path: p, object: object, max: maxLen, reserved: need, ctx: ctx, direct: direct, small: small}, nil
}

func (d *Device) openNew(p string, direct bool) (fsio.File, error) {
	flags := 0
	if direct {
		flags = syscall.O_DIRECT
	}
	return d.fs.Create(p, flags, 0o600)
}

// directAlign is the alignment O_DIRECT needs of file offsets, lengths and
// memory: the largest logical block size of common disks, and a page.
const directAlign = 4096

// AlignedBuffer returns n bytes at an address direct I/O accepts.
func AlignedBuffer(n int) []byte {
	b := make([]byte, n+directAlign)
	k := int(uintptr(unsafe.Pointer(unsafe.SliceData(b))) % directAlign)
	if k != 0 {
		k = directAlign - k
	}
	return b[k : k+n : k+n]
}

func alignedFor(p []byte, off int64) bool {
	return off%directAlign == 0 && len(p)%directAlign == 0 && (len(p) == 0 || uintptr(unsafe.Pointer(unsafe.SliceData(p)))%directAlign == 0)
}

func (d *Device) release(n int64) {
	d.mu.Lock()
	d.reserved -= n
	d.mu.Unlock()
}

// mapErr makes a file system's ENOSPC an api.ErrNoSpace, which the wire
// carries to the client as such.
func mapErr(err error) error {
	if errors.Is(err, syscall.ENOSPC) {
		return noSpace{err}
	}
	return err
}

// noSpace is an ENOSPC that is also api.ErrNoSpace; its message is the
// file system's, which already says so.
type noSpace struct{ error }

func (e noSpace) Unwrap() []error { return []error{e.error, api.ErrNoSpace} }

// Writer writes one object. Call Close to make it durable or Abort to drop it.
type Writer struct {
	d        *Device
	f        fsio.File
	ctx      context.Context
	path     string
	object   string
	max      int64
	reserved int64

	n        int64        // data bytes written
	prepaid  atomic.Int64 // bandwidth already waited for by Pace
	behind   *fsio.WriteBehind
	crc      uint32   // whole-object CRC32C
	chunkCRC uint32   // CRC of the current partial chunk
	table    []uint32 // CRCs of completed chunks
	done     bool
	direct   bool // the file is open with O_DIRECT
	small    bool // made durable by a group sync (groupsync.go)

	ios        chan ioJob     // to the direct-write goroutines
	inflight   sync.WaitGroup // direct writes not yet finished
	ioMu       sync.Mutex
	ioErr      error // the first direct write that failed
	alloc      int64 // bytes allocated ahead by prealloc
	noPrealloc bool  // fallocate is not supported
}

// Write appends data to the object.
func (w *Writer) Write(p []byte) (int, error) {
	return w.write(p, 0, false)
}

// WriteCRC appends p, whose CRC32C the caller has already verified (a
// frame checked on arrival): the object's checksums are derived from it
// instead of scanning the data again.
func (w *Writer) WriteCRC(p []byte, crc uint32) (int, error) {
	return w.write(p, crc, true)
}

// Pace waits for n bytes of the device's bandwidth ahead of the write that
// will use them. A mover paces frames as they arrive, so the emulated
// device's time runs concurrently with the real disk's work (write-behind
// waits) instead of after it, as it would on the real device.
func (w *Writer) Pace(n int) error {
	if err := w.d.wait(w.ctx, n); err != nil {
		return err
	}
	w.prepaid.Add(int64(n))
	return nil
}

// admit checks that n more bytes fit the object's reservation and waits
// for whatever of the device's bandwidth Pace has not already paid.
func (w *Writer) admit(n int) error {
	if w.n+int64(n) > w.max {
		return api.Errorf(api.ErrNoSpace, "disk %s: object %s exceeds its reservation of %d bytes", w.d.id, w.object, w.max)
	}
	owed := int64(n)
	if paid := w.prepaid.Load(); paid > 0 {
		use := min(paid, owed)
		w.prepaid.Add(-use)
		owed -= use
	}
	return w.d.wait(w.ctx, int(owed))
}

// WriteOwned appends p, whose CRC32C is crc, like WriteCRC, but may still
// be writing it when it returns; done is called (from any goroutine) once
// p is no longer needed. On an O_DIRECT file, aligned pieces go to the
// disk ioDepth at a time: one synchronous direct write at a time leaves
// the device idle between them (1.6 GB/s here against 2.3–3 GB/s for the
// page cache's writeback). Anything else is written before it returns.
// Errors of writes in flight are reported by a later call, Wait or Close.
func (w *Writer) WriteOwned(p []byte, crc uint32, done func()) error {
	if err := w.ioError(); err != nil {
		done()
		return err
	}
	if !w.direct || !w.d.directOK.Load() || !alignedFor(p, w.n) {
		if err := w.Wait(); err != nil {
			done()
			return err
		}
		_, err := w.write(p, crc, true)
		done()
		return err
	}
	if err := w.admit(len(p)); err != nil {
		done()
		return err
	}
	off := w.n
	if err := w.prealloc(off + int64(len(p))); err != nil {
		done()
		return err
	}
	w.accountCRC(p, crc)
	w.behind.Skip(w.n)
	w.startIO(p, off, done)
	return nil
}

// ioDepth is how many direct writes of one object are in flight.
const ioDepth = 4

type ioJob struct {
	p    []byte
	off  int64
	done func()
}

func (w *Writer) startIO(p []byte, off int64, done func()) {
	if w.ios == nil {
		ios := make(chan ioJob)
		w.ios = ios
		for range ioDepth {
			go func() {
				for j := range ios {
					_, err := w.f.WriteAt(j.p, j.off)
					j.done()
					if err != nil {
						w.ioMu.Lock()
						if w.ioErr == nil {
							w.ioErr = mapErr(fmt.Errorf("disk %s: write %s at %d: %w", w.d.id, w.object, j.off, err))
						}
						w.ioMu.Unlock()
					}
					w.inflight.Done()
				}
			}()
		}
	}
	w.inflight.Add(1)
	w.ios <- ioJob{p, off, done}
}

func (w *Writer) ioError() error {
	w.ioMu.Lock()
	defer w.ioMu.Unlock()
	return w.ioErr
}

// Wait waits for the writes in flight and reports the first that failed.
func (w *Writer) Wait() error {
	w.inflight.Wait()
	return w.ioError()
}

// stopIO waits for the writes in flight and ends their goroutines.
func (w *Writer) stopIO() error {
	err := w.Wait()
	if w.ios != nil {
		close(w.ios)
		w.ios = nil
	}
	return err
}

// preallocStep is how far ahead of concurrent direct writes the file is
// allocated: writes inside the file's size run side by side, while each
// write that extends a file waits for the one before (ext4 serialises
// them).
const preallocStep = 64 << 20

func (w *Writer) prealloc(end int64) error {
	if end <= w.alloc || w.noPrealloc {
		return nil
	}
	n := min(max(preallocStep, end-w.alloc), max(w.max, end)-w.alloc)
	err := w.f.Allocate(w.alloc, n)
	switch {
	case err == nil:
		w.alloc += n
	case errors.Is(err, syscall.ENOSPC):
		return mapErr(fmt.Errorf("disk %s: allocate %s: %w", w.d.id, w.object, err))
	default:
		w.noPrealloc = true // not supported here: writes extend the file one by one
	}
	return nil
}

func (w *Writer) write(p []byte, crc uint32, known bool) (int, error) {
	if err := w.admit(len(p)); err != nil {
		return 0, err
	}
	if w.direct && !alignedFor(p, w.n) {
		w.buffered()
	}
	n, err := w.f.WriteAt(p, w.n)
	if err != nil && n == 0 && w.direct && errors.Is(err, syscall.EINVAL) {
		// The file system wants a stricter alignment than directAlign.
		w.d.direct.Store(false)
		w.buffered()
		n, err = w.f.WriteAt(p, w.n)
	} else if err == nil && w.direct {
		w.d.directOK.Store(true)
	}
	if known && n == len(p) {
		w.accountCRC(p, crc)
	} else {
		w.account(p[:n])
	}
	if err != nil {
		return n, mapErr(fmt.Errorf("disk %s: write %s: %w", w.d.id, w.object, err))
	}
	if w.direct {
		w.behind.Skip(w.n) // nothing of it is in the page cache
	} else {
		w.behind.Wrote(w.n)
	}
	return n, nil
}

// buffered turns O_DIRECT off for the rest of the object. Errors are
// ignored: the write that follows reports a file that still refuses.
func (w *Writer) buffered() {
	fd := int(w.f.OS().Fd())
	if fl, err := unix.FcntlInt(uintptr(fd), unix.F_GETFL, 0); err == nil {
		unix.FcntlInt(uintptr(fd), unix.F_SETFL, fl&^unix.O_DIRECT)
	}
	w.direct = false
}

// accountCRC records p with its known CRC: a piece inside one chunk (a
// whole chunk, a small object's only frame) extends the chunk's and the
// object's CRCs by combining, without reading p again; one across chunk
// boundaries has its chunks' CRCs computed.
func (w *Writer) accountCRC(p []byte, crc uint32) {
	n := int64(len(p))
	whole := wire.CombineCRC(w.crc, crc, n)
	if w.n%ChunkSize+n <= ChunkSize {
		w.chunkCRC = wire.CombineCRC(w.chunkCRC, crc, n)
		w.crc = whole
		w.n += n
		if w.n%ChunkSize == 0 {
			w.table = append(w.table, w.chunkCRC)
			w.chunkCRC = 0
		}
		return
	}
	w.account(p)
	w.crc = whole
}

func (w *Writer) account(p []byte) {
	w.crc = crc32.Update(w.crc, wire.Castagnoli, p)
	for len(p) > 0 {
		room := ChunkSize - int(w.n%ChunkSize)
		k := min(room, len(p))
		w.chunkCRC = crc32.Update(w.chunkCRC, wire.Castagnoli, p[:k])
		w.n += int64(k)
		p = p[k:]
		if w.n%ChunkSize == 0 {
			w.table = append(w.table, w.chunkCRC)
			w.chunkCRC = 0
		}
	}
}

// Len returns the data bytes written so far.
func (w *Writer) Len() int64 { return w.n }

// CRC returns the CRC32C of the data written so far.
func (w *Writer) CRC() uint32 { return w.crc }

// Close writes the trailer and makes the object durable: file and directory
// are fsynced before Close returns nil.
func (w *Writer) Close() error {
	if w.done {
		return nil
	}
	w.done = true
	defer w.d.writes.Add(-1)
	table := w.table
	if w.n%ChunkSize != 0 {
		table = append(table, w.chunkCRC)
	}
	tr := make([]byte, 4*len(table)+footerSize)
	for i, c := range table {
		binary.BigEndian.PutUint32(tr[4*i:], c)
	}
	ft := tr[4*len(table):]
	copy(ft, magic)
	binary.BigEndian.PutUint64(ft[8:], uint64(w.n))
	binary.BigEndian.PutUint32(ft[16:], ChunkSize)
	binary.BigEndian.PutUint32(ft[20:], uint32(len(table)))
	binary.BigEndian.PutUint32(ft[24:], w.crc)
	binary.BigEndian.PutUint32(ft[28:], crc32.Checksum(ft[:28], wire.Castagnoli))
	err := w.stopIO()
	if w.direct {
		w.buffered()
	}
	if err == nil && w.alloc > w.n {
		err = w.f.Truncate(w.n) // give back what prealloc took beyond the data
	}
	if err == nil {
		_, err = w.f.WriteAt(tr, w.n)
	}
	w.behind.Stop()
	if err == nil {
		err = w.sync()
	}
	if err == nil && !w.small {
		// Clean now: dropping the pages is cheap and frees the memory. A
		// small object keeps its (clean, reclaimable) pages: a migration
		// that reads many small files soon after their put reads them
		// from memory instead of one device read each, and the put skips
		// a system call per file.
		unix.Fadvise(int(w.f.OS().Fd()), 0, 0, unix.FADV_DONTNEED)
	}
	if cerr := w.f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		w.d.fs.Remove(w.path)
		w.d.release(w.reserved)
		return mapErr(fmt.Errorf("disk %s: close %s: %w", w.d.id, w.object, err))
	}
	size := w.n + int64(len(tr))
	w.d.mu.Lock()
	w.d.reserved -= w.reserved
	w.d.used += size
	w.d.mu.Unlock()
	return nil
}

// sync makes the object and its directory entry durable: a small one in
// its file system's next group sync, a large one by itself.
func (w *Writer) sync() error {
	if w.small {
		return w.d.syncer.wait()
	}
	if err := w.f.Sync(); err != nil {
		return err
	}
	return w.d.syncDir(w.object)
}

// syncDir makes the new directory entry durable. Concurrent closes in one
// directory share a single fsync when they overlap.
func (d *Device) syncDir(object string) error {
	i := d.slot(object)
	d.dirSync[i].Lock()
	defer d.dirSync[i].Unlock()
	return d.dirs[i].Sync()
}

// Abort drops the partial object and its reservation.
func (w *Writer) Abort() {
	if w.done {
		return
	}
	w.done = true
	w.d.writes.Add(-1)
	w.stopIO()
	w.behind.Stop()
	w.f.Close()
	w.d.fs.Remove(w.path)
	w.d.release(w.reserved)
}

// Remove deletes object. Removing an object that is not there succeeds, so
// reclaim can be repeated after a crash.
func (d *Device) Remove(object string) error {
	p, err := d.path(object)
	if err != nil {
		return err
	}
	info, err := d.fs.Stat(p)
	if errors.Is(err, os.ErrNotExist) {
		d.graves.bury(object)
		return nil
	}
	if err != nil {
		return fmt.Errorf("disk %s: remove %s: %w", d.id, object, err)
	}
	if err := d.fs.Remove(p); err != nil && !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("disk %s: remove %s: %w", d.id, object, err)
	}
	d.mu.Lock()
	d.used -= info.Size()
	d.mu.Unlock()
	return nil
}

// CorruptError names the device, object and offset where stored data failed
// its checksum.
type CorruptError struct {
	Device, Object string
	Offset         int64
	Detail         string
}

func (e *CorruptError) Error() string {
	return fmt.Sprintf("disk %s: object %s: %s at offset %d", e.Device, e.Object, e.Detail, e.Offset)
}

// Unwrap makes errors.Is(err, api.ErrCorrupt) hold.
func (e *CorruptError) Unwrap() error { return api.ErrCorrupt }

// Reader reads and verifies one stored object.
type Reader struct {
	d      *Device // nil for a file handed over by a mover (see OpenFile)
	dev    string
	f      fsio.File
	object string
	n      int64
	crc    uint32
	table  []uint32
	buf    []byte
	whole  *[]byte // a small object's whole file, read at open (see wholeMax)
	ctx    context.Context
}

// wholeMax is the largest object file read whole when it is opened: its
// trailer is at its end and its data at its start, so reading them apart
// costs a small object two reads from the device where one will do, and
// small files read on a cold cache (a migration's) are bound by the
// device's reads, not its bandwidth.
const wholeMax = 256 << 10

var wholeBufs = sync.Pool{New: func() any { b := make([]byte, wholeMax); return &b }}

// OpenObject opens object for reading and checks its trailer.
func (d *Device) OpenObject(ctx context.Context, object string) (*Reader, error) {
	f, err := d.OpenObjectFile(object)
	if err != nil {
		return nil, err
	}
	r := &Reader{d: d, dev: d.id, f: f, object: object, ctx: ctx}
	if err := r.readTrailer(); err != nil {
		r.Close() // f, and the buffer a small object was read into
		return nil, err
	}
	return r, nil
}

// OpenObjectFile opens object's file without reading it, for a mover to
// hand over to a client on its host, which reads and checks it with
// OpenFile.
func (d *Device) OpenObjectFile(object string) (fsio.File, error) {
	p, err := d.path(object)
	if err != nil {
		return nil, err
	}
	f, err := d.fs.Open(p)
	if errors.Is(err, os.ErrNotExist) {
		return nil, api.Errorf(api.ErrNotFound, "disk %s: object %s", d.id, object)
	}
	if err != nil {
		return nil, fmt.Errorf("disk %s: open %s: %w", d.id, object, err)
	}
	return f, nil
}

// OpenFile reads object of device dev from f, an object file opened by
// someone else: a client on a mover's host reads the file the mover handed
// over (see moverconn.Conn.Read) with the same checks a mover makes. It checks
// the trailer and takes ownership of f. Reads are not paced: movers hand
// over files of uncapped devices only.
func OpenFile(ctx context.Context, f *os.File, dev, object string) (*Reader, error) {
	r := &Reader{dev: dev, f: fsio.FromOS(f), object: object, ctx: ctx}
	if err := r.readTrailer(); err != nil {
		r.Close()
		return nil, err
	}
	return r, nil
}

// File returns the open object file, for a mover to hand over to a client
// on its host. It stays owned by r.
func (r *Reader) File() *os.File { return r.f.OS() }

func (r *Reader) wait(n int) error {
	if r.d == nil {
		return nil
	}
	return r.d.wait(r.ctx, n)
}

func (r *Reader) corrupt(off int64, detail string) error {
	return &CorruptError{Device: r.dev, Object: r.object, Offset: off, Detail: detail}
}

func (r *Reader) readTrailer() error {
	info, err := r.f.Stat()
	if err != nil {
		return err
	}
	size := info.Size()
	if size < footerSize {
		return r.corrupt(0, "object truncated (no trailer)")
	}
	ft := make([]byte, footerSize)
	if size <= wholeMax {
		bp := wholeBufs.Get().(*[]byte)
		if _, err := r.f.ReadAt((*bp)[:size], 0); err != nil {
			wholeBufs.Put(bp)
			return fmt.Errorf("disk %s: read %s: %w", r.dev, r.object, err)
		}
		r.whole = bp
		ft = (*bp)[size-footerSize : size]
	} else if _, err := r.f.ReadAt(ft, size-footerSize); err != nil {
		return fmt.Errorf("disk %s: read trailer of %s: %w", r.dev, r.object, err)
	}
	if string(ft[:8]) != magic || binary.BigEndian.Uint32(ft[28:]) != crc32.Checksum(ft[:28], wire.Castagnoli) {
		return r.corrupt(size-footerSize, "bad trailer")
	}
	r.n = int64(binary.BigEndian.Uint64(ft[8:]))
	chunks := int64(binary.BigEndian.Uint32(ft[20:]))
	r.crc = binary.BigEndian.Uint32(ft[24:])
	if binary.BigEndian.Uint32(ft[16:]) != ChunkSize || chunks != (r.n+ChunkSize-1)/ChunkSize || r.n+4*chunks+footerSize != size {
		return r.corrupt(size-footerSize, "inconsistent trailer")
	}
	var tb []byte
	if r.whole != nil {
		tb = (*r.whole)[r.n : r.n+4*chunks]
	} else {
		tb = make([]byte, 4*chunks)
		if _, err := r.f.ReadAt(tb, r.n); err != nil {
			return fmt.Errorf("disk %s: read trailer of %s: %w", r.dev, r.object, err)
		}
	}
	r.table = make([]uint32, chunks)
	for i := range r.table {
		r.table[i] = binary.BigEndian.Uint32(tb[4*i:])
	}
	return nil
}

// Len returns the object's data length.
func (r *Reader) Len() int64 { return r.n }

// CRC returns the whole-object CRC32C recorded at write time.
func (r *Reader) CRC() uint32 { return r.crc }

// Chunk reads and verifies chunk i into buf (len >= ChunkSize) and returns
// the chunk's data.
func (r *Reader) Chunk(i int64, buf []byte) ([]byte, error) {
	off := i * ChunkSize
	if off >= r.n {
		return nil, io.EOF
	}
	n := min(int64(ChunkSize), r.n-off)
	if err := r.wait(int(n)); err != nil {
		return nil, err
	}
	p := buf[:n]
	if r.whole != nil {
		copy(p, (*r.whole)[off:off+n])
	} else if _, err := r.f.ReadAt(p, off); err != nil {
		return nil, fmt.Errorf("disk %s: read %s at %d: %w", r.dev, r.object, off, err)
	}
	if crc32.Checksum(p, wire.Castagnoli) != r.table[i] {
		return nil, r.corrupt(off, "checksum mismatch in chunk")
	}
	r.dropBehind(off)
	return p, nil
}

// Region is a chunk's place in the object file, for senders that move it
// without reading it into memory (sendfile). The data is not verified here:
// whoever receives it checks it against CRC, the CRC32C stored when the
// chunk was written, so damage at rest is still caught, one hop later.
type Region struct {
	File *os.File
	Off  int64
	Len  int64
	CRC  uint32
}

// Region returns chunk i unread, after charging the device's bandwidth for
// it, and drops what earlier chunks left in the page cache (as Chunk does).
func (r *Reader) Region(i int64) (Region, error) {
	off := i * ChunkSize
	if off >= r.n {
		return Region{}, io.EOF
	}
	n := min(int64(ChunkSize), r.n-off)
	if err := r.wait(int(n)); err != nil {
		return Region{}, err
	}
	r.dropBehind(off)
	return Region{File: r.f.OS(), Off: off, Len: n, CRC: r.table[i]}, nil
}

// Sequential tells the kernel the object will be streamed: it reads ahead
// further.
func (r *Reader) Sequential() {
	unix.Fadvise(int(r.f.OS().Fd()), 0, 0, unix.FADV_SEQUENTIAL)
}

// dropBehind drops the window before off from the page cache once a
// streaming read has passed it: movers serve data once, and a cache full of
// it makes the next transfer pay for reclaim.
func (r *Reader) dropBehind(off int64) {
	if off > 0 && off%fsio.WriteBehindWindow == 0 {
		unix.Fadvise(int(r.f.OS().Fd()), off-fsio.WriteBehindWindow, fsio.WriteBehindWindow, unix.FADV_DONTNEED)
	}
}

// ChunkCRC returns the stored CRC32C of chunk i (valid after Chunk(i)
// returned it verified).
func (r *Reader) ChunkCRC(i int64) uint32 { return r.table[i] }

// ReadAt reads verified data at off. It is meant for small ranges; streaming
// readers use Chunk.
func (r *Reader) ReadAt(p []byte, off int64) (int, error) {
	if r.buf == nil {
		r.buf = make([]byte, ChunkSize)
	}
	done := 0
	for done < len(p) {
		pos := off + int64(done)
		if pos >= r.n {
			return done, io.EOF
		}
		c, err := r.Chunk(pos/ChunkSize, r.buf)
		if err != nil {
			return done, err
		}
		done += copy(p[done:], c[pos%ChunkSize:])
	}
	return done, nil
}

// Verify reads the whole object, every chunk checked against the CRC32C
// stored with it and the chunks' CRCs against the whole-object CRC, and
// reports the first damage as a *CorruptError. buf must hold a chunk. It
// is charged to the device's bandwidth like any read, so a scrub at a
// capped device stays within its cap.
func (r *Reader) Verify(buf []byte) error {
	var crc uint32
	for i := int64(0); i*ChunkSize < r.n; i++ {
		p, err := r.Chunk(i, buf)
		if err != nil {
			return err
		}
		crc = wire.CombineCRC(crc, r.table[i], int64(len(p)))
	}
	if crc != r.crc {
		return r.corrupt(0, fmt.Sprintf("chunk checksums make %08x, the object records %08x", crc, r.crc))
	}
	return nil
}

// Close releases the reader.
func (r *Reader) Close() error {
	if r.whole != nil {
		wholeBufs.Put(r.whole)
		r.whole = nil
	}
	return r.f.Close()
}
