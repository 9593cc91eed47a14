package pki

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"crypto/tls"
	"encoding/binary"
	"errors"
	"io"
	"net"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/strata-storage/strata/internal/testutil/tcppair"
)

// dataPair connects a client Channel through cw (which may alter what
// the client sends) to a server Channel, both handshaken.
func dataPair(t testing.TB, scfg, ccfg *tls.Config, cw func(net.Conn) net.Conn) (client, server *Channel) {
	t.Helper()
	nc, sc := tcppair.New(t, 0)
	if cw != nil {
		nc = cw(nc)
	}
	client, server = DataClient(nc, ccfg), DataServer(sc, scfg)
	errs := make(chan error, 1)
	go func() { errs <- server.HandshakeContext(context.Background()) }()
	if err := client.HandshakeContext(context.Background()); err != nil {
		t.Fatal(err)
	}
	if err := <-errs; err != nil {
		t.Fatal(err)
	}
	return client, server
}

// TestChannelIntegrity: bytes written in any sizes — one byte, a frame
// and either side of it, several frames in one write, a write of several
// buffers — arrive whole and in order both ways at once, whatever sizes
// the reader asks for (smaller than a frame: opened in place and handed
// out in pieces; larger: opened straight into the reader's buffer).
func TestChannelIntegrity(t *testing.T) {
	scfg, ccfg, _, _ := material(t)
	c, s := dataPair(t, scfg, ccfg, nil)
	sizes := []int{1, 16, MaxFrame - 1, MaxFrame, MaxFrame + 1, 100 << 10, 1 << 20, 3<<20 + 5, stageSize - lenSize - tagSize, stageSize}
	exchange(t, c, s, sizes, func(r bulkConn, total int64) ([32]byte, error) {
		h := sha256.New()
		for got, i := int64(0), 0; got < total; i++ {
			p := make([]byte, []int{7, 4096, MaxFrame, MaxFrame + 100, 1 << 20}[i%5])
			n, err := r.Read(p[:min(int64(len(p)), total-got)])
			h.Write(p[:n])
			got += int64(n)
			if err != nil {
				return [32]byte{}, err
			}
		}
		return [32]byte(h.Sum(nil)), nil
	})
	// The end of the stream is the end: EOF, not an error of the frames.
	c.Close()
	if n, err := s.Read(make([]byte, 10)); n != 0 || err != io.EOF {
		t.Errorf("after the peer closed: %d, %v", n, err)
	}
}

// TestChannelEpochs: across the frame count where the keys change, both
// sides change them together.
func TestChannelEpochs(t *testing.T) {
	scfg, _, anon, _ := material(t)
	c, s := dataPair(t, scfg, anon, nil)
	c.out.seq = 1<<epochBits - 2
	s.in.seq = 1<<epochBits - 2
	p := make([]byte, 64<<10) // a frame a write
	for i := range 5 {
		rand.Read(p)
		go c.Write(p)
		got := make([]byte, len(p))
		if _, err := io.ReadFull(s, got); err != nil || !bytes.Equal(got, p) {
			t.Fatalf("frame %d: %v", i, err)
		}
	}
	if c.out.epoch != 1 || s.in.epoch != 1 {
		t.Errorf("epochs %d, %d; want 1", c.out.epoch, s.in.epoch)
	}
}

// mangler is a client socket whose writes, once on, pass through f: the
// network between two hosts, altering what it carries.
type mangler struct {
	net.Conn
	mu sync.Mutex
	on bool
	f  func(p []byte) [][]byte
}

func (m *mangler) Write(p []byte) (int, error) {
	m.mu.Lock()
	on := m.on
	m.mu.Unlock()
	if !on {
		return m.Conn.Write(p)
	}
	for _, q := range m.f(bytes.Clone(p)) {
		if _, err := m.Conn.Write(q); err != nil {
			return 0, err
		}
	}
	return len(p), nil
}

