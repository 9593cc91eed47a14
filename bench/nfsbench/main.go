// Command nfsbench moves one file through `strata nfs` as an NFSv3 client
// would, for bench/mount.sh: this machine's kernel has no NFS client, so
// the client is the go-nfs-client library, sending 1 MiB WRITE and READ
// calls one at a time on one connection (the most the Linux client sends
// per call, and go-nfs answers a connection's calls in turn anyway).
//
//	nfsbench write -port 2049 -src FILE -dst /path   # create and write
//	nfsbench read  -port 2049 -src /path             # read to nowhere
//
// It prints the bytes moved; the script times it.
package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"os"

	nfsc "github.com/willscott/go-nfs-client/nfs"
	"github.com/willscott/go-nfs-client/nfs/rpc"
)

const call = 1 << 20

func main() {
	if len(os.Args) < 2 {
		fmt.Fprintln(os.Stderr, "usage: nfsbench write|read -port N -src ... [-dst /path]")
		os.Exit(2)
	}
	fs := flag.NewFlagSet(os.Args[1], flag.ExitOnError)
	port := fs.Int("port", 2049, "the export's port (MOUNT and NFS)")
	src := fs.String("src", "", "local file to write, or the export's file to read")
	dst := fs.String("dst", "", "the export's file to write")
	fs.Parse(os.Args[2:])
	n, err := run(os.Args[1], *port, *src, *dst)
	if err != nil {
		fmt.Fprintln(os.Stderr, "nfsbench:", err)
		os.Exit(1)
	}
	fmt.Println(n)
}

func run(op string, port int, src, dst string) (int64, error) {
	c, err := rpc.DialTCP("tcp", fmt.Sprintf("127.0.0.1:%d", port), os.Getuid() == 0)
	if err != nil {
		return 0, err
	}
	defer c.Close()
	v, err := (&nfsc.Mount{Client: c}).Mount("/", rpc.AuthNull)
	if err != nil {
		return 0, fmt.Errorf("mount: %w", err)
	}
	buf := make([]byte, call)
	var n int64
	switch op {
	case "write":
		in, err := os.Open(src)
		if err != nil {
			return 0, err
		}
		defer in.Close()
		f, err := v.OpenFile(dst, 0o644)
		if err != nil {
			return 0, err
		}
		for {
			k, rerr := io.ReadFull(in, buf)
			if k > 0 {
				if _, err := f.Write(buf[:k]); err != nil {
					return n, err
				}
				n += int64(k)
			}
			if rerr != nil {
				break
			}
		}
		return n, f.Close()
	case "read":
		f, err := v.Open(src)
		if err != nil {
			return 0, err
		}
		for {
			k, err := f.ReadAt(buf, n)
			n += int64(k)
			if errors.Is(err, io.EOF) || (err == nil && k == 0) {
				return n, nil
			}
			if err != nil {
				return n, err
			}
		}
	}
	return 0, fmt.Errorf("unknown operation %q", op)
}
