// Package faultfs is an fsio.FS for tests that fails on demand and can
// simulate a crash, in the spirit of pebble's errorfs and its crashable
// MemFS: it wraps a real file system (the files stay real files, so
// hand-over and sendfile still work) and
//
//   - injects errors: the Nth operation of a kind, optionally only on
//     files whose name matches a pattern, fails with a chosen errno (EIO,
//     ENOSPC) once, several times or from then on;
//   - models durability: it remembers what each file it created held at
//     its last fsync or syncfs and which directory entries a directory
//     fsync or syncfs made durable; Crash stops every operation (the
//     machine is off), and Restore then puts the files back as a power
//     loss would leave them: a new file whose entry was never made durable
//     is gone, a file's unsynced writes are lost, an unsynced removal is
//     undone.
//
// The model is the strict POSIX one: a new file's entry survives only a
// sync of its directory (or syncfs), whatever a journalling file system
// may do in practice. Files that existed before the FS saw them are
// durable as they are; directories are durable once made.
package faultfs

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"syscall"

	"github.com/strata-storage/strata/internal/fsio"
)

// Op is a kind of file-system operation.
type Op uint8

// The operations faults can be injected into.
const (
	OpAny      Op = iota
	OpCreate      // FS.Create
	OpOpen        // FS.Open
	OpRead        // File.ReadAt
	OpWrite       // File.WriteAt
	OpSync        // File.Sync of a file
	OpSyncDir     // File.Sync of a directory
	OpSyncFS      // File.SyncFS
	OpAllocate    // File.Allocate
	OpTruncate    // File.Truncate
	OpRemove      // FS.Remove
	OpRename      // FS.Rename
	OpMkdir       // FS.MkdirAll
	OpStat        // FS.Stat, File.Stat
)

var opNames = [...]string{"any", "create", "open", "read", "write", "fsync", "fsync of a directory", "syncfs", "fallocate", "truncate", "remove", "rename", "mkdir", "stat"}

func (o Op) String() string {
	if int(o) < len(opNames) {
		return opNames[o]
	}
	return fmt.Sprintf("op%d", o)
}

// Rule says which operations fail and how.
type Rule struct {
	Op Op
	// Name, if set, is a filepath.Match pattern the base name of the file
	// (or, for a directory sync, the directory) must match.
	Name string
	// Nth is which matching operation fails first, from 1 (0 is 1).
	Nth int
	// Count is how many fail from there; 0 means every one after.
	Count int
	// Err is the errno returned; nil means EIO.
	Err error
	// Crash, instead, crashes the FS at that operation (see Crash): it
	// and everything after it fail, nothing more becomes durable.
	Crash bool
}

type rule struct {
	Rule
	seen, fired int
}

// FS injects faults into, and models the durability of, what it passes to
// the file system below.
type FS struct {
	base fsio.FS

	mu      sync.Mutex
	rules   []*rule
	fired   int
	crashed bool
	files   map[string]*state // what a crash would do to each path, where it differs from what is there
}

// state is what a crash leaves of one path.
type state struct {
	path     string
	durable  []byte // the file's content at the last sync that covered it
	entry    bool   // the name's entry for this file is durable
	prior    []byte // what the name durably held before this file took it
	hasPrior bool
	removed  bool // the name was removed, the removal not yet durable
	dirty    bool // written since the last sync
	open     int  // handles open
}

// New wraps base.
func New(base fsio.FS) *FS {
	return &FS{base: base, files: map[string]*state{}}
}

// Inject adds a rule.
func (fs *FS) Inject(r Rule) {
	if r.Err == nil {
		r.Err = syscall.EIO
	}
	fs.mu.Lock()
	fs.rules = append(fs.rules, &rule{Rule: r})
	fs.mu.Unlock()
}

// Clear drops every rule.
func (fs *FS) Clear() {
	fs.mu.Lock()
	fs.rules = nil
	fs.mu.Unlock()
}

// Injected returns how many operations have failed by a rule.
func (fs *FS) Injected() int {
	fs.mu.Lock()
	defer fs.mu.Unlock()
	return fs.fired
}

// Crash makes every later operation fail with EIO, as if the machine had
// lost power: nothing more becomes durable.
func (fs *FS) Crash() {
	fs.mu.Lock()
	fs.crashed = true
	fs.mu.Unlock()
}

// Crashed reports whether the FS has crashed (by Crash or a rule).
func (fs *FS) Crashed() bool {
	fs.mu.Lock()
	defer fs.mu.Unlock()
	return fs.crashed
}

