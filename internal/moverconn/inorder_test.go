package moverconn

import (
	"context"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// TestInOrder: at most limit run at once, and a consumer that lets
// stripe k finish only once it has started, in file order, never waits
// forever; after the context ends the rest start at once.
func TestInOrder(t *testing.T) {
	for _, tc := range []struct{ width, limit, wantMax int }{
		{40, 4, 4}, {3, 16, 3}, {10, 0, 10}, {1, 1, 1},
	} {
		var running, most atomic.Int32
		var mu sync.Mutex
		var started []int
		release := make([]chan struct{}, tc.width)
		for k := range release {
			release[k] = make(chan struct{})
		}
		done := make(chan struct{})
		go func() {
			InOrder(context.Background(), tc.width, tc.limit, func(k int) {
				n := running.Add(1)
				for m := most.Load(); n > m && !most.CompareAndSwap(m, n); m = most.Load() {
				}
				mu.Lock()
				started = append(started, k)
				mu.Unlock()
				<-release[k] // the consumer takes stripe k's output
				running.Add(-1)
			})
			close(done)
		}()
		// Release in file order, as a consumer would; each stripe must
		// have started by the time the ones before it are done.
		for k := 0; k < tc.width; k++ {
			for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(100 * time.Microsecond) {
				mu.Lock()
				ok := slices.Contains(started, k)
				mu.Unlock()
				if ok {
					break
				}
				if time.Now().After(deadline) {
					t.Fatalf("width %d limit %d: stripe %d never started", tc.width, tc.limit, k)
				}
			}
			close(release[k])
		}
		<-done
		if got := int(most.Load()); got > tc.wantMax {
			t.Fatalf("width %d limit %d: %d ran at once", tc.width, tc.limit, got)
		}
	}
	// A cancelled context starts the rest without waiting for a turn.
	ctx, cancel := context.WithCancel(context.Background())
	block := make(chan struct{})
	var ran atomic.Int32
	go func() { time.Sleep(10 * time.Millisecond); cancel() }()
	go func() { time.Sleep(50 * time.Millisecond); close(block) }()
	InOrder(ctx, 10, 1, func(k int) {
		ran.Add(1)
		if k == 0 {
			<-block
		}
	})
	if ran.Load() != 10 {
		t.Fatalf("%d of 10 ran", ran.Load())
	}
}

func TestOneUnitEach(t *testing.T) {
	if !OneUnitEach([]int64{64, 64, 10, 0}, 64) || OneUnitEach([]int64{64, 65}, 64) || !OneUnitEach(nil, 1) {
		t.Fatal("OneUnitEach")
	}
}
