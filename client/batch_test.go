package client

import (
	"fmt"
	"sync"
	"testing"
)

// Calls made while a request is in flight go together in the next one,
// each caller gets its own answer, and a lone call goes out at once.
func TestBatcher(t *testing.T) {
	var mu sync.Mutex
	var sizes []int
	release := make(chan struct{})
	first := true
	b := &batcher[int, string]{}
	b.send = func(qs []int) ([]string, []error) {
		mu.Lock()
		sizes = append(sizes, len(qs))
		hold := first
		first = false
		mu.Unlock()
		if hold {
			<-release // the first request stays in flight while the others queue
		}
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
	done := make(chan struct{})
	go func() {
		r, err := b.do(0)
		check(0, r, err)
		close(done)
	}()
	for {
		mu.Lock()
		n := len(sizes)
		mu.Unlock()
		if n == 1 {
			break
		}
	}
	var wg sync.WaitGroup
	for q := 1; q <= 40; q++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			r, err := b.do(q)
			check(q, r, err)
		}()
	}
	for {
		b.mu.Lock()
		n := 0
		if b.next != nil {
			n = len(b.next.qs)
		}
		b.mu.Unlock()
		if n == 40 {
			break
		}
	}
	close(release)
	wg.Wait()
	<-done
	if len(sizes) != 2 || sizes[0] != 1 || sizes[1] != 40 {
		t.Fatalf("requests of %v calls, want [1 40]", sizes)
	}
	if r, err := b.do(7); err != nil || r != "answer 7" {
		t.Fatalf("a lone call: %q, %v", r, err)
	}
}
