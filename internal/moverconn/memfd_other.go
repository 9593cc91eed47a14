//go:build !linux

package moverconn

import (
	"errors"
	"os"
)

// memfd is Linux's: elsewhere streams go through the socket.
func memfd(string) (*os.File, error) { return nil, errors.New("ring: no memfd on this system") }
