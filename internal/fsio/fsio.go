// Package fsio is the seam between Strata's storage code and the file
// system: the few operations a device needs to store objects durably
// (create, positioned writes and reads, fsync, fallocate, truncate,
// rename, remove, directory fsync and syncfs) behind two small interfaces.
//
// The seam exists for its second implementation, faultfs, which makes
// those operations fail on demand (EIO on the third fsync, ENOSPC in the
// middle of an object) and simulates a crash that drops whatever was
// written but not yet synced. That is how the tests show the promise a
// receipt makes — the bytes survive a crash — holds where it can fail.
//
// OS, the production implementation, is a thin layer over *os.File and
// golang.org/x/sys/unix: one interface call per operation and no copies.
// What the kernel does with a descriptor itself (O_DIRECT toggling,
// sync_file_range, fadvise, sendfile, handing a descriptor to another
// process) goes through File.OS and is not part of the seam: those are
// hints or kernel-to-kernel paths whose failures the operations above
// report anyway.
package fsio

import (
	"io"
	"os"

	"golang.org/x/sys/unix"
)

// FS is a file system as Strata's storage code uses it.
type FS interface {
	// Create creates path exclusively (O_CREAT|O_EXCL) for reading and
	// writing, with extra open flags such as O_DIRECT.
	Create(path string, flags int, perm os.FileMode) (File, error)
	// Open opens path read-only; directories too, for SyncDir.
	Open(path string) (File, error)
	MkdirAll(path string, perm os.FileMode) error
	Remove(path string) error
	Rename(oldpath, newpath string) error
	Stat(path string) (os.FileInfo, error)
}

// File is an open file.
type File interface {
	io.ReaderAt
	// WriteAt writes all of p at off (pwrite, repeated until done).
	io.WriterAt
	io.Closer
	// Sync makes the file's data and metadata durable (fsync); on a
	// directory, its entries.
	Sync() error
	// SyncFS makes everything written to the file's file system durable
	// (syncfs).
	SyncFS() error
	// Allocate reserves n bytes at off (fallocate, mode 0).
	Allocate(off, n int64) error
	Truncate(size int64) error
	Stat() (os.FileInfo, error)
	Name() string
	// OS returns the open file itself, for what only the kernel can do
	// with it: hints, sendfile, handing it to another process.
	OS() *os.File
}

// OS is the operating system's file system.
var OS FS = osFS{}

type osFS struct{}

func (osFS) Create(path string, flags int, perm os.FileMode) (File, error) {
	f, err := OpenFile(path, os.O_CREATE|os.O_EXCL|os.O_RDWR|flags, perm)
	if err != nil {
		return nil, err
	}
	return osFile{f}, nil
}

func (osFS) Open(path string) (File, error) {
	f, err := OpenFile(path, os.O_RDONLY, 0)
	if err != nil {
		return nil, err
	}
	return osFile{f}, nil
}

// OpenFile is os.OpenFile for files and directories read and written with
// blocking calls, without os.OpenFile's try at the runtime's poller: it
// makes every descriptor non-blocking, asks epoll to watch it and, as
// epoll refuses regular files and directories, makes it blocking again —
// four fcntl calls and a failed epoll_ctl for every object a mover
// creates or opens (`go test -bench Open ./internal/fsio`). A File from
// os.NewFile of a blocking descriptor does plain reads and writes. perm
// takes permission bits only.
func OpenFile(name string, flag int, perm os.FileMode) (*os.File, error) {
	for {
		fd, err := unix.Open(name, flag|unix.O_CLOEXEC, uint32(perm.Perm()))
		if err == unix.EINTR {
			continue // as os.OpenFile: a signal during a slow open
		}
		if err != nil {
			return nil, &os.PathError{Op: "open", Path: name, Err: err}
		}
		return os.NewFile(uintptr(fd), name), nil
	}
}

func (osFS) MkdirAll(path string, perm os.FileMode) error { return os.MkdirAll(path, perm) }
func (osFS) Remove(path string) error                     { return os.Remove(path) }
func (osFS) Rename(oldpath, newpath string) error         { return os.Rename(oldpath, newpath) }
func (osFS) Stat(path string) (os.FileInfo, error)        { return os.Stat(path) }

type osFile struct{ *os.File }

// WriteAt calls pwrite directly: os.File.WriteAt refuses files opened
// with O_APPEND and takes the descriptor's lock, which concurrent direct
// writes of one object do not need.
func (f osFile) WriteAt(p []byte, off int64) (int, error) {
	fd := int(f.File.Fd())
	done := 0
	for done < len(p) {
		n, err := unix.Pwrite(fd, p[done:], off+int64(done))
		if err == unix.EINTR {
			continue
		}
		if err != nil {
			return done, &os.PathError{Op: "write", Path: f.File.Name(), Err: err}
		}
		if n == 0 {
			return done, io.ErrShortWrite
		}
		done += n
	}
	return done, nil
}

func (f osFile) SyncFS() error {
	if err := unix.Syncfs(int(f.File.Fd())); err != nil {
		return &os.PathError{Op: "syncfs", Path: f.File.Name(), Err: err}
	}
	return nil
}

func (f osFile) Allocate(off, n int64) error {
	if err := unix.Fallocate(int(f.File.Fd()), 0, off, n); err != nil {
		return &os.PathError{Op: "fallocate", Path: f.File.Name(), Err: err}
	}
	return nil
}

func (f osFile) OS() *os.File { return f.File }

// FromOS makes an open *os.File a File of OS, for a file opened elsewhere
// (a descriptor another process handed over).
func FromOS(f *os.File) File { return osFile{f} }