// TestChannelTampered: a frame altered, dropped, replayed, swapped with
// the next or cut short is refused where it stands, and none of its bytes
// (nor any later) are handed out.
func TestChannelTampered(t *testing.T) {
	scfg, _, anon, _ := material(t)
	var held []byte
	cases := []struct {
		name string
		f    func(n int, p []byte) [][]byte // the client's nth frame
		want error
	}{
		{"a bit of the body", func(n int, p []byte) [][]byte {
			if n == 1 {
				p[100] ^= 1
			}
			return [][]byte{p}
		}, ErrFrame},
		{"the tag", func(n int, p []byte) [][]byte {
			if n == 1 {
				p[len(p)-1] ^= 0x80
			}
			return [][]byte{p}
		}, ErrFrame},
		{"the length", func(n int, p []byte) [][]byte {
			if n == 1 {
				binary.BigEndian.PutUint32(p, binary.BigEndian.Uint32(p)-1)
			}
			return [][]byte{p}
		}, ErrFrame},
		{"an impossible length", func(n int, p []byte) [][]byte {
			if n == 1 {
				binary.BigEndian.PutUint32(p, 1<<31)
			}
			return [][]byte{p}
		}, ErrFrame},
		{"dropped", func(n int, p []byte) [][]byte {
			if n == 1 {
				return nil
			}
			return [][]byte{p}
		}, ErrFrame},
		{"replayed", func(n int, p []byte) [][]byte {
			if n == 0 {
				return [][]byte{p, p}
			}
			return [][]byte{p}
		}, ErrFrame},
		{"swapped", func(n int, p []byte) [][]byte {
			switch n {
			case 1:
				held = p
				return nil
			case 2:
				return [][]byte{p, held}
			}
			return [][]byte{p}
		}, ErrFrame},
		{"cut short", func(n int, p []byte) [][]byte {
			switch {
			case n == 1:
				return [][]byte{p[:len(p)/2]}
			case n > 1:
				return nil
			}
			return [][]byte{p}
		}, io.ErrUnexpectedEOF},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var m *mangler
			n := 0
			c, s := dataPair(t, scfg, anon, func(nc net.Conn) net.Conn {
				m = &mangler{Conn: nc, f: func(p []byte) [][]byte { n++; return tc.f(n-1, p) }}
				return m
			})
			m.mu.Lock()
			m.on = true
			m.mu.Unlock()
			frames := make([][]byte, 4)
			for i := range frames {
				frames[i] = bytes.Repeat([]byte{byte('a' + i)}, 70<<10) // one frame, one socket write each
			}
			go func() {
				for i := range frames {
					c.Write(frames[i])
				}
				if tc.want == io.ErrUnexpectedEOF {
					c.Close()
				}
			}()
			got := make([]byte, 70<<10)
			if _, err := io.ReadFull(s, got); err != nil || got[0] != 'a' {
				t.Fatalf("first frame: %v", err)
			}
			s.SetReadDeadline(time.Now().Add(10 * time.Second))
			k, err := io.ReadFull(s, got)
			if !errors.Is(err, tc.want) || k != 0 {
				t.Fatalf("second frame: %d bytes, %v; want %v", k, err, tc.want)
			}
			if k, err := s.Read(got); k != 0 || err == nil {
				t.Fatalf("after a bad frame: %d bytes, %v", k, err)
			}
		})
	}
}

// TestChannelRefusesStrangers: the handshake is TLS's, with the data
// channel's protocol named in it. A server of another CA, a client
// certificate of another CA, and a peer speaking TLS records on either
// side are refused before any data moves, with the reason.
func TestChannelRefusesStrangers(t *testing.T) {
	scfg, _, anon, _ := material(t)
	_, other, otherAnon, _ := material(t)
	otherAnon.ServerName = "127.0.0.1"
	dial := func(t *testing.T, ln net.Listener, ccfg *tls.Config, records bool) error {
		nc, err := net.Dial("tcp", ln.Addr().String())
		if err != nil {
			t.Fatal(err)
		}
		defer nc.Close()
		nc.SetDeadline(time.Now().Add(10 * time.Second))
		if records {
			return tls.Client(nc, ccfg).Handshake()
		}
		return DataClient(nc, ccfg).HandshakeContext(context.Background())
	}
	serve := func(t *testing.T, wrap func(net.Listener) net.Listener) (net.Listener, chan error) {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { ln.Close() })
		errs := make(chan error, 1)
		go func() {
			c, err := wrap(ln).Accept()
			if err != nil {
				errs <- err
				return
			}
			defer c.Close()
			c.SetDeadline(time.Now().Add(10 * time.Second))
			if ch, ok := c.(*Channel); ok {
				errs <- ch.HandshakeContext(context.Background())
				return
			}
			errs <- c.(*tls.Conn).Handshake()
		}()
		return ln, errs
	}
	data := func(ln net.Listener) net.Listener { return NewDataListener(ln, scfg) }
	for _, tc := range []struct {
		name      string
		listen    func(net.Listener) net.Listener
		client    *tls.Config
		records   bool
		clientErr string
		serverErr string
	}{
		{"a server of another CA", data, otherAnon, false, "certificate signed by unknown authority", "remote error"},
		{"a client certificate of another CA", data, func() *tls.Config { c := other.Clone(); c.RootCAs = anon.RootCAs; return c }(), false, "remote error", "certificate signed by unknown authority"},
		{"a server speaking TLS records", func(ln net.Listener) net.Listener { return tls.NewListener(ln, scfg) }, anon, false, "does not speak " + DataProtocol, ""},
		{"a client speaking TLS records", data, anon, true, "", "does not speak " + DataProtocol},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ln, errs := serve(t, tc.listen)
			err := dial(t, ln, tc.client, tc.records)
			if tc.clientErr != "" && (err == nil || !strings.Contains(err.Error(), tc.clientErr)) {
				t.Errorf("client: %v, want %q", err, tc.clientErr)
			}
			serr := <-errs
			if tc.serverErr != "" && (serr == nil || !strings.Contains(serr.Error(), tc.serverErr)) {
				t.Errorf("server: %v, want %q", serr, tc.serverErr)
			}
		})
	}
}

