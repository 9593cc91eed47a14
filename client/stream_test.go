package client_test

import (
	"bytes"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"sync"
	"testing"

	"github.com/strata-storage/strata/client"
	"lukechampine.com/blake3"
)

// TestUploadWrite streams files in file order through Write, in odd-sized
// pieces, and reads them back whole and at random ranges. Their fixity is
// BLAKE3 of the bytes, whether Write hashed them (64 KiB units) or the
// stripes' streams did (units of whole 1 MiB frames: treeLender).
func TestUploadWrite(t *testing.T) {
	t.Parallel()
	c, _ := newClient(t, nil)
	const unit = 64 << 10
	cases := []struct {
		size, piece, stripes int
		unit                 int64 // 0: the class's
	}{
		{1, 1, 0, 0}, {unit - 1, 1000, 1, 0}, {8 << 20, 4 << 20, 0, 0}, {unit + 1, 7919, 4, 0}, {10*unit + 3, 80000, 4, 0}, {3<<20 + 5, 1 << 20, 2, 0}, {5 * unit, unit, 3, 0},
		{1, 1, 1, 1 << 20}, {1 << 20, 1 << 20, 1, 1 << 20}, {3<<20 + 5, 100000, 2, 1 << 20}, {10 << 20, 1 << 20, 3, 1 << 20},
		{9<<20 + 1, 3<<20 + 7, 4, 2 << 20}, {5<<20 - 1, 4096, 2, 1 << 20}, {20 << 20, 512 << 10, 2, 8 << 20},
	}
	for i, tc := range cases {
		t.Run(fmt.Sprintf("%d/%d/w%d/u%d", tc.size, tc.piece, tc.stripes, tc.unit), func(t *testing.T) {
			data := randBytes(uint64(100+i), tc.size)
			p := fmt.Sprintf("/up%d", i)
			u, err := c.Create(ctx, p, int64(tc.size), client.PutOptions{Stripes: tc.stripes, StripeUnit: tc.unit})
			if err != nil {
				t.Fatal(err)
			}
			for off := 0; off < len(data); off += tc.piece {
				if _, err := u.Write(data[off:min(off+tc.piece, len(data))]); err != nil {
					t.Fatal(err)
				}
			}
			if _, err := c.Stat(ctx, p); !errors.Is(err, client.ErrNotFound) {
				t.Fatalf("visible before commit: %v", err)
			}
			fi, err := u.Commit(ctx)
			if err != nil {
				t.Fatal(err)
			}
			if sum := blake3.Sum256(data); fi.Size != int64(tc.size) || fi.Fixity != "blake3:"+hex.EncodeToString(sum[:]) {
				t.Fatalf("committed %+v; want blake3:%x", fi, sum)
			}
			var out bytes.Buffer
			if _, err := c.Get(ctx, p, &out, client.GetOptions{VerifyFixity: true}); err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(out.Bytes(), data) {
				t.Fatal("bytes differ")
			}
			checkRanges(t, c, p, data)
		})
	}
}

