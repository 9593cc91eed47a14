//go:build !linux

package auth

import (
	"errors"
	"net"
)

// Peer is the process at the other end of a Unix socket.
type Peer struct {
	PID      int32
	UID, GID uint32
	Groups   []uint32
}

// PeerOf is Linux-only: elsewhere local clients authenticate with tokens.
func PeerOf(c *net.UnixConn) (Peer, error) {
	return Peer{}, errors.New("peer credentials are read on Linux only")
}
