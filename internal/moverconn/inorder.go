package moverconn

import (
	"context"
	"sync"
)

// MaxStripeReaders is how many stripes of one file a reader that puts
// them back in file order (a get, a migration) reads at once when the
// layout allows a window (OneUnitEach): a file joined from many parts
// (an S3 multipart upload) has one stripe per part, up to 10,000.
const MaxStripeReaders = 16

// OneUnitEach reports whether no stripe holds more than one stripe unit:
// the file is then read stripe after stripe, so a window of them at a
// time keeps every byte flowing in order. (With several units a stripe,
// file order comes back to stripe 0 after the last stripe's first unit:
// every stripe must be read at once.)
func OneUnitEach(lengths []int64, unit int64) bool {
	for _, n := range lengths {
		if n > unit {
			return false
		}
	}
	return true
}

// InOrder calls fn(k) for every k in [0, width) in a goroutine of its
// own, at most limit at a time (all at once for limit <= 0), starting
// each only after every lower k has started: the lowest unfinished
// stripes always run, so a consumer taking their output in file order
// never waits on one that cannot start. Once ctx ends the rest start at
// once (to fail fast). It returns when every fn has returned.
func InOrder(ctx context.Context, width, limit int, fn func(k int)) {
	if limit <= 0 || limit > width {
		limit = width
	}
	sem := make(chan struct{}, limit)
	var wg sync.WaitGroup
	for k := 0; k < width; k++ {
		held := false
		select {
		case sem <- struct{}{}:
			held = true
		case <-ctx.Done():
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			if held {
				defer func() { <-sem }()
			}
			fn(k)
		}()
	}
	wg.Wait()
}
