package wire

import (
	"net"
	"os"
	"path/filepath"
	"testing"
)

func unixPair(t *testing.T) (*net.UnixConn, *net.UnixConn) {
	ln, err := net.Listen("unix", filepath.Join(t.TempDir(), "s"))
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	acc := make(chan net.Conn, 1)
	go func() { c, _ := ln.Accept(); acc <- c }()
	a, err := net.Dial("unix", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	b := <-acc
	t.Cleanup(func() { a.Close(); b.Close() })
	return a.(*net.UnixConn), b.(*net.UnixConn)
}

func TestSendReceiveFile(t *testing.T) {
	a, b := unixPair(t)
	p := filepath.Join(t.TempDir(), "f")
	os.WriteFile(p, []byte("passed"), 0o644)
	f, err := os.Open(p)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()

	if err := SendFile(a, 'F', f); err != nil {
		t.Fatal(err)
	}
	m, g, err := ReceiveFile(b, "got")
	if err != nil || m != 'F' || g == nil {
		t.Fatalf("receive: %q %v %v", m, g, err)
	}
	buf := make([]byte, 6)
	if _, err := g.ReadAt(buf, 0); err != nil || string(buf) != "passed" {
		t.Fatalf("read the passed file: %q %v", buf, err)
	}
	g.Close()

	if err := SendFile(a, 'S', nil); err != nil {
		t.Fatal(err)
	}
	if m, g, err := ReceiveFile(b, "none"); err != nil || m != 'S' || g != nil {
		t.Fatalf("marker alone: %q %v %v", m, g, err)
	}

	a.Close()
	if _, _, err := ReceiveFile(b, "eof"); err == nil {
		t.Fatal("receive from a closed peer succeeded")
	}
}

// Source.Len against counting the stripe's bytes unit by unit.
func TestSourceLen(t *testing.T) {
	for size := int64(0); size < 40; size++ {
		for unit := int64(1); unit < 7; unit++ {
			for width := 1; width < 5; width++ {
				var total int64
				for k := range width {
					s := Source{Size: size, Unit: unit, Width: width, Stripe: k}
					if err := s.Check(); err != nil {
						t.Fatal(err)
					}
					var n int64
					for u := int64(k); u*unit < size; u += int64(width) {
						n += min(unit, size-u*unit)
					}
					if got := s.Len(); got != n {
						t.Fatalf("%+v: Len %d, want %d", s, got, n)
					}
					total += n
				}
				if total != size {
					t.Fatalf("size %d unit %d width %d: stripes hold %d bytes", size, unit, width, total)
				}
			}
		}
	}
	for _, s := range []Source{{Size: -1, Unit: 1, Width: 1}, {Size: 1, Unit: 0, Width: 1}, {Size: 1, Unit: 1, Width: 0}, {Size: 1, Unit: 1, Width: 2, Stripe: 2}, {Size: 1, Unit: 1, Width: 2, Stripe: -1}} {
		if err := s.Check(); err == nil {
			t.Errorf("%+v passed its check", s)
		}
	}
}
