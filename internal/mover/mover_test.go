package mover

import (
	"bytes"
	"context"
	"crypto/tls"
	"errors"
	"hash/crc32"
	"io"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/strata-storage/strata/internal/api"
	"github.com/strata-storage/strata/internal/disk"
	"github.com/strata-storage/strata/internal/moverconn"
	"github.com/strata-storage/strata/internal/pki"
	"github.com/strata-storage/strata/internal/testutil/tlstest"
	"github.com/strata-storage/strata/internal/token"
	"github.com/strata-storage/strata/internal/wire"
)

type fixture struct {
	m      *Mover
	signer *token.Signer
	addr   string
	ep     moverconn.Endpoint // TCP and the Unix socket, or TLS
	plain  moverconn.Endpoint // TCP and the Unix socket
	tlsEP  moverconn.Endpoint // TCP with TLS
	tlsCfg *tls.Config        // trusting the mover's certificate
	pool   *moverconn.Pool
	dir    string // the device's directory
	tr     string // transport: tcp, tls, unix (streams) or handle
}

// start runs a mover with one device on TCP and on a Unix socket; the
// fixture's pool reaches it over TCP unless the test says otherwise.
func start(t *testing.T) *fixture { return startWith(t, disk.Options{Capacity: 64 << 20}) }

func startWith(t *testing.T, o disk.Options) *fixture {
	dir := t.TempDir()
	d, err := disk.Open("d0", dir, o)
	if err != nil {
		t.Fatal(err)
	}
	signer := token.NewSigner([]byte("test secret"))
	m := New("m0", []*disk.Device{d}, signer, nil)
	m.SetEpoch(5)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go m.Serve(ln)
	sock := filepath.Join(t.TempDir(), "m.sock")
	ul, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	go m.Serve(ul)
	srv, cli := tlstest.Configs(t)
	tl, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go m.Serve(pki.NewDataListener(tl, srv))
	f := &fixture{m: m, signer: signer, addr: ln.Addr().String(), pool: moverconn.NewPool(), dir: dir, tr: "tcp"}
	f.plain = moverconn.Endpoint{Addr: f.addr, Socket: sock, Host: moverconn.HostID()}
	f.tlsEP, f.tlsCfg = moverconn.Endpoint{Addr: tl.Addr().String(), TLS: true}, cli
	f.ep = f.plain
	f.pool.SetTCPOnly(true)
	t.Cleanup(func() { f.pool.Close(); m.Close(); d.Close() })
	return f
}

func (f *fixture) tok(op, obj string, max int64, epoch int64, exp time.Duration) string {
	return f.signer.Sign(token.Claims{Op: op, Device: "d0", Object: obj, MaxLen: max, Epoch: epoch, Expires: time.Now().Add(exp).Unix()})
}

func (f *fixture) write(t *testing.T, tok, obj string, data []byte) (wire.Status, error) {
	c, err := f.pool.Get(context.Background(), f.ep)
	if err != nil {
		t.Fatal(err)
	}
	defer f.pool.Put(c)
	return c.Write(context.Background(), wire.Request{Op: token.OpWrite, Token: tok, Device: "d0", Object: obj}, bytes.NewReader(data), make([]byte, moverconn.FrameSize), nil)
}

func (f *fixture) read(t *testing.T, tok, obj string) ([]byte, error) {
	c, err := f.pool.Get(context.Background(), f.ep)
	if err != nil {
		t.Fatal(err)
	}
	defer f.pool.Put(c)
	var out bytes.Buffer
	_, err = c.Read(context.Background(), wire.Request{Op: token.OpRead, Token: tok, Device: "d0", Object: obj}, &out, make([]byte, moverconn.FrameSize))
	return out.Bytes(), err
}

// transports runs fn over TCP, over TCP with TLS (where chunks cannot go
// by sendfile), over the Unix socket streaming, and over the Unix socket
// with the mover handing over its files.
func transports(t *testing.T, fn func(t *testing.T, f *fixture)) {
	for _, tr := range []string{"tcp", "tls", "unix", "handle"} {
		t.Run(tr, func(t *testing.T) {
			f := start(t)
			f.use(tr)
			fn(t, f)
		})
	}
}

func (f *fixture) use(tr string) {
	f.tr = tr
	f.ep, f.pool.TLS = f.plain, nil
	if tr == "tls" {
		f.ep, f.pool.TLS = f.tlsEP, f.tlsCfg
	}
	f.pool.SetTCPOnly(tr == "tcp" || tr == "tls")
	f.pool.SetHandles(tr == "handle")
}

