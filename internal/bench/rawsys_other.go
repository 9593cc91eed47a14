//go:build !(linux && amd64)

package bench

import "golang.org/x/sys/unix"

// rawLstat is unix.Lstat where no raw variant is written.
func rawLstat(path string, st *unix.Stat_t) error { return unix.Lstat(path, st) }

// rawUnlink is unix.Unlink where no raw variant is written.
func rawUnlink(path string) error { return unix.Unlink(path) }

// rawPwrite is unix.Pwrite where no raw variant is written.
func rawPwrite(fd int, p []byte, off int64) (int, error) { return unix.Pwrite(fd, p, off) }
