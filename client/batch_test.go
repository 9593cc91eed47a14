package client

import (
	"fmt"
	"runtime"
	"slices"
	"sync"
	"testing"

	"github.com/strata-storage/strata/internal/api"
)

// Calls made while the window of requests is in flight go together in the
// next ones (at most api.MaxBatch calls each), each caller gets its own
// answer, and a call made while the window has room goes out at once.
func TestBatcher(t *testing.T) {
	for _, tc := range []struct {
		queued int
		want   []int // sizes of the requests after the window's lone calls
	}{
		{40, []int{40}},
		{api.MaxBatch + 5, []int{5, api.MaxBatch}},
	} {
		t.Run(fmt.Sprint(tc.queued), func(t *testing.T) {
			var mu sync.Mutex
			var sizes []int
			release := make(chan struct{})
			b := &batcher[int, string]{}
			b.send = func(qs []int) ([]string, []error) {
				mu.Lock()
				sizes = append(sizes, len(qs))
				mu.Unlock()
				<-release // the window's requests stay in flight while the others queue
				rs, errs := make([]string, len(qs)), make([]error, len(qs))
				for i, q := range qs {
					if q%10 == 3 {
						errs[i] = fmt.Errorf("call %d refused", q)
					} else {
						rs[i] = fmt.Sprint("answer ", q)
					}
				}
				return rs, errs
			}
			check := func(q int, r string, err error) {
				if q%10 == 3 {
					if err == nil || err.Error() != fmt.Sprintf("call %d refused", q) {
						t.Errorf("call %d: %q, %v", q, r, err)
					}
				} else if err != nil || r != fmt.Sprint("answer ", q) {
					t.Errorf("call %d: %q, %v", q, r, err)
				}
			}
			var wg sync.WaitGroup
			call := func(q int) {
				wg.Add(1)
				go func() {
					defer wg.Done()
					r, err := b.do(q)
					check(q, r, err)
				}()
			}
			waitFor := func(cond func() bool) {
				for {
					mu.Lock()
					b.mu.Lock()
					ok := cond()
					b.mu.Unlock()
					mu.Unlock()
					if ok {
						return
					}
					runtime.Gosched()
				}
			}
			for q := range batchWindow {
				call(1000000 + q)
			}
			waitFor(func() bool { return len(sizes) == batchWindow })
			for q := 1; q <= tc.queued; q++ {
				call(q)
			}
			waitFor(func() bool {
				n := 0
				for _, g := range b.queue {
					n += len(g.qs)
				}
				return n == tc.queued
			})
			close(release)
			wg.Wait()
			want := slices.Repeat([]int{1}, batchWindow)
			if got := sizes[:batchWindow]; !slices.Equal(got, want) {
				t.Fatalf("the window's requests carry %v calls, want %v", got, want)
			}
			got := slices.Clone(sizes[batchWindow:])
			slices.Sort(got) // the waiting batches go out from goroutines of their own
			if !slices.Equal(got, tc.want) {
				t.Fatalf("then requests of %v calls, want %v", got, tc.want)
			}
			if r, err := b.do(7); err != nil || r != "answer 7" {
				t.Fatalf("a lone call: %q, %v", r, err)
			}
			if b.inflight != 0 || len(b.queue) != 0 {
				t.Fatalf("after every answer: %d in flight, %d batches waiting", b.inflight, len(b.queue))
			}
		})
	}
}