func TestWriteReadDelete(t *testing.T) { transports(t, testWriteReadDelete) }

func testWriteReadDelete(t *testing.T, f *fixture) {
	data := bytes.Repeat([]byte("strata"), 500000)
	st, err := f.write(t, f.tok(token.OpWrite, "o1", int64(len(data)), 5, time.Minute), "o1", data)
	if err != nil {
		t.Fatal(err)
	}
	if st.Length != int64(len(data)) || !f.signer.CheckReceipt(st.Receipt, "d0", "o1", st.Length, st.CRC32C) {
		t.Fatalf("status: %+v", st)
	}
	got, err := f.read(t, f.tok(token.OpRead, "o1", 0, 5, time.Minute), "o1")
	if err != nil || !bytes.Equal(got, data) {
		t.Fatalf("read back: %v", err)
	}
	c, _ := f.pool.Get(context.Background(), f.ep)
	if _, err := c.Do(context.Background(), wire.Request{Op: token.OpDelete, Token: f.tok(token.OpDelete, "o1", 0, 5, time.Minute), Device: "d0", Object: "o1"}); err != nil {
		t.Fatal(err)
	}
	f.pool.Put(c)
	if _, err := f.read(t, f.tok(token.OpRead, "o1", 0, 5, time.Minute), "o1"); !errors.Is(err, api.ErrNotFound) {
		t.Fatalf("read after delete: %v", err)
	}
}

// Refused requests get a clear error, the connection stays usable, and the
// mover keeps serving.
func TestRefusals(t *testing.T) {
	f := start(t)
	data := make([]byte, 3<<20)
	cases := []struct {
		name string
		tok  string
		obj  string
		want error
	}{
		{"garbage token", "nonsense", "a", api.ErrDenied},
		{"other key", token.NewSigner([]byte("other")).Sign(token.Claims{Op: token.OpWrite, Device: "d0", Object: "a", MaxLen: 1 << 30, Epoch: 5, Expires: time.Now().Add(time.Minute).Unix()}), "a", api.ErrDenied},
		{"wrong object", f.tok(token.OpWrite, "b", 1<<30, 5, time.Minute), "a", api.ErrDenied},
		{"read token", f.tok(token.OpRead, "a", 1<<30, 5, time.Minute), "a", api.ErrDenied},
		{"expired", f.tok(token.OpWrite, "a", 1<<30, 5, -time.Minute), "a", api.ErrDenied},
		{"stale epoch", f.tok(token.OpWrite, "a", 1<<30, 4, time.Minute), "a", api.ErrRestarted},
		{"over reservation", f.tok(token.OpWrite, "a", 1<<20, 5, time.Minute), "a", api.ErrNoSpace},
		{"over capacity", f.tok(token.OpWrite, "a", 1<<30, 5, time.Minute), "a", api.ErrNoSpace},
	}
	c, err := f.pool.Get(context.Background(), f.ep)
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, err := c.Write(context.Background(), wire.Request{Op: token.OpWrite, Token: tc.tok, Device: "d0", Object: tc.obj}, bytes.NewReader(data), make([]byte, moverconn.FrameSize), nil)
			if !errors.Is(err, tc.want) {
				t.Fatalf("want %v, got %v", tc.want, err)
			}
			if c.Broken() {
				t.Fatal("a refusal broke the connection")
			}
		})
	}
	f.pool.Put(c)
	// The same pooled connection then carries a good write.
	if _, err := f.write(t, f.tok(token.OpWrite, "a", int64(len(data)), 5, time.Minute), "a", data); err != nil {
		t.Fatalf("after refusals: %v", err)
	}
	// A newer epoch raises the bar for older tokens.
	if _, err := f.read(t, f.tok(token.OpRead, "a", 0, 6, time.Minute), "a"); err != nil {
		t.Fatal(err)
	}
	if _, err := f.read(t, f.tok(token.OpRead, "a", 0, 5, time.Minute), "a"); !errors.Is(err, api.ErrRestarted) {
		t.Fatalf("epoch 5 token after epoch 6: %v", err)
	}
}

func TestGarbageDropsOnlyThatConnection(t *testing.T) {
	f := start(t)
	for _, junk := range [][]byte{
		[]byte("GET / HTTP/1.1\r\n\r\n"),
		{4, 0, 0, 0, 0xff, 0xff, 0xff, 0xff, 0, 0, 0, 0},
		{1, 0, 0, 0, 0, 0, 0, 5, 0, 0, 0, 0, 'h', 'e', 'l', 'l', 'o'},
	} {
		c, err := net.Dial("tcp", f.addr)
		if err != nil {
			t.Fatal(err)
		}
		c.Write(junk)
		c.SetReadDeadline(time.Now().Add(5 * time.Second))
		io.Copy(io.Discard, c) // the mover closes it
		c.Close()
	}
	data := []byte("still serving")
	if _, err := f.write(t, f.tok(token.OpWrite, "z", int64(len(data)), 5, time.Minute), "z", data); err != nil {
		t.Fatalf("mover stopped serving: %v", err)
	}
}

