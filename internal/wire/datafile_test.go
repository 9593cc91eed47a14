package wire

import (
	"bufio"
	"bytes"
	"io"
	"math/rand/v2"
	"net"
	"os"
	"path/filepath"
	"testing"
)

// TestDataFile: a frame sent from a file carries exactly the file's bytes
// at any offset and length, whichever way it leaves: sendfile (a TCP
// connection), one read into a buffer (a connection the kernel cannot
// sendfile to, as TLS is) or the buffered writer alone.
func TestDataFile(t *testing.T) {
	data := make([]byte, 3<<20)
	for i := range data {
		data[i] = byte(rand.IntN(256))
	}
	f, err := os.Create(filepath.Join(t.TempDir(), "object"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if _, err := f.Write(data); err != nil {
		t.Fatal(err)
	}
	conns := map[string]func(t *testing.T) (net.Conn, net.Conn){
		"tcp": func(t *testing.T) (net.Conn, net.Conn) {
			ln, err := net.Listen("tcp", "127.0.0.1:0")
			if err != nil {
				t.Fatal(err)
			}
			defer ln.Close()
			c, err := net.Dial("tcp", ln.Addr().String())
			if err != nil {
				t.Fatal(err)
			}
			s, err := ln.Accept()
			if err != nil {
				t.Fatal(err)
			}
			return s, c
		},
		"pipe":     func(*testing.T) (net.Conn, net.Conn) { return net.Pipe() },
		"buffered": nil,
	}
	for name, pair := range conns {
		for _, r := range []struct{ off, n int64 }{{0, 100}, {0, 1 << 20}, {1, 1 << 20}, {4095, directMin}, {4096 + 7, 1<<20 + 3}, {3<<20 - 70000, 70000}} {
			var fw *Writer
			var src io.Reader
			var out bytes.Buffer
			var done chan error
			if pair == nil {
				fw, src = NewWriter(&out), &out
			} else {
				s, c := pair(t)
				defer s.Close()
				defer c.Close()
				fw = NewConnWriter(bufio.NewWriter(s), s)
				src, done = c, make(chan error, 1)
				go func() { done <- fw.DataFile(f, r.off, r.n, 42) }()
			}
			if pair == nil {
				if err := fw.DataFile(f, r.off, r.n, 42); err != nil {
					t.Fatal(err)
				}
			}
			fr := NewReader(src)
			h, err := fr.Next()
			if err != nil || h.Type != TypeData || h.Length != uint32(r.n) || h.CRC != 42 {
				t.Fatalf("%s %+v: header %+v, %v", name, r, h, err)
			}
			p := make([]byte, r.n)
			if _, err := io.ReadFull(src, p); err != nil {
				t.Fatalf("%s %+v: %v", name, r, err)
			}
			if !bytes.Equal(p, data[r.off:r.off+r.n]) {
				t.Fatalf("%s %+v: payload differs from the file", name, r)
			}
			if done != nil {
				if err := <-done; err != nil {
					t.Fatalf("%s %+v: %v", name, r, err)
				}
			}
		}
	}
}
