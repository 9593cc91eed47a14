package pki

import (
	"bytes"
	"crypto/rand"
	"crypto/sha256"
	"crypto/tls"
	"errors"
	"io"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"
)

// material makes a data directory's CA and server certificate for
// 127.0.0.1 and a client certificate for "alice", and returns configs.
func material(t testing.TB) (server, client, anon *tls.Config, f Files) {
	t.Helper()
	f = In(filepath.Join(t.TempDir(), "tls"))
	if err := Ensure(f, []string{"127.0.0.1", "localhost"}); err != nil {
		t.Fatal(err)
	}
	dir := filepath.Dir(f.CA)
	cc, ck := filepath.Join(dir, "alice.pem"), filepath.Join(dir, "alice-key.pem")
	if err := Issue(f, cc, ck, nil, "alice", false); err != nil {
		t.Fatal(err)
	}
	var err error
	if server, err = ServerConfig(f.Cert, f.Key, f.CA); err != nil {
		t.Fatal(err)
	}
	if client, err = ClientConfig(f.CA, cc, ck); err != nil {
		t.Fatal(err)
	}
	if anon, err = ClientConfig(f.CA, "", ""); err != nil {
		t.Fatal(err)
	}
	client.ServerName, anon.ServerName = "127.0.0.1", "127.0.0.1"
	return
}

func TestMaterial(t *testing.T) {
	_, _, _, f := material(t)
	for _, p := range []string{f.CAKey, f.Key} {
		fi, err := os.Stat(p)
		if err != nil {
			t.Fatal(err)
		}
		if fi.Mode().Perm() != 0o600 {
			t.Errorf("%s: mode %o, want 0600", p, fi.Mode().Perm())
		}
	}
	// Ensure again: the certificate covers the hosts and is kept; a new
	// host has it issued again, from the same CA.
	before, _ := os.ReadFile(f.Cert)
	if err := Ensure(f, []string{"127.0.0.1"}); err != nil {
		t.Fatal(err)
	}
	if after, _ := os.ReadFile(f.Cert); !bytes.Equal(before, after) {
		t.Error("a certificate covering the hosts was issued again")
	}
	ca, _ := os.ReadFile(f.CA)
	if err := Ensure(f, []string{"127.0.0.1", "mover7.example"}); err != nil {
		t.Fatal(err)
	}
	cert, err := readCert(f.Cert)
	if err != nil || !covers(cert, []string{"mover7.example", "127.0.0.1"}) {
		t.Fatalf("reissued certificate does not cover the new host: %v", err)
	}
	if ca2, _ := os.ReadFile(f.CA); !bytes.Equal(ca, ca2) {
		t.Error("the CA changed")
	}
	if _, err := Pool(f.Key); err == nil || !strings.Contains(err.Error(), "no PEM certificates") {
		t.Errorf("a key as CA bundle: %v", err)
	}
}

// pair connects a gathered client Conn to a gathered server Conn over
// loopback TCP.
func pair(t testing.TB, scfg, ccfg *tls.Config) (client, server *Conn) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	tl := NewListener(ln, scfg)
	accepted := make(chan net.Conn, 1)
	go func() {
		c, err := tl.Accept()
		if err != nil {
			accepted <- nil
			return
		}
		accepted <- c
	}()
	nc, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	client = Client(nc, ccfg)
	sc := <-accepted
	if sc == nil {
		t.Fatal("accept failed")
	}
	server = sc.(*Conn)
	t.Cleanup(func() { client.Close(); server.Close() })
	return client, server
}

// TestConnIntegrity: what goes in comes out, byte for byte, in both
// directions at once, for writes of every size around the record and
// gather sizes, and from WriteBuffers; the client certificate is seen by
// the server through the wrapper.
func TestConnIntegrity(t *testing.T) {
	scfg, ccfg, _, _ := material(t)
	c, s := pair(t, scfg, ccfg)
	sizes := []int{1, maxRecord - 1, maxRecord, maxRecord + 1, 100 << 10, gatherSize - 7, gatherSize, gatherSize + 1, 1 << 20, 3<<20 + 5}
	exchange(t, c, s, sizes, func(r bulkConn, total int64) ([32]byte, error) {
		h := sha256.New()
		_, err := io.CopyN(h, r, total)
		return [32]byte(h.Sum(nil)), err
	})
}

// bulkConn is a data connection under test: Conn or Channel.
type bulkConn interface {
	io.ReadWriter
	WriteBuffers(bufs ...[]byte) (int64, error)
	ConnectionState() tls.ConnectionState
}

