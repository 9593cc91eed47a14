package s3

import (
	"bytes"
	"crypto/md5"
	"crypto/rand"
	"fmt"
	"sync"
	"testing"
)

// TestMD5Lanes: bodies hashed in md5Lanes, many at once and written in
// pieces of any size, get crypto/md5's sums; small ones skip the lanes.
func TestMD5Lanes(t *testing.T) {
	sizes := []int64{0, 1, 63, 64, laneMin - 1, laneMin, laneMin + 1, 3*laneMin + 17}
	var wg sync.WaitGroup
	for i, size := range sizes {
		for k := range 3 { // several of each at once, sharing the lanes
			wg.Add(1)
			go func() {
				defer wg.Done()
				body := make([]byte, size)
				rand.Read(body)
				h, free := newMD5(size)
				defer free()
				for p, piece := body, []int{1, 4096, 100 << 10, 7}[(i+k)%4]; len(p) > 0; {
					n := min(piece, len(p))
					h.Write(p[:n])
					p = p[n:]
				}
				want := md5.Sum(body)
				if got := h.Sum(nil); !bytes.Equal(got, want[:]) {
					t.Errorf("%d bytes: md5 %x, want %x", size, got, want)
				}
				if lanes := fmt.Sprintf("%T", h) != "*md5.digest"; lanes != (size >= laneMin) {
					t.Errorf("%d bytes hashed in the lanes: %v", size, lanes)
				}
			}()
		}
	}
	wg.Wait()
}