// Restore leaves every file as the crash would have: call it after Crash,
// once the files' users have closed them. The FS then works again, with no
// rules, and everything on it counts as durable.
func (fs *FS) Restore() error {
	fs.mu.Lock()
	defer fs.mu.Unlock()
	var errs []error
	put := func(p string, b []byte) { errs = append(errs, os.WriteFile(p, b, 0o600)) }
	for p, st := range fs.files {
		switch {
		case st.entry && (st.removed || st.dirty):
			put(p, st.durable)
		case st.entry:
		case st.hasPrior:
			put(p, st.prior)
		default:
			if err := os.Remove(p); err != nil && !errors.Is(err, os.ErrNotExist) {
				errs = append(errs, err)
			}
		}
	}
	fs.files = map[string]*state{}
	fs.rules, fs.crashed = nil, false
	return errors.Join(errs...)
}

// fault returns the error an operation gets, if any.
func (fs *FS) fault(op Op, path string) error {
	fs.mu.Lock()
	defer fs.mu.Unlock()
	return fs.faultLocked(op, path)
}

func (fs *FS) faultLocked(op Op, path string) error {
	if fs.crashed {
		return &os.PathError{Op: op.String(), Path: path, Err: syscall.EIO}
	}
	for _, r := range fs.rules {
		if r.Op != OpAny && r.Op != op {
			continue
		}
		if r.Name != "" {
			if ok, _ := filepath.Match(r.Name, filepath.Base(path)); !ok {
				continue
			}
		}
		r.seen++
		if r.seen < max(r.Nth, 1) || (r.Count > 0 && r.fired >= r.Count) {
			continue
		}
		r.fired++
		fs.fired++
		if r.Crash {
			fs.crashed = true
			return &os.PathError{Op: op.String(), Path: path, Err: syscall.EIO}
		}
		return &os.PathError{Op: op.String(), Path: path, Err: r.Err}
	}
	return nil
}

// Create implements fsio.FS.
func (fs *FS) Create(path string, flags int, perm os.FileMode) (fsio.File, error) {
	if err := fs.fault(OpCreate, path); err != nil {
		return nil, err
	}
	f, err := fs.base.Create(path, flags, perm)
	if err != nil {
		return nil, err
	}
	fs.mu.Lock()
	defer fs.mu.Unlock()
	st := &state{path: path, dirty: true, open: 1}
	st.inherit(fs.files[path])
	fs.files[path] = st
	return &file{fs: fs, f: f, st: st, path: path}, nil
}

// inherit takes over, for a file that takes a name, what a crash would
// bring back under that name.
func (st *state) inherit(old *state) {
	switch {
	case old == nil:
	case old.entry:
		st.prior, st.hasPrior = old.durable, true
	case old.hasPrior:
		st.prior, st.hasPrior = old.prior, true
	}
}

// Open implements fsio.FS.
func (fs *FS) Open(path string) (fsio.File, error) {
	if err := fs.fault(OpOpen, path); err != nil {
		return nil, err
	}
	f, err := fs.base.Open(path)
	if err != nil {
		return nil, err
	}
	info, err := f.Stat()
	if err != nil {
		f.Close()
		return nil, err
	}
	return &file{fs: fs, f: f, path: path, dir: info.IsDir()}, nil
}

// MkdirAll implements fsio.FS.
func (fs *FS) MkdirAll(path string, perm os.FileMode) error {
	if err := fs.fault(OpMkdir, path); err != nil {
		return err
	}
	return fs.base.MkdirAll(path, perm)
}

// Stat implements fsio.FS.
func (fs *FS) Stat(path string) (os.FileInfo, error) {
	if err := fs.fault(OpStat, path); err != nil {
		return nil, err
	}
	return fs.base.Stat(path)
}

// Remove implements fsio.FS.
func (fs *FS) Remove(path string) error {
	if err := fs.fault(OpRemove, path); err != nil {
		return err
	}
	fs.mu.Lock()
	defer fs.mu.Unlock()
	st, err := fs.tracked(path)
	if err != nil {
		return err
	}
	if err := fs.base.Remove(path); err != nil {
		return err
	}
	fs.vacate(st)
	return nil
}

// vacate records that st's file left its name: a crash brings back what
// the name durably held, if anything.
func (fs *FS) vacate(st *state) {
	st.removed = true // handles still open on it write to an unnamed file
	gone := &state{path: st.path, removed: true}
	gone.inherit(st)
	if gone.hasPrior {
		fs.files[st.path] = gone
	} else {
		delete(fs.files, st.path)
	}
}

// Rename implements fsio.FS. The new name is durable with a sync of its
// directory; until then a crash keeps the old one.
func (fs *FS) Rename(oldpath, newpath string) error {
	if err := fs.fault(OpRename, oldpath); err != nil {
		return err
	}
	fs.mu.Lock()
	defer fs.mu.Unlock()
	st, err := fs.tracked(oldpath)
	if err != nil {
		return err
	}
	target, err := fs.tracked(newpath)
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		return err
	}
	if err := fs.base.Rename(oldpath, newpath); err != nil {
		return err
	}
	fs.vacate(st)
	// The state moves with the file: handles open on it follow.
	st.path, st.entry, st.removed = newpath, false, false
	st.prior, st.hasPrior = nil, false
	st.inherit(target)
	fs.files[newpath] = st
	return nil
}

