package wire

import (
	"fmt"
	"io"
	"net"
	"os"

	"golang.org/x/sys/unix"
)

// SendFile sends one marker byte on c with f attached (SCM_RIGHTS), or the
// byte alone when f is nil. Peers on one host pass open files this way so
// that bulk data skips the socket (see Request.Handle and Request.Source).
func SendFile(c *net.UnixConn, marker byte, f *os.File) error {
	var oob []byte
	if f != nil {
		oob = unix.UnixRights(int(f.Fd()))
	}
	_, _, err := c.WriteMsgUnix([]byte{marker}, oob, nil)
	return err
}

// ReceiveFile reads the marker byte SendFile sent and the file attached to
// it, if any. Nothing may be read from c through a buffer beforehand that
// could have consumed the marker: its file would be lost.
func ReceiveFile(c *net.UnixConn, name string) (byte, *os.File, error) {
	var b [1]byte
	oob := make([]byte, unix.CmsgSpace(4))
	n, oobn, flags, _, err := c.ReadMsgUnix(b[:], oob)
	if err == nil && n == 0 {
		err = io.ErrUnexpectedEOF
	}
	if err != nil {
		return 0, nil, err
	}
	var fds []int
	if msgs, err := unix.ParseSocketControlMessage(oob[:oobn]); err == nil {
		for i := range msgs {
			if rights, err := unix.ParseUnixRights(&msgs[i]); err == nil {
				fds = append(fds, rights...)
			}
		}
	}
	switch {
	case len(fds) == 0 && flags&unix.MSG_CTRUNC == 0:
		return b[0], nil, nil
	case len(fds) == 1 && flags&unix.MSG_CTRUNC == 0:
		unix.CloseOnExec(fds[0])
		return b[0], os.NewFile(uintptr(fds[0]), name), nil
	}
	for _, fd := range fds {
		unix.Close(fd)
	}
	return b[0], nil, fmt.Errorf("%w: marker %q came with %d files", ErrFrame, b[0], len(fds))
}
