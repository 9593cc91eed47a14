package moverconn

import (
	"syscall"

	"golang.org/x/sys/unix"
)

// userTimeout sets TCP_USER_TIMEOUT on a TCP socket: data sent and not
// acknowledged for UserTimeout fails the connection. Keepalive (KeepAlive)
// finds a dead peer while a connection waits; this finds it while a
// request is on its way, which without it the kernel retransmits for a
// quarter of an hour. Other sockets (Unix) are left alone.
func userTimeout(network, _ string, c syscall.RawConn) error {
	if network != "tcp" && network != "tcp4" && network != "tcp6" {
		return nil
	}
	var serr error
	err := c.Control(func(fd uintptr) {
		serr = unix.SetsockoptInt(int(fd), unix.IPPROTO_TCP, unix.TCP_USER_TIMEOUT, int(UserTimeout.Milliseconds()))
	})
	if err != nil {
		return err
	}
	return serr
}
