package moverconn

import (
	"fmt"
	"os"

	"golang.org/x/sys/unix"
)

// memfd returns a new anonymous file in memory.
func memfd(name string) (*os.File, error) {
	fd, err := unix.MemfdCreate(name, unix.MFD_CLOEXEC)
	if err != nil {
		return nil, fmt.Errorf("ring: memfd_create: %w", err)
	}
	return os.NewFile(uintptr(fd), name), nil
}