// exchange writes random bytes of sizes from c to s and from s to c at
// once, by Write and WriteBuffers in turn, reads them with recv (which
// returns their SHA-256), and checks both ways; the server must see the
// client's certificate ("alice").
func exchange(t *testing.T, c, s bulkConn, sizes []int, recv func(r bulkConn, total int64) ([32]byte, error)) {
	t.Helper()
	var total int64
	for _, n := range sizes {
		total += int64(n)
	}
	send := func(w bulkConn) ([32]byte, error) {
		h := sha256.New()
		for i, n := range sizes {
			p := make([]byte, n)
			rand.Read(p)
			h.Write(p)
			var err error
			if i%2 == 0 {
				_, err = w.Write(p)
			} else {
				_, err = w.WriteBuffers(p[:n/3], p[n/3:])
			}
			if err != nil {
				return [32]byte{}, err
			}
		}
		return [32]byte(h.Sum(nil)), nil
	}
	var wg sync.WaitGroup
	var sent, got [2][32]byte
	var errs [4]error
	wg.Add(4)
	go func() { defer wg.Done(); sent[0], errs[0] = send(c) }()
	go func() { defer wg.Done(); sent[1], errs[1] = send(s) }()
	go func() { defer wg.Done(); got[0], errs[2] = recv(s, total) }()
	go func() { defer wg.Done(); got[1], errs[3] = recv(c, total) }()
	wg.Wait()
	if err := errors.Join(errs[:]...); err != nil {
		t.Fatal(err)
	}
	if sent != got {
		t.Fatal("bytes changed on the way")
	}
	if certs := s.ConnectionState().PeerCertificates; len(certs) == 0 || certs[0].Subject.CommonName != "alice" {
		t.Errorf("server sees client certificate %v", certs)
	}
}

// TestConnConcurrentWriters: Writes from several goroutines (which a
// frame protocol never does, but an alert or a Close may) keep every
// Write's bytes whole and in one piece on the wire.
func TestConnConcurrentWriters(t *testing.T) {
	scfg, _, anon, _ := material(t)
	c, s := pair(t, scfg, anon)
	const writers, each, size = 4, 8, 200 << 10
	var wg sync.WaitGroup
	for w := range writers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			p := bytes.Repeat([]byte{byte('a' + w)}, size)
			for range each {
				if _, err := c.Write(p); err != nil {
					t.Error(err)
					return
				}
			}
		}()
	}
	buf := make([]byte, size)
	for range writers * each {
		if _, err := io.ReadFull(s, buf); err != nil {
			t.Fatal(err)
		}
		if bytes.Count(buf, buf[:1]) != size {
			t.Fatal("two writes interleaved")
		}
	}
	wg.Wait()
}

// TestConnRefusesUnknownCA: the wrapper verifies as crypto/tls does.
func TestConnRefusesUnknownCA(t *testing.T) {
	scfg, _, _, _ := material(t)
	_, _, other, _ := material(t)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	go func() {
		c, err := NewListener(ln, scfg).Accept()
		if err == nil {
			c.(*Conn).Handshake()
			c.Close()
		}
	}()
	nc, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	c := Client(nc, other)
	defer c.Close()
	c.SetDeadline(time.Now().Add(10 * time.Second))
	if err := c.Handshake(); err == nil || !strings.Contains(err.Error(), "certificate") {
		t.Fatalf("handshake with a server of another CA: %v", err)
	}
}

// BenchmarkWrite compares 1 MiB writes on a gathered Conn with the same on
// crypto/tls alone (the receiver discards).
func BenchmarkWrite(b *testing.B) {
	scfg, _, anon, _ := material(b)
	for _, mode := range []string{"crypto-tls", "gathered"} {
		b.Run(mode, func(b *testing.B) {
			ln, err := net.Listen("tcp", "127.0.0.1:0")
			if err != nil {
				b.Fatal(err)
			}
			defer ln.Close()
			go func() {
				c, err := tls.NewListener(ln, scfg).Accept()
				if err == nil {
					io.Copy(io.Discard, c)
					c.Close()
				}
			}()
			nc, err := net.Dial("tcp", ln.Addr().String())
			if err != nil {
				b.Fatal(err)
			}
			var w io.WriteCloser = tls.Client(nc, anon)
			if mode == "gathered" {
				w = Client(nc, anon)
			}
			defer w.Close()
			p := make([]byte, 1<<20)
			b.SetBytes(int64(len(p)))
			for b.Loop() {
				if _, err := w.Write(p); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// TestGatherReads: the read buffer under crypto/tls hands on exactly what
// the socket brought, whatever the sizes asked — smaller than one read
// from the socket, across two, or large enough to go to the socket
// directly — and then the socket's end.
func TestGatherReads(t *testing.T) {
	a, b := net.Pipe()
	data := make([]byte, 3*readSize+12345)
	rand.Read(data)
	go func() {
		for p := data; len(p) > 0; {
			k := min(len(p), 100<<10+7)
			a.Write(p[:k])
			p = p[k:]
		}
		a.Close()
	}()
	g := &gather{Conn: b}
	var got []byte
	for i := 0; ; i++ {
		p := make([]byte, []int{1, 5000, readSize, readSize + 1, 16 << 10}[i%5])
		n, err := g.Read(p)
		got = append(got, p[:n]...)
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
	}
	if !bytes.Equal(got, data) {
		t.Fatalf("%d bytes read, %d written, or changed", len(got), len(data))
	}
	if g.rin != nil {
		t.Error("the read buffer is held after the end")
	}
}
