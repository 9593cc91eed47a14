package auth

import (
	"fmt"
	"net"
	"syscall"
	"unsafe"

	"golang.org/x/sys/unix"
)

// Peer is the process at the other end of a Unix socket, as the kernel saw
// it when the connection was made.
type Peer struct {
	PID      int32
	UID, GID uint32
	Groups   []uint32
}

// PeerOf returns the credentials of a Unix socket connection's peer:
// SO_PEERCRED for the uid and gid, SO_PEERGROUPS for its supplementary
// groups (both taken by the kernel at connect time, so a process cannot
// claim more than it had).
func PeerOf(c *net.UnixConn) (Peer, error) {
	rc, err := c.SyscallConn()
	if err != nil {
		return Peer{}, err
	}
	var p Peer
	var opErr error
	err = rc.Control(func(fd uintptr) {
		cred, err := unix.GetsockoptUcred(int(fd), unix.SOL_SOCKET, unix.SO_PEERCRED)
		if err != nil {
			opErr = fmt.Errorf("SO_PEERCRED: %w", err)
			return
		}
		p = Peer{PID: cred.Pid, UID: cred.Uid, GID: cred.Gid}
		p.Groups, opErr = peerGroups(int(fd))
	})
	if err != nil {
		return Peer{}, err
	}
	return p, opErr
}

// peerGroups reads SO_PEERGROUPS, growing the buffer as the kernel asks.
func peerGroups(fd int) ([]uint32, error) {
	buf := make([]uint32, 16)
	for {
		n := uint32(len(buf) * 4)
		_, _, e := unix.Syscall6(unix.SYS_GETSOCKOPT, uintptr(fd), unix.SOL_SOCKET, unix.SO_PEERGROUPS,
			uintptr(unsafe.Pointer(&buf[0])), uintptr(unsafe.Pointer(&n)), 0)
		switch e {
		case 0:
			return buf[:n/4], nil
		case syscall.ERANGE:
			if int(n/4) <= len(buf) || n > 1<<20 {
				return nil, fmt.Errorf("SO_PEERGROUPS: %w", e)
			}
			buf = make([]uint32, n/4)
		case syscall.ENOPROTOOPT:
			return nil, nil // kernel older than 4.13: the primary group only
		default:
			return nil, fmt.Errorf("SO_PEERGROUPS: %w", e)
		}
	}
}
