package client_test

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"sync/atomic"
	"testing"

	"github.com/strata-storage/strata/client"
	"github.com/strata-storage/strata/internal/testutil"
)

func fileOf(t *testing.T, data []byte) *os.File {
	t.Helper()
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

// A put from a file on the mover's host passes the file to the mover for
// every stripe of 1 MiB or more and streams the rest; either way the bytes,
// CRCs and fixity are those of the file. With handover off, all streams.
func TestPutFromFile(t *testing.T) {
	t.Parallel()
	for _, handover := range []bool{true, false} {
		t.Run(fmt.Sprintf("handover=%v", handover), func(t *testing.T) {
			s := testutil.Start(t, nil)
			c, err := client.New(s.URL())
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			c.Handover(handover)
			var want int64
			for i, tc := range []struct {
				size, stripes int
				handed        int64 // stripes the mover reads from the file
			}{
				{9<<20 + 12345, 4, 4},
				{3<<20 + 7, 1, 1},
				{1 << 20, 1, 1},
				{1<<20 - 1, 1, 0},
				{2<<20 + 5, 4, 0}, // stripes of ~512 KiB stream
				{100, 0, 0},
				{0, 0, 0},
			} {
				data := randBytes(uint64(40+i), tc.size)
				path := fmt.Sprintf("/ff%d", i)
				var progress atomic.Int64
				fi, err := c.Put(ctx, path, fileOf(t, data), int64(len(data)), client.PutOptions{Stripes: tc.stripes, Progress: func(n int64) { progress.Add(n) }})
				if err != nil {
					t.Fatalf("put %d bytes: %v", tc.size, err)
				}
				if fi.Size != int64(tc.size) || progress.Load() != int64(tc.size) {
					t.Fatalf("put %d bytes: size %d, progress %d", tc.size, fi.Size, progress.Load())
				}
				var out bytes.Buffer
				if _, err := c.Get(ctx, path, &out, client.GetOptions{VerifyFixity: true}); err != nil || !bytes.Equal(out.Bytes(), data) {
					t.Fatalf("get %d bytes back: %d bytes, %v", tc.size, out.Len(), err)
				}
				if handover {
					want += tc.handed
				}
				if got := s.Mover.Stats().FilesRead; got != want {
					t.Fatalf("after a put of %d bytes in %d stripes: the mover read %d files, want %d", tc.size, tc.stripes, got, want)
				}
			}
		})
	}
}
