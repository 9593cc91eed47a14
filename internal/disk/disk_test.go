package disk

import (
	"bytes"
	"context"
	"errors"
	"hash/crc32"
	"io"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strconv"
	"testing"

	"github.com/strata-storage/strata/internal/api"
	"github.com/strata-storage/strata/internal/wire"
)

func openDev(t *testing.T, o Options) *Device {
	t.Helper()
	d, err := Open("d0", t.TempDir(), o)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { d.Close() })
	return d
}

func put(t *testing.T, d *Device, obj string, data []byte) {
	t.Helper()
	w, err := d.Create(context.Background(), obj, int64(len(data)))
	if err != nil {
		t.Fatal(err)
	}
	for p := data; len(p) > 0; {
		k := min(len(p), 300000) // frame sizes that straddle chunks
		if _, err := w.Write(p[:k]); err != nil {
			t.Fatal(err)
		}
		p = p[k:]
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
}

func readAll(d *Device, obj string) ([]byte, error) {
	r, err := d.OpenObject(context.Background(), obj)
	if err != nil {
		return nil, err
	}
	defer r.Close()
	var out bytes.Buffer
	buf := make([]byte, ChunkSize)
	for i := int64(0); ; i++ {
		c, err := r.Chunk(i, buf)
		if err == io.EOF {
			return out.Bytes(), nil
		}
		if err != nil {
			return nil, err
		}
		out.Write(c)
	}
}

func TestRoundTripSizes(t *testing.T) {
	d := openDev(t, Options{})
	rng := rand.New(rand.NewPCG(1, 2))
	for _, n := range []int{0, 1, ChunkSize - 1, ChunkSize, ChunkSize + 1, 3*ChunkSize + 17} {
		data := make([]byte, n)
		for i := range data {
			data[i] = byte(rng.Uint32())
		}
		obj := "obj" + string(rune('a'+n%26)) + "-" + itoa(n)
		put(t, d, obj, data)
		got, err := readAll(d, obj)
		if err != nil || !bytes.Equal(got, data) {
			t.Fatalf("size %d: mismatch (err %v)", n, err)
		}
		r, _ := d.OpenObject(context.Background(), obj)
		if n > 10 {
			p := make([]byte, 10)
			if _, err := r.ReadAt(p, int64(n-10)); err != nil || !bytes.Equal(p, data[n-10:]) {
				t.Fatalf("ReadAt tail: %v", err)
			}
		}
		r.Close()
	}
}

func itoa(n int) string { return strconv.Itoa(n) }

func TestCorruptionDetected(t *testing.T) {
	d := openDev(t, Options{})
	data := bytes.Repeat([]byte("0123456789"), 300000)
	put(t, d, "victim", data)
	p, _ := d.path("victim")
	f, err := os.OpenFile(p, os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	f.WriteAt([]byte{'X'}, 2*ChunkSize+5)
	f.Close()
	_, err = readAll(d, "victim")
	var ce *CorruptError
	if !errors.As(err, &ce) || !errors.Is(err, api.ErrCorrupt) || ce.Offset != 2*ChunkSize {
		t.Fatalf("want corruption at chunk 2, got %v", err)
	}
}

// Verify reads a whole object and finds damage in any chunk, and a chunk
// table that does not add up to the object's CRC.
func TestVerify(t *testing.T) {
	d := openDev(t, Options{})
	data := bytes.Repeat([]byte("0123456789"), 300000)
	buf := make([]byte, ChunkSize)
	for _, tc := range []struct {
		name   string
		damage int64 // file offset to flip, -1 for none
		want   int64 // the damaged chunk's offset
	}{
		{"whole", -1, 0},
		{"first chunk", 7, 0},
		{"last chunk", int64(len(data)) - 3, int64(len(data)) / ChunkSize * ChunkSize},
	} {
		t.Run(tc.name, func(t *testing.T) {
			obj := "v-" + strconv.Itoa(int(tc.damage)+1)
			put(t, d, obj, data)
			if tc.damage >= 0 {
				p, _ := d.path(obj)
				f, err := os.OpenFile(p, os.O_RDWR, 0)
				if err != nil {
					t.Fatal(err)
				}
				f.WriteAt([]byte{'X'}, tc.damage)
				f.Close()
			}
			r, err := d.OpenObject(context.Background(), obj)
			if err != nil {
				t.Fatal(err)
			}
			defer r.Close()
			err = r.Verify(buf)
			var ce *CorruptError
			switch {
			case tc.damage < 0 && err != nil:
				t.Fatalf("a whole object: %v", err)
			case tc.damage >= 0 && (!errors.As(err, &ce) || ce.Offset != tc.want):
				t.Fatalf("want damage at %d, got %v", tc.want, err)
			}
		})
	}
}

// An object deleted before it was written cannot be written after: a
// late write (its client gone, its file reclaimed) must not leave an
// object no one will delete. Deleting an object that exists leaves no
// such mark (names are never reused, but nothing depends on it).
func TestLateCreateAfterDelete(t *testing.T) {
	d := openDev(t, Options{})
	if err := d.Remove("late"); err != nil {
		t.Fatal(err)
	}
	if _, err := d.Create(context.Background(), "late", 10); !errors.Is(err, api.ErrNotFound) {
		t.Fatalf("create after the delete: %v", err)
	}
	put(t, d, "early", []byte("hello"))
	if err := d.Remove("early"); err != nil {
		t.Fatal(err)
	}
	if got, err := readAll(d, "early"); err == nil {
		t.Fatalf("read after the delete: %q", got)
	}
	if used := func() int64 { _, u, _ := d.Usage(); return u }(); used != 0 {
		t.Fatalf("used after the delete: %d", used)
	}
}

func TestTruncatedObjectIsCorrupt(t *testing.T) {
	d := openDev(t, Options{})
	put(t, d, "t", []byte("hello"))
	p, _ := d.path("t")
	os.Truncate(p, 3)
	if _, err := d.OpenObject(context.Background(), "t"); !errors.Is(err, api.ErrCorrupt) {
		t.Fatalf("want corrupt, got %v", err)
	}
}

func TestCapacity(t *testing.T) {
	d := openDev(t, Options{Capacity: 4 << 20})
	if _, err := d.Create(context.Background(), "big", 8<<20); !errors.Is(err, api.ErrNoSpace) {
		t.Fatalf("want no space, got %v", err)
	}
	w, err := d.Create(context.Background(), "a", 1<<20)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := w.Write(make([]byte, 1<<20+1)); !errors.Is(err, api.ErrNoSpace) {
		t.Fatalf("write past reservation: %v", err)
	}
	w.Abort()
	if _, used, free := d.Usage(); used != 0 || free != 4<<20 {
		t.Fatalf("after abort used=%d free=%d", used, free)
	}
	put(t, d, "b", make([]byte, 1000))
	_, used, _ := d.Usage()
	if used != 1000+trailerSize(1000) {
		t.Fatalf("used %d", used)
	}
	if err := d.Remove("b"); err != nil {
		t.Fatal(err)
	}
	if err := d.Remove("b"); err != nil {
		t.Fatalf("second remove: %v", err)
	}
	if _, used, _ := d.Usage(); used != 0 {
		t.Fatalf("used after remove %d", used)
	}
	// Reopening rescans what is on disk.
	put(t, d, "c", make([]byte, 10))
	d2, err := Open("d0", d.Dir(), Options{Capacity: 4 << 20})
	if err != nil {
		t.Fatal(err)
	}
	defer d2.Close()
	if _, used, _ := d2.Usage(); used != 10+trailerSize(10) {
		t.Fatalf("rescan used %d", used)
	}
}

func TestBadObjectNames(t *testing.T) {
	d := openDev(t, Options{})
	for _, name := range []string{"", "..", "a/b", filepath.Join("..", "x")} {
		if _, err := d.Create(context.Background(), name, 1); !errors.Is(err, api.ErrInvalid) {
			t.Errorf("%q: want invalid, got %v", name, err)
		}
	}
}

// WriteCRC trusts the caller's CRC for chunk-aligned pieces and computes
// chunk CRCs for the rest; either way the object reads back verified.
// Pieces written with their CRCs known, inside one chunk or across chunk
// boundaries, give the object's CRC and a chunk table that verifies.
func TestWriteCRC(t *testing.T) {
	for _, pieces := range [][]int{
		{ChunkSize, 1000, ChunkSize, ChunkSize - 1000, 777},
		{4096},                         // a small object's one frame
		{100, 200, ChunkSize - 300, 5}, // filling a chunk exactly, then a new one
		{ChunkSize + 1, ChunkSize - 1}, // across a boundary, then to the next
	} {
		d := openDev(t, Options{})
		size := 0
		for _, n := range pieces {
			size += n
		}
		data := make([]byte, size)
		for i := range data {
			data[i] = byte(i * 7)
		}
		w, err := d.Create(context.Background(), "k", int64(len(data)))
		if err != nil {
			t.Fatal(err)
		}
		off := 0
		for _, n := range pieces {
			p := data[off : off+n]
			if _, err := w.WriteCRC(p, crc32.Checksum(p, wire.Castagnoli)); err != nil {
				t.Fatal(err)
			}
			off += n
		}
		if w.CRC() != crc32.Checksum(data, wire.Castagnoli) {
			t.Fatalf("%v: whole-object CRC wrong", pieces)
		}
		if err := w.Close(); err != nil {
			t.Fatal(err)
		}
		got, err := readAll(d, "k")
		if err != nil || !bytes.Equal(got, data) {
			t.Fatalf("%v: read back: %v", pieces, err)
		}
		r, err := d.OpenObject(context.Background(), "k")
		if err != nil {
			t.Fatal(err)
		}
		if err := r.Verify(make([]byte, ChunkSize)); err != nil {
			t.Errorf("%v: the chunk table: %v", pieces, err)
		}
		r.Close()
	}
}

// The accounting of a small object's one frame, its CRC known (what a
// mover does for every small put besides the write itself).
func BenchmarkAccountCRC64KiB(b *testing.B) {
	p := make([]byte, 64<<10)
	crc := crc32.Checksum(p, wire.Castagnoli)
	b.SetBytes(int64(len(p)))
	for b.Loop() {
		var w Writer
		w.accountCRC(p, crc)
	}
}
