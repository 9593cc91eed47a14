//go:build !(linux && amd64)

package bench

import "golang.org/x/sys/unix"

// rawLstat is unix.Lstat of dir/name where no raw variant is written.
func rawLstat(dir, name string, st *unix.Stat_t) error { return unix.Lstat(dir+"/"+name, st) }

// rawUnlink is unix.Unlink of dir/name where no raw variant is written.
func rawUnlink(dir, name string) error { return unix.Unlink(dir + "/" + name) }

// rawPwrite is unix.Pwrite where no raw variant is written.
func rawPwrite(fd int, p []byte, off int64) (int, error) { return unix.Pwrite(fd, p, off) }

// rawPread is unix.Pread where no raw variant is written.
func rawPread(fd int, p []byte, off int64) (int, error) { return unix.Pread(fd, p, off) }
