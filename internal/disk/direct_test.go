package disk

import (
	"bytes"
	"context"
	"hash/crc32"
	"math/rand/v2"
	"os"
	"sync/atomic"
	"testing"

	"github.com/strata-storage/strata/internal/wire"
)

// Writes through WriteOwned — aligned chunks that go to the disk directly
// and concurrently, pieces that are not aligned and switch the object to
// the page cache — store exactly the bytes given, with checksums that
// verify, and hand every buffer back. The same holds on a device whose
// file system takes no O_DIRECT.
func TestWriteOwned(t *testing.T) {
	chunk := func(n int, seed uint64) []byte {
		b := AlignedBuffer(n)
		r := rand.New(rand.NewPCG(seed, 1))
		for i := range b {
			b[i] = byte(r.Uint32())
		}
		return b
	}
	cases := map[string][]int{
		"aligned chunks and a tail":         {ChunkSize, ChunkSize, ChunkSize, ChunkSize, 12345},
		"many aligned chunks":               {ChunkSize, ChunkSize, ChunkSize, ChunkSize, ChunkSize, ChunkSize, ChunkSize, ChunkSize, ChunkSize, ChunkSize},
		"unaligned in the middle":           {ChunkSize, 100, ChunkSize, ChunkSize - 100, ChunkSize},
		"aligned but not whole chunks":      {64 << 10, 4096, ChunkSize, 8192},
		"one byte":                          {1},
		"nothing":                           {},
		"aligned chunks past the prealloc":  {ChunkSize, ChunkSize, ChunkSize, ChunkSize, ChunkSize, ChunkSize, ChunkSize, ChunkSize, 1},
		"unaligned first, aligned the rest": {7, ChunkSize, ChunkSize},
	}
	for _, direct := range []bool{true, false} {
		for name, sizes := range cases {
			d := openDev(t, Options{})
			d.direct.Store(direct)
			var total int
			for _, n := range sizes {
				total += n
			}
			// A second write warms the device: the first direct write of a
			// device runs alone, to learn that its file system takes them.
			warm(t, d)
			if direct && !d.directOK.Load() {
				// The buffered cases below still run.
				t.Logf("%s: the file system takes no O_DIRECT; direct case not run", name)
				continue
			}
			w, err := d.Create(context.Background(), "o", int64(total))
			if err != nil {
				t.Fatal(err)
			}
			var want []byte
			var given, back atomic.Int64
			for i, n := range sizes {
				p := chunk(n, uint64(i))
				want = append(want, p...)
				given.Add(1)
				if err := w.WriteOwned(p, crc32.Checksum(p, wire.Castagnoli), func() { back.Add(1) }); err != nil {
					t.Fatalf("direct=%v %s: write %d: %v", direct, name, i, err)
				}
			}
			if err := w.Close(); err != nil {
				t.Fatalf("direct=%v %s: close: %v", direct, name, err)
			}
			if back.Load() != given.Load() {
				t.Fatalf("direct=%v %s: %d of %d buffers handed back", direct, name, back.Load(), given.Load())
			}
			if w.CRC() != crc32.Checksum(want, wire.Castagnoli) {
				t.Fatalf("direct=%v %s: object crc wrong", direct, name)
			}
			got, err := readAll(d, "o")
			if err != nil || !bytes.Equal(got, want) {
				t.Fatalf("direct=%v %s: read back %d bytes of %d: %v", direct, name, len(got), len(want), err)
			}
			// The file holds the data and the trailer, nothing allocated ahead.
			p, _ := d.path("o")
			if fi, err := os.Stat(p); err != nil || fi.Size() != int64(total)+trailerSize(int64(total)) {
				t.Fatalf("direct=%v %s: object file %v, %v", direct, name, fi.Size(), err)
			}
		}
	}
}

// Aborting with direct writes in flight waits for them, removes the object
// and gives its reservation back.
func TestAbortWithWritesInFlight(t *testing.T) {
	d := openDev(t, Options{Capacity: 256 << 20})
	warm(t, d)
	_, used0, _ := d.Usage()
	w, err := d.Create(context.Background(), "o", 64<<20)
	if err != nil {
		t.Fatal(err)
	}
	var back atomic.Int64
	for range 32 {
		p := AlignedBuffer(ChunkSize)
		if err := w.WriteOwned(p, crc32.Checksum(p, wire.Castagnoli), func() { back.Add(1) }); err != nil {
			t.Fatal(err)
		}
	}
	w.Abort()
	if back.Load() != 32 {
		t.Fatalf("%d of 32 buffers handed back after Abort", back.Load())
	}
	if _, err := d.OpenObject(context.Background(), "o"); err == nil {
		t.Fatal("aborted object is there")
	}
	if _, used, free := d.Usage(); used != used0 || free+used != 256<<20 {
		t.Fatalf("after abort: used %d (was %d), free %d", used, used0, free)
	}
}

// warm writes one aligned chunk, which teaches the device whether its file
// system takes direct writes.
func warm(t *testing.T, d *Device) {
	w, err := d.Create(context.Background(), "warm", ChunkSize)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := w.Write(AlignedBuffer(ChunkSize)); err != nil {
		t.Fatal(err)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
}
