package mover

import (
	"bytes"
	"context"
	"errors"
	"math/rand/v2"
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

// stripeOf is the stripe a Source names, computed the plain way.
func stripeOf(data []byte, s wire.Source) []byte {
	var out []byte
	for u := int64(s.Stripe); u*s.Unit < s.Size; u += int64(s.Width) {
		out = append(out, data[u*s.Unit:min((u+1)*s.Unit, s.Size)]...)
	}
	return out
}

func sourceFile(t *testing.T, data []byte) *os.File {
	p := filepath.Join(t.TempDir(), "src")
	if err := os.WriteFile(p, data, 0o644); err != nil {
		t.Fatal(err)
	}
	f, err := os.Open(p)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.Close() })
	return f
}

func (f *fixture) writeFile(t *testing.T, obj string, max int64, src *os.File, s wire.Source) (wire.Status, int64, error) {
	c, err := f.pool.Get(context.Background(), f.ep)
	if err != nil {
		t.Fatal(err)
	}
	defer f.pool.Put(c)
	if !c.HandsOver() {
		t.Fatalf("a %s connection does not hand over files", f.tr)
	}
	var reported int64
	req := wire.Request{Op: token.OpWrite, Token: f.tok(token.OpWrite, obj, max, 5, time.Minute), Device: "d0", Object: obj, Source: &s}
	st, err := c.WriteFile(context.Background(), req, src, func(n int) { reported += int64(n) })
	return st, reported, err
}

// A client on the mover's host passes its file; the mover stores exactly
// the stripe the request names, with the receipt and CRC a stream gets,
// on uncapped and capped devices alike.
func TestWriteFromFile(t *testing.T) {
	data := make([]byte, 3*disk.ChunkSize+12345)
	for i := range data {
		data[i] = byte(rand.IntN(256))
	}
	for _, bw := range []int64{0, 1 << 30} {
		f := startWith(t, disk.Options{Capacity: 64 << 20, Bandwidth: bw})
		f.use("handle")
		src := sourceFile(t, data)
		defer func() {
			if n := f.m.Stats().FilesRead; n != 10 {
				t.Errorf("cap %d: %d writes from files counted, want 10", bw, n)
			}
		}()
		for i, s := range []wire.Source{
			{Size: int64(len(data)), Unit: 4 << 20, Width: 1},
			{Size: int64(len(data)), Unit: 1 << 20, Width: 1},
			{Size: disk.ChunkSize, Unit: disk.ChunkSize, Width: 1},
			{Size: disk.ChunkSize + 1, Unit: disk.ChunkSize, Width: 1},
			{Size: 1, Unit: 4096, Width: 1},
			{Size: 0, Unit: 4096, Width: 1},
			{Size: int64(len(data)), Unit: 64 << 10, Width: 3, Stripe: 0},
			{Size: int64(len(data)), Unit: 64 << 10, Width: 3, Stripe: 2},
			{Size: int64(len(data)) - 7, Unit: 1 << 20, Width: 4, Stripe: 3},
			{Size: 10, Unit: 1 << 20, Width: 4, Stripe: 1}, // an empty stripe
		} {
			obj := "s" + string(rune('a'+i))
			want := stripeOf(data, s)
			if int64(len(want)) != s.Len() {
				t.Fatalf("%+v: Len %d, the stripe has %d bytes", s, s.Len(), len(want))
			}
			st, reported, err := f.writeFile(t, obj, s.Len(), src, s)
			if err != nil {
				t.Fatalf("cap %d, %+v: %v", bw, s, err)
			}
			if st.Length != s.Len() || reported != s.Len() || !f.signer.CheckReceipt(st.Receipt, "d0", obj, st.Length, st.CRC32C) {
				t.Fatalf("cap %d, %+v: status %+v, progress %d", bw, s, st, reported)
			}
			got, err := f.readRange(t, obj, 0, 0, true)
			if err != nil || !bytes.Equal(got, want) {
				t.Fatalf("cap %d, %+v: read back %d bytes (want %d): %v", bw, s, len(got), len(want), err)
			}
		}
	}
}

// A write from a file that cannot be done is refused with a clear error,
// leaves no object behind, and the connection serves the next request.
func TestWriteFromFileRefused(t *testing.T) {
	f := start(t)
	f.use("handle")
	data := bytes.Repeat([]byte("source"), 400000)
	src := sourceFile(t, data)
	whole := wire.Source{Size: int64(len(data)), Unit: 1 << 20, Width: 1}
	pr, pw, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer pr.Close()
	defer pw.Close()
	for _, tc := range []struct {
		name string
		src  *os.File
		s    wire.Source
		max  int64
		code error
		msg  string
	}{
		{"source shorter than it says", src, wire.Source{Size: int64(len(data)) + 5, Unit: 1 << 20, Width: 1}, int64(len(data)) + 5, api.ErrInvalid, "source ended"},
		{"more than the token allows", src, whole, int64(len(data)) - 1, api.ErrNoSpace, "reservation"},
		{"no stripe", src, wire.Source{Size: 10, Unit: 1 << 20, Width: 0}, 10, api.ErrInvalid, "bad source"},
		{"stripe outside the width", src, wire.Source{Size: 10, Unit: 1 << 20, Width: 2, Stripe: 2}, 10, api.ErrInvalid, "bad source"},
		{"a pipe", pr, whole, int64(len(data)), api.ErrInvalid, "not a regular file"},
	} {
		_, _, err := f.writeFile(t, "r", tc.max, tc.src, tc.s)
		if !errors.Is(err, tc.code) || !strings.Contains(err.Error(), tc.msg) {
			t.Fatalf("%s: want %v mentioning %q, got %v", tc.name, tc.code, tc.msg, err)
		}
		if _, err := f.readRange(t, "r", 0, 0, false); !errors.Is(err, api.ErrNotFound) {
			t.Fatalf("%s: the refused object is there: %v", tc.name, err)
		}
		if _, _, err := f.writeFile(t, "ok", int64(len(data)), src, whole); err != nil {
			t.Fatalf("%s: the write after it: %v", tc.name, err)
		}
		del(t, f, "ok")
	}
	if _, used, _ := f.m.devices["d0"].Usage(); used != 0 {
		t.Fatalf("%d bytes left on the device", used)
	}

	// Over TCP the mover cannot take a file and says so.
	f.use("tcp")
	c, err := f.pool.Get(context.Background(), f.ep)
	if err != nil {
		t.Fatal(err)
	}
	defer f.pool.Put(c)
	req := wire.Request{Op: token.OpWrite, Token: f.tok(token.OpWrite, "t", 10, 5, time.Minute), Device: "d0", Object: "t", Source: &whole}
	if _, err := c.Do(context.Background(), req); !errors.Is(err, api.ErrInvalid) || !strings.Contains(err.Error(), "Unix socket") {
		t.Fatalf("write from a file over TCP: %v", err)
	}
	if _, err := c.WriteFile(context.Background(), req, src, nil); err == nil {
		t.Fatal("WriteFile on a TCP connection did not refuse")
	}
}

func del(t *testing.T, f *fixture, obj string) {
	c, err := f.pool.Get(context.Background(), f.ep)
	if err != nil {
		t.Fatal(err)
	}
	defer f.pool.Put(c)
	if _, err := c.Do(context.Background(), wire.Request{Op: token.OpDelete, Token: f.tok(token.OpDelete, obj, 0, 5, time.Minute), Device: "d0", Object: obj}); err != nil {
		t.Fatal(err)
	}
}
