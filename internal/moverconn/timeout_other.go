//go:build !linux

package moverconn

import "syscall"

// userTimeout is Linux's TCP_USER_TIMEOUT; elsewhere keepalive alone
// finds dead peers.
func userTimeout(string, string, syscall.RawConn) error { return nil }