// tracked returns path's state, starting one (durable as it is now) for
// a file the FS has not seen change.
func (fs *FS) tracked(path string) (*state, error) {
	if st := fs.files[path]; st != nil && !st.removed {
		return st, nil
	} else if st != nil {
		return nil, &os.PathError{Op: "open", Path: path, Err: os.ErrNotExist}
	}
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	st := &state{path: path, durable: b, entry: true}
	fs.files[path] = st
	return st, nil
}

// syncDir makes the entries of dir durable.
func (fs *FS) syncDir(dir string) {
	for p, st := range fs.files {
		if filepath.Dir(p) != dir {
			continue
		}
		if st.removed {
			delete(fs.files, p)
			continue
		}
		st.entry, st.prior, st.hasPrior = true, nil, false
		fs.forget(st)
	}
}

// syncFile records a file's content as durable.
func (fs *FS) syncFile(st *state) error {
	if st.removed {
		return nil
	}
	b, err := os.ReadFile(st.path)
	if err != nil {
		return err
	}
	st.durable, st.dirty = b, false
	fs.forget(st)
	return nil
}

// forget stops tracking a path a crash would leave as it is.
func (fs *FS) forget(st *state) {
	if st.entry && !st.dirty && !st.removed && st.open == 0 && fs.files[st.path] == st {
		delete(fs.files, st.path)
	}
}

// file is an open file of FS.
type file struct {
	fs   *FS
	f    fsio.File
	path string // as opened; st.path follows renames
	dir  bool
	st   *state // for files created through FS; nil otherwise
}

// name is the file's current path.
func (f *file) name() string {
	if f.st != nil {
		return f.st.path
	}
	return f.path
}

func (f *file) ReadAt(p []byte, off int64) (int, error) {
	if err := f.fs.fault(OpRead, f.name()); err != nil {
		return 0, err
	}
	return f.f.ReadAt(p, off)
}

// change runs a write-like operation and marks the file dirty.
func (f *file) change(op Op, fn func() error) error {
	f.fs.mu.Lock()
	defer f.fs.mu.Unlock()
	if err := f.fs.faultLocked(op, f.name()); err != nil {
		return err
	}
	if st := f.st; st != nil && !st.removed {
		st.dirty = true
		f.fs.files[st.path] = st // again, if a sync had let it go
	}
	return fn()
}

func (f *file) WriteAt(p []byte, off int64) (n int, err error) {
	err = f.change(OpWrite, func() error {
		n, err = f.f.WriteAt(p, off)
		return err
	})
	return n, err
}

func (f *file) Allocate(off, n int64) error {
	return f.change(OpAllocate, func() error { return f.f.Allocate(off, n) })
}

func (f *file) Truncate(size int64) error {
	return f.change(OpTruncate, func() error { return f.f.Truncate(size) })
}

func (f *file) Sync() error {
	op := OpSync
	if f.dir {
		op = OpSyncDir
	}
	f.fs.mu.Lock()
	defer f.fs.mu.Unlock()
	if err := f.fs.faultLocked(op, f.name()); err != nil {
		return err
	}
	if err := f.f.Sync(); err != nil {
		return err
	}
	if f.dir {
		f.fs.syncDir(filepath.Clean(f.path))
		return nil
	}
	// fsync through any descriptor of a file makes its data durable: a
	// file created, closed and opened again is synced through the new one.
	st := f.st
	if st == nil {
		st = f.fs.files[f.path]
	}
	if st != nil {
		return f.fs.syncFile(st)
	}
	return nil
}

func (f *file) SyncFS() error {
	f.fs.mu.Lock()
	defer f.fs.mu.Unlock()
	if err := f.fs.faultLocked(OpSyncFS, f.name()); err != nil {
		return err
	}
	if err := f.f.SyncFS(); err != nil {
		return err
	}
	for p, st := range f.fs.files {
		if st.removed {
			delete(f.fs.files, p)
			continue
		}
		st.entry, st.prior, st.hasPrior = true, nil, false
		if err := f.fs.syncFile(st); err != nil && !errors.Is(err, os.ErrNotExist) {
			return err
		}
	}
	return nil
}

func (f *file) Stat() (os.FileInfo, error) {
	if err := f.fs.fault(OpStat, f.name()); err != nil {
		return nil, err
	}
	return f.f.Stat()
}

func (f *file) Close() error {
	if f.st != nil {
		f.fs.mu.Lock()
		f.st.open--
		f.fs.forget(f.st)
		f.fs.mu.Unlock()
	}
	return f.f.Close()
}

func (f *file) Name() string { return f.name() }
func (f *file) OS() *os.File { return f.f.OS() }
