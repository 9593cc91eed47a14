package disk

import (
	"context"
	"encoding/binary"
	"errors"
	"hash/crc32"
	"io"
	"os"
	"slices"
	"testing"

	"github.com/strata-storage/strata/internal/api"
	"github.com/strata-storage/strata/internal/wire"
)

// An object file is parsed from what is on the device: whatever it holds
// (damage, a truncation, a bug that wrote a wrong trailer), opening and
// reading it gives data whose chunks match their CRCs or a clear error,
// never a panic. With fix set the footer's magic and CRC are made right
// first, so that the fuzzer reaches the checks behind them.
func FuzzObjectFile(f *testing.F) {
	d, err := Open("d0", f.TempDir(), Options{})
	if err != nil {
		f.Fatal(err)
	}
	defer d.Close()
	for i, n := range []int{0, 1, 5000, ChunkSize + 7} {
		obj := "seed" + string(rune('a'+i))
		w, err := d.Create(context.Background(), obj, int64(n))
		if err != nil {
			f.Fatal(err)
		}
		if _, err := w.Write(make([]byte, n)); err != nil {
			f.Fatal(err)
		}
		if err := w.Close(); err != nil {
			f.Fatal(err)
		}
		p, _ := d.path(obj)
		b, err := os.ReadFile(p)
		if err != nil {
			f.Fatal(err)
		}
		if n < 64<<10 {
			f.Add(b, false)
		}
		f.Add(b[max(0, len(b)-footerSize-8):], true) // a trailer whose data is gone
	}
	f.Add([]byte(magic), true)
	dir := f.TempDir()
	buf := make([]byte, ChunkSize)
	f.Fuzz(func(t *testing.T, data []byte, fix bool) {
		if fix && len(data) >= footerSize {
			data = slices.Clone(data) // the fuzzer's own copy stays as it gave it
			ft := data[len(data)-footerSize:]
			copy(ft, magic)
			binary.BigEndian.PutUint32(ft[28:], crc32.Checksum(ft[:28], wire.Castagnoli))
		}
		// A new file each time: ext4 flushes a file truncated and
		// written again when it is closed (auto_da_alloc), which made
		// every input a disk write.
		fh, err := os.CreateTemp(dir, "obj")
		if err != nil {
			t.Fatal(err)
		}
		os.Remove(fh.Name())
		if _, err := fh.Write(data); err != nil {
			t.Fatal(err)
		}
		r, err := OpenFile(context.Background(), fh, "d0", "obj")
		if err != nil {
			if !errors.Is(err, api.ErrCorrupt) {
				t.Fatalf("a bad object file gave %v, not a corruption", err)
			}
			return
		}
		defer r.Close()
		chunks := (r.Len() + ChunkSize - 1) / ChunkSize
		if r.Len() < 0 || r.Len()+4*chunks+footerSize != int64(len(data)) {
			t.Fatalf("object of %d bytes opened with %d bytes of data", len(data), r.Len())
		}
		var got int64
		for i := int64(0); ; i++ {
			c, err := r.Chunk(i, buf)
			if err == io.EOF {
				break
			}
			if err != nil {
				if !errors.Is(err, api.ErrCorrupt) {
					t.Fatalf("chunk %d: %v", i, err)
				}
				return
			}
			if crc32.Checksum(c, wire.Castagnoli) != r.ChunkCRC(i) {
				t.Fatalf("chunk %d returned with a CRC other than its stored one", i)
			}
			got += int64(len(c))
		}
		if got != r.Len() {
			t.Fatalf("read %d bytes of %d", got, r.Len())
		}
	})
}