func TestCorruptFrameRejected(t *testing.T) {
	f := start(t)
	// Hand-craft a write whose data frame CRC does not match its payload.
	c, err := net.Dial("tcp", f.addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	fw, fr := wire.NewWriter(c), wire.NewReader(c)
	fw.Msg(wire.Request{Op: token.OpWrite, Token: f.tok(token.OpWrite, "x", 100, 5, time.Minute), Device: "d0", Object: "x"})
	var hdr [wire.HeaderSize]byte
	wire.PutHeader(hdr[:], wire.Header{Type: wire.TypeData, Length: 4, CRC: 12345})
	c.Write(hdr[:])
	c.Write([]byte("data"))
	fw.End(0)
	var st wire.Status
	err = fr.ReadMsg(&st)
	var se *wire.StatusError
	if !errors.As(err, &se) || se.Status.Code != api.CodeCorrupt {
		t.Fatalf("want corrupt refusal, got %v", err)
	}
	if _, err := f.read(t, f.tok(token.OpRead, "x", 0, 5, time.Minute), "x"); !errors.Is(err, api.ErrNotFound) {
		t.Fatalf("damaged write left an object: %v", err)
	}
}

func (f *fixture) readRange(t *testing.T, obj string, off, n int64, verify bool) ([]byte, error) {
	var out bytes.Buffer
	err := f.readInto(t, obj, off, n, verify, &out)
	return out.Bytes(), err
}

func (f *fixture) readInto(t *testing.T, obj string, off, n int64, verify bool, dst io.Writer) error {
	c, err := f.pool.Get(context.Background(), f.ep)
	if err != nil {
		t.Fatal(err)
	}
	defer f.pool.Put(c)
	req := wire.Request{Op: token.OpRead, Token: f.tok(token.OpRead, obj, 0, 5, time.Minute), Device: "d0", Object: obj, Offset: off, Length: n, Verify: verify}
	_, err = c.Read(context.Background(), req, dst, make([]byte, moverconn.FrameSize))
	return err
}

// frames is a FrameSink: it owns the buffers Read fills and checks every
// CRC handed over with them.
type frames struct {
	t    *testing.T
	data []byte
}

func (s *frames) Buffer(n int) []byte { return make([]byte, n, moverconn.FrameSize) }

func (s *frames) Deliver(p []byte, crc uint32) error {
	if got := crc32.Checksum(p, wire.Castagnoli); got != crc {
		s.t.Errorf("frame of %d bytes delivered with crc32c %08x, its data has %08x", len(p), crc, got)
	}
	s.data = append(s.data, p...)
	return nil
}

func (s *frames) Write(p []byte) (int, error) {
	s.t.Error("Write called on a moverconn.FrameSink")
	return len(p), nil
}

// Ranges are served whole chunks by sendfile and partial chunks read and
// verified, or everything verified on request; every combination returns
// exactly the bytes asked for, over both transports.
func TestReadRanges(t *testing.T) {
	transports(t, func(t *testing.T, f *fixture) {
		data := make([]byte, 3*disk.ChunkSize+12345)
		for i := range data {
			data[i] = byte(i * 7 / 3)
		}
		if _, err := f.write(t, f.tok(token.OpWrite, "r", int64(len(data)), 5, time.Minute), "r", data); err != nil {
			t.Fatal(err)
		}
		const C = disk.ChunkSize
		cases := []struct{ off, n int64 }{
			{0, 0}, {0, 1}, {0, C}, {0, C + 1}, {1, C}, {C - 1, 2}, {C, C}, {C, 2 * C}, {C + 5, 2*C - 5},
			{3 * C, 0}, {3*C + 12344, 1}, {int64(len(data)) - 1, 0}, {12345, 0}, {int64(len(data)), 0},
		}
		for _, tc := range cases {
			for _, verify := range []bool{false, true} {
				got, err := f.readRange(t, "r", tc.off, tc.n, verify)
				if err != nil {
					t.Fatalf("range %d+%d verify=%v: %v", tc.off, tc.n, verify, err)
				}
				end := int64(len(data))
				if tc.n > 0 {
					end = tc.off + tc.n
				}
				if !bytes.Equal(got, data[tc.off:end]) {
					t.Fatalf("range %d+%d verify=%v: %d bytes differ from the %d written", tc.off, tc.n, verify, len(got), end-tc.off)
				}
				sink := &frames{t: t}
				if err := f.readInto(t, "r", tc.off, tc.n, verify, sink); err != nil {
					t.Fatalf("range %d+%d verify=%v into frames: %v", tc.off, tc.n, verify, err)
				}
				if !bytes.Equal(sink.data, data[tc.off:end]) {
					t.Fatalf("range %d+%d verify=%v into frames: %d bytes differ from the %d written", tc.off, tc.n, verify, len(sink.data), end-tc.off)
				}
			}
		}
	})
}

// A reader on the mover's host is handed the file of an uncapped device
// only when it asks over the Unix socket; a capped device always streams,
// so its cap holds.
func TestHandOver(t *testing.T) {
	data := bytes.Repeat([]byte("handover"), 300000)
	for _, tc := range []struct {
		tr     string
		bw     int64
		handed int64
	}{
		{"handle", 0, 1},
		{"unix", 0, 0},
		{"tcp", 0, 0},
		{"handle", 1 << 30, 0},
	} {
		f := startWith(t, disk.Options{Capacity: 64 << 20, Bandwidth: tc.bw})
		f.use(tc.tr)
		if _, err := f.write(t, f.tok(token.OpWrite, "h", int64(len(data)), 5, time.Minute), "h", data); err != nil {
			t.Fatal(err)
		}
		got, err := f.readRange(t, "h", 0, 0, false)
		if err != nil || !bytes.Equal(got, data) {
			t.Fatalf("%s, cap %d: read back %d bytes: %v", tc.tr, tc.bw, len(got), err)
		}
		if n := f.m.Stats().FilesHanded; n != tc.handed {
			t.Errorf("%s, cap %d: %d files handed over, want %d", tc.tr, tc.bw, n, tc.handed)
		}
		// A refused read that asked for a handle gets the refusal, and the
		// connection stays in step for the next read.
		if _, err := f.readRange(t, "missing", 0, 0, false); !errors.Is(err, api.ErrNotFound) {
			t.Fatalf("%s: read of a missing object: %v", tc.tr, err)
		}
		if got, err := f.readRange(t, "h", 5, 10, false); err != nil || !bytes.Equal(got, data[5:15]) {
			t.Fatalf("%s: read after a refusal: %q, %v", tc.tr, got, err)
		}
	}
}

// Damage at rest reaches an unverified reader, streamed or from a handed-over
// file, as a moverconn.DamagedError (never as data); asked to verify, the mover reads
// the object itself and names it and the offset.
func TestDamageAtRest(t *testing.T) {
	transports(t, func(t *testing.T, f *fixture) {
		data := bytes.Repeat([]byte("0123456789abcdef"), 3*disk.ChunkSize/16)
		if _, err := f.write(t, f.tok(token.OpWrite, "v", int64(len(data)), 5, time.Minute), "v", data); err != nil {
			t.Fatal(err)
		}
		var path string
		filepath.WalkDir(f.dir, func(p string, d os.DirEntry, err error) error {
			if err == nil && d.Name() == "v" {
				path = p
			}
			return nil
		})
		fh, err := os.OpenFile(path, os.O_RDWR, 0)
		if err != nil {
			t.Fatal(err)
		}
		fh.WriteAt([]byte{'X'}, disk.ChunkSize+77)
		fh.Close()

		got, err := f.readRange(t, "v", 0, 0, false)
		var de *moverconn.DamagedError
		if !errors.As(err, &de) || !errors.Is(err, api.ErrCorrupt) {
			t.Fatalf("unverified read of a damaged chunk: want a damaged frame, got %v", err)
		}
		if f.tr == "handle" && !strings.Contains(err.Error(), "offset 1048576") {
			t.Fatalf("read of a handed-over file with a damaged chunk: want the offset named, got %v", err)
		}
		if !bytes.Equal(got, data[:disk.ChunkSize]) {
			t.Fatalf("%d bytes delivered; want exactly the good first chunk", len(got))
		}
		_, err = f.readRange(t, "v", 0, 0, true)
		if errors.As(err, &de) || !errors.Is(err, api.ErrCorrupt) || !strings.Contains(err.Error(), "offset 1048576") {
			t.Fatalf("verified read of a damaged chunk: want the mover's corruption report, got %v", err)
		}
		// The chunks before and after still read.
		if _, err := f.readRange(t, "v", 2*disk.ChunkSize, 0, false); err != nil {
			t.Fatal(err)
		}
	})
}
