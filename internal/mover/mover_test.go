package mover

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/strata-storage/strata/internal/api"
	"github.com/strata-storage/strata/internal/disk"
	"github.com/strata-storage/strata/internal/token"
	"github.com/strata-storage/strata/internal/wire"
)

type fixture struct {
	m      *Mover
	signer *token.Signer
	addr   string
	ep     Endpoint // TCP and the Unix socket
	pool   *Pool
	dir    string // the device's directory
}

// start runs a mover with one device on TCP and on a Unix socket; the
// fixture's pool reaches it over TCP unless the test says otherwise.
func start(t *testing.T) *fixture {
	dir := t.TempDir()
	d, err := disk.Open("d0", dir, disk.Options{Capacity: 64 << 20})
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
	f := &fixture{m: m, signer: signer, addr: ln.Addr().String(), pool: NewPool(), dir: dir}
	f.ep = Endpoint{Addr: f.addr, Socket: sock, Host: HostID()}
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
	return c.Write(context.Background(), wire.Request{Op: token.OpWrite, Token: tok, Device: "d0", Object: obj}, bytes.NewReader(data), make([]byte, FrameSize), nil)
}

func (f *fixture) read(t *testing.T, tok, obj string) ([]byte, error) {
	c, err := f.pool.Get(context.Background(), f.ep)
	if err != nil {
		t.Fatal(err)
	}
	defer f.pool.Put(c)
	var out bytes.Buffer
	_, err = c.Read(context.Background(), wire.Request{Op: token.OpRead, Token: tok, Device: "d0", Object: obj}, &out, make([]byte, FrameSize))
	return out.Bytes(), err
}

// transports runs fn once over TCP and once over the Unix socket.
func transports(t *testing.T, fn func(t *testing.T, f *fixture)) {
	for _, tr := range []string{"tcp", "unix"} {
		t.Run(tr, func(t *testing.T) {
			f := start(t)
			f.pool.SetTCPOnly(tr == "tcp")
			fn(t, f)
		})
	}
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
		{"stale epoch", f.tok(token.OpWrite, "a", 1<<30, 4, time.Minute), "a", api.ErrDenied},
		{"over reservation", f.tok(token.OpWrite, "a", 1<<20, 5, time.Minute), "a", api.ErrNoSpace},
		{"over capacity", f.tok(token.OpWrite, "a", 1<<30, 5, time.Minute), "a", api.ErrNoSpace},
	}
	c, err := f.pool.Get(context.Background(), f.ep)
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, err := c.Write(context.Background(), wire.Request{Op: token.OpWrite, Token: tc.tok, Device: "d0", Object: tc.obj}, bytes.NewReader(data), make([]byte, FrameSize), nil)
			if !errors.Is(err, tc.want) {
				t.Fatalf("want %v, got %v", tc.want, err)
			}
			if c.broken {
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
	if _, err := f.read(t, f.tok(token.OpRead, "a", 0, 5, time.Minute), "a"); !errors.Is(err, api.ErrDenied) {
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
	c, err := f.pool.Get(context.Background(), f.ep)
	if err != nil {
		t.Fatal(err)
	}
	defer f.pool.Put(c)
	var out bytes.Buffer
	req := wire.Request{Op: token.OpRead, Token: f.tok(token.OpRead, obj, 0, 5, time.Minute), Device: "d0", Object: obj, Offset: off, Length: n, Verify: verify}
	_, err = c.Read(context.Background(), req, &out, make([]byte, FrameSize))
	return out.Bytes(), err
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
			}
		}
	})
}

// Damage at rest reaches an unverified reader as a damaged frame (never as
// data); asked to verify, the mover names the object and offset.
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
		var de *DamagedError
		if !errors.As(err, &de) || !errors.Is(err, api.ErrCorrupt) {
			t.Fatalf("unverified read of a damaged chunk: want a damaged frame, got %v", err)
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