// TestChannelNoSendfile: a Channel is no syscall.Conn, so nothing (the
// wire package's sendfile of a stored chunk) can hand its socket bytes
// that bypass the cipher.
func TestChannelNoSendfile(t *testing.T) {
	var c net.Conn = &Channel{}
	if _, ok := c.(syscall.Conn); ok {
		t.Fatal("a Channel exposes its socket")
	}
}

// BenchmarkChannelWrite: 1 MiB writes on a Channel, on a gathered Conn
// and on crypto/tls alone, the receiver reading into a 1 MiB buffer.
func BenchmarkChannelWrite(b *testing.B) {
	scfg, _, anon, _ := material(b)
	for _, mode := range []string{"crypto-tls", "gathered", "channel"} {
		b.Run(mode, func(b *testing.B) {
			var w, r net.Conn
			switch mode {
			case "channel":
				w, r = dataPair(b, scfg, anon, nil)
			case "gathered":
				w, r = pair(b, scfg, anon)
			default:
				c, s := pair(b, scfg, anon)
				w, r = c.Conn, s.Conn
			}
			go func() {
				buf := make([]byte, 1<<20)
				for {
					if _, err := r.Read(buf); err != nil {
						return
					}
				}
			}()
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

// fixedKeys stands in for a handshake's exporter.
func fixedKeys(label string, context []byte, n int) ([]byte, error) {
	h := sha256.Sum256(append([]byte(label), context...))
	return h[:n], nil
}

// readConn is a socket that brings the bytes of r.
type readConn struct {
	net.Conn
	r io.Reader
}

func (c readConn) Read(p []byte) (int, error) { return c.r.Read(p) }
func (c readConn) Close() error               { return nil }

// sealed is frames as a client writes them.
func sealed(t testing.TB, sizes ...int) []byte {
	var buf bytes.Buffer
	w := &Channel{nc: writeConn{&buf}, done: true, out: half{ekm: fixedKeys, label: labels[0]}}
	for _, n := range sizes {
		if _, err := w.Write(bytes.Repeat([]byte{'x'}, n)); err != nil {
			t.Fatal(err)
		}
	}
	return buf.Bytes()
}

type writeConn struct{ w io.Writer }

func (c writeConn) Read([]byte) (int, error)         { return 0, io.EOF }
func (c writeConn) Write(p []byte) (int, error)      { return c.w.Write(p) }
func (c writeConn) Close() error                     { return nil }
func (c writeConn) LocalAddr() net.Addr              { return nil }
func (c writeConn) RemoteAddr() net.Addr             { return nil }
func (c writeConn) SetDeadline(time.Time) error      { return nil }
func (c writeConn) SetReadDeadline(time.Time) error  { return nil }
func (c writeConn) SetWriteDeadline(time.Time) error { return nil }

// FuzzChannelRead: whatever a peer sends, a Channel's reader hands out
// only the plaintext of frames sealed with its keys, in order, and ends
// with an error; it never panics nor takes a frame larger than MaxFrame.
func FuzzChannelRead(f *testing.F) {
	f.Add(sealed(f, 1, 100, 5000))
	f.Add(sealed(f, stageSize, 10))
	f.Add([]byte{0, 0, 0, 17})
	f.Add([]byte{0xff, 0xff, 0xff, 0xff, 1, 2, 3})
	f.Fuzz(func(t *testing.T, data []byte) {
		c := &Channel{nc: readConn{r: bytes.NewReader(data)}, done: true, in: half{ekm: fixedKeys, label: labels[0]}}
		var got int
		for i := 0; ; i++ {
			p := make([]byte, []int{3, 4096, MaxFrame}[i%3])
			n, err := c.Read(p)
			if bytes.Count(p[:n], []byte{'x'}) != n {
				t.Fatalf("%d bytes handed out that were never sealed", n)
			}
			got += n
			if err != nil {
				break
			}
			if n == 0 && i > len(data) {
				t.Fatal("no progress")
			}
		}
		if got > len(data) {
			t.Fatalf("%d bytes out of %d in", got, len(data))
		}
	})
}
