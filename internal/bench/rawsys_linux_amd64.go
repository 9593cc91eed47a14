package bench

import (
	"strings"
	"unsafe"

	"golang.org/x/sys/unix"
)

// rawLstat is lstat(2) of dir/name as a C program calls it: the path
// assembled in a stack buffer (no string built per call) and the system
// call made without the Go scheduler's hand-off around it
// (entersyscall/exitsyscall), which on a cached ext4 stat of ~1.7 µs is a
// tenth of the operation (BENCHMARKS.md). A stat that blocks holds its P
// meanwhile, so posix.Stat uses it only on local file systems; long paths
// take the ordinary call.
func rawLstat(dir, name string, st *unix.Stat_t) error {
	var buf [512]byte
	if !cpath(&buf, dir, name) {
		return unix.Lstat(dir+"/"+name, st)
	}
	cwd := unix.AT_FDCWD
	_, _, e := unix.RawSyscall6(unix.SYS_NEWFSTATAT, uintptr(cwd), uintptr(unsafe.Pointer(&buf[0])), uintptr(unsafe.Pointer(st)), unix.AT_SYMLINK_NOFOLLOW, 0, 0)
	if e != 0 {
		return e
	}
	return nil
}

// rawUnlink is unlink(2) of dir/name the same way, for the same reason
// (md-rates' delete phase).
func rawUnlink(dir, name string) error {
	var buf [512]byte
	if !cpath(&buf, dir, name) {
		return unix.Unlink(dir + "/" + name)
	}
	cwd := unix.AT_FDCWD
	_, _, e := unix.RawSyscall(unix.SYS_UNLINKAT, uintptr(cwd), uintptr(unsafe.Pointer(&buf[0])), 0)
	if e != 0 {
		return e
	}
	return nil
}

// cpath writes dir/name as a NUL-terminated C string into buf; false if it
// does not fit or holds a NUL (the ordinary call then reports it).
func cpath(buf *[512]byte, dir, name string) bool {
	if len(dir)+1+len(name) >= len(buf) || strings.IndexByte(dir, 0) >= 0 || strings.IndexByte(name, 0) >= 0 {
		return false
	}
	n := copy(buf[:], dir)
	buf[n] = '/'
	copy(buf[n+1:], name)
	return true
}

// rawPwrite is pwrite(2) the same way, for small random writes into the
// page cache (HPCS 13 and 14), where the hand-off is a tenth of the call.
// A write the kernel throttles holds its P until it returns.
func rawPwrite(fd int, p []byte, off int64) (int, error) { return rawRW(unix.SYS_PWRITE64, fd, p, off) }

// rawPread is pread(2) the same way, for small reads from the page cache
// (HPCS 13 and 14). A read that waits on the device holds its P until it
// returns, which a phase with no more workers than Ps can afford.
func rawPread(fd int, p []byte, off int64) (int, error) { return rawRW(unix.SYS_PREAD64, fd, p, off) }

func rawRW(trap uintptr, fd int, p []byte, off int64) (int, error) {
	if len(p) == 0 {
		return 0, nil
	}
	n, _, e := unix.RawSyscall6(trap, uintptr(fd), uintptr(unsafe.Pointer(&p[0])), uintptr(len(p)), uintptr(off), 0, 0)
	if e != 0 {
		return 0, e
	}
	return int(n), nil
}