// checkRanges reads path at ranges that start and end inside, on and
// across stripe units, and sequentially through Read.
func checkRanges(t *testing.T, c *client.Client, p string, data []byte) {
	t.Helper()
	r, err := c.Open(ctx, p, client.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	n := len(data)
	ranges := [][2]int{{0, n}, {0, 1}, {n - 1, 1}, {n / 3, n / 2}, {n / 2, n}}
	for _, unit := range []int{64 << 10} {
		ranges = append(ranges, [2]int{unit - 1, 2}, [2]int{unit, unit}, [2]int{unit - 5, 3*unit + 10})
	}
	for _, rg := range ranges {
		off, l := rg[0], rg[1]
		if off >= n || l <= 0 {
			continue
		}
		buf := make([]byte, l)
		got, err := r.ReadAt(buf, int64(off))
		want := min(l, n-off)
		if got != want || (want < l && err != io.EOF) || (want == l && err != nil) {
			t.Fatalf("ReadAt(%d, %d) = %d, %v; want %d", l, off, got, err, want)
		}
		if !bytes.Equal(buf[:got], data[off:off+got]) {
			t.Fatalf("ReadAt(%d, %d): bytes differ", l, off)
		}
	}
	rng := rand.New(rand.NewPCG(uint64(n), 1))
	for range 200 {
		off := rng.IntN(n)
		l := 1 + rng.IntN(min(n-off, 300<<10))
		buf := make([]byte, l)
		if got, err := r.ReadAt(buf, int64(off)); got != l || err != nil || !bytes.Equal(buf, data[off:off+l]) {
			t.Fatalf("random ReadAt(%d, %d) = %d, %v, equal %v", l, off, got, err, bytes.Equal(buf[:got], data[off:off+got]))
		}
	}
	all, err := io.ReadAll(io.LimitReader(r, int64(n)+10))
	if err != nil || !bytes.Equal(all, data) {
		t.Fatalf("sequential Read: %d bytes, %v", len(all), err)
	}
}

// TestUploadStripes fills one shared file from several goroutines, each
// owning one stripe, as N-1 checkpoint writers do: writer k's blocks are
// the file's blocks k, k+w, k+2w ….
func TestUploadStripes(t *testing.T) {
	t.Parallel()
	c, _ := newClient(t, nil)
	for _, tc := range []struct {
		writers int
		block   int64
		blocks  int
	}{{2, 80000, 7}, {4, 1 << 20, 4}, {3, 4096, 10}} {
		t.Run(fmt.Sprintf("%dx%d", tc.writers, tc.block), func(t *testing.T) {
			size := tc.block * int64(tc.blocks)
			data := randBytes(uint64(tc.block), int(size))
			p := fmt.Sprintf("/shared-%d-%d", tc.writers, tc.block)
			u, err := c.Create(ctx, p, size, client.PutOptions{Stripes: tc.writers, StripeUnit: tc.block})
			if err != nil {
				t.Fatal(err)
			}
			if u.Stripes() != tc.writers || u.StripeUnit() != tc.block {
				t.Fatalf("layout %d × %d", u.Stripes(), u.StripeUnit())
			}
			var wg sync.WaitGroup
			errs := make([]error, tc.writers)
			for k := range tc.writers {
				wg.Add(1)
				go func() {
					defer wg.Done()
					w, err := u.Stripe(k)
					if err != nil {
						errs[k] = err
						return
					}
					for b := int64(k); b < int64(tc.blocks); b += int64(tc.writers) {
						if _, err := w.Write(data[b*tc.block : (b+1)*tc.block]); err != nil {
							errs[k] = err
							return
						}
					}
				}()
			}
			wg.Wait()
			for _, err := range errs {
				if err != nil {
					t.Fatal(err)
				}
			}
			if _, err := u.Commit(ctx); err != nil {
				t.Fatal(err)
			}
			var out bytes.Buffer
			if _, err := c.Get(ctx, p, &out, client.GetOptions{}); err != nil || !bytes.Equal(out.Bytes(), data) {
				t.Fatalf("get: %v, equal %v", err, bytes.Equal(out.Bytes(), data))
			}
			checkRanges(t, c, p, data)
		})
	}
}

// TestUploadFailures: a short or long upload, and an abort, leave nothing
// visible.
func TestUploadFailures(t *testing.T) {
	t.Parallel()
	c, _ := newClient(t, nil)
	u, err := c.Create(ctx, "/short", 1000, client.PutOptions{})
	if err != nil {
		t.Fatal(err)
	}
	short := randBytes(9, 999)
	u.Write(short)
	if fi, err := u.Commit(ctx); err != nil || fi.Size != 999 {
		t.Fatalf("a shorter upload commits what was written: %v, %v", fi, err)
	}
	checkRanges(t, c, "/short", short)
	// Per stripe, the amounts must be those of one file length.
	u, _ = c.Create(ctx, "/uneven", 4<<20, client.PutOptions{Stripes: 2, StripeUnit: 1 << 20})
	s1, _ := u.Stripe(1)
	s1.Write(make([]byte, 1<<20))
	if _, err := u.Commit(ctx); err == nil {
		t.Fatal("stripe 1 without stripe 0 committed")
	}
	u, _ = c.Create(ctx, "/long", 10, client.PutOptions{})
	if _, err := u.Write(make([]byte, 11)); err == nil {
		t.Fatal("write past the declared size accepted")
	}
	u.Abort()
	u, _ = c.Create(ctx, "/aborted", 1<<20, client.PutOptions{})
	u.Write(make([]byte, 1<<19))
	u.Abort()
	if _, err := u.Commit(ctx); err == nil {
		t.Fatal("aborted upload committed")
	}
	for _, p := range []string{"/uneven", "/long", "/aborted"} {
		if _, err := c.Stat(ctx, p); !errors.Is(err, client.ErrNotFound) {
			t.Fatalf("%s: %v", p, err)
		}
	}
	if _, err := c.Create(ctx, "/bad", 10, client.PutOptions{StripeUnit: -1}); err == nil {
		t.Fatal("negative stripe unit accepted")
	}
	// An empty file is committed at create.
	u, err = c.Create(ctx, "/empty", 0, client.PutOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if fi, err := u.Commit(ctx); err != nil || fi.Size != 0 {
		t.Fatalf("empty: %v %v", fi, err)
	}
	r, err := c.Open(ctx, "/empty", client.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if n, err := r.ReadAt(make([]byte, 1), 0); n != 0 || err != io.EOF {
		t.Fatalf("empty ReadAt: %d %v", n, err)
	}
}
