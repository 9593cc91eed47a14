package tapeserver

import (
	"context"
	"fmt"
	"math/bits"
	"sync"

	"golang.org/x/sync/semaphore"
)

// A tape file of small files is written file after file, and reading each
// file's disk copy is a round trip to its mover (open, read, verify, send)
// that takes longer than the drive takes to write it: read one at a time,
// the drive waited for every file. readAhead reads the small files of a
// tape file ahead of the drive, several at once, into memory, and hands
// them over in order; large files stream as before (readFile overlaps
// their reading and writing unit by unit).
const (
	readAheadMax   = 4 << 20  // files up to this size (one stripe) are read ahead
	readAheadFiles = 64       // reads in flight
	readAheadBytes = 64 << 20 // memory the files read ahead may hold
)

// ahead is one file read ahead: its bytes once done is closed.
type ahead struct {
	done chan struct{}
	size int64 // memory held from readAhead.mem until release
	data []byte
	err  error
}

// readAhead starts reading files' small disk copies ahead; slot i is nil
// for a file left to readDisk. Each slot taken must be given back with
// release; stop cancels what is still running and waits for it.
type readAhead struct {
	slots  []*ahead
	mem    *semaphore.Weighted
	cancel context.CancelFunc
	wg     sync.WaitGroup
}

func (x *Exec) readAhead(ctx context.Context, files []File) *readAhead {
	ctx, cancel := context.WithCancel(ctx)
	ra := &readAhead{slots: make([]*ahead, len(files)), mem: semaphore.NewWeighted(readAheadBytes), cancel: cancel}
	for i, f := range files {
		if f.Single() && f.Size <= readAheadMax {
			ra.slots[i] = &ahead{done: make(chan struct{}), size: int64(classSize(f.Size))}
		}
	}
	ra.wg.Add(1)
	go func() {
		defer ra.wg.Done()
		inflight := semaphore.NewWeighted(readAheadFiles)
		for i, a := range ra.slots {
			if a == nil {
				continue
			}
			f := files[i]
			if ra.mem.Acquire(ctx, a.size) != nil || inflight.Acquire(ctx, 1) != nil {
				for _, rest := range ra.slots[i:] { // stopped: the rest fail
					if rest != nil {
						rest.err = ctx.Err()
						close(rest.done)
					}
				}
				return
			}
			ra.wg.Add(1)
			go func() {
				defer ra.wg.Done()
				defer inflight.Release(1)
				a.data, a.err = x.readSmall(ctx, f.Stripes[0])
				close(a.done)
			}()
		}
	}()
	return ra
}

// readSmall reads a one-stripe disk copy into memory from smallBufs.
func (x *Exec) readSmall(ctx context.Context, s Source) ([]byte, error) {
	dst := &fixedBuffer{b: getSmall(s.Length)}
	buf := frameBufs.Get().(*[]byte)
	defer frameBufs.Put(buf)
	if err := x.readRange(ctx, s, 0, s.Length, dst, *buf); err != nil {
		putSmall(dst.b)
		return nil, err
	}
	return dst.b, nil
}

// smallBufs holds the buffers files are read ahead into, one pool per
// power of two from 4 KiB to readAheadMax: a new buffer for every file
// cost the memory's zeroing as well as its use (a tenth of the CPU of a
// job of 64 KiB files).
var smallBufs [smallClasses]sync.Pool

const (
	smallMinShift = 12
	smallClasses  = 23 - smallMinShift // up to 4 MiB = readAheadMax
)

func smallClass(n int64) int {
	return max(0, bits.Len64(uint64(max(n, 1)-1))-smallMinShift)
}

// classSize is the capacity of the buffer a file of n bytes is read into.
func classSize(n int64) int { return 1 << (smallClass(n) + smallMinShift) }

func getSmall(n int64) []byte {
	if p, ok := smallBufs[smallClass(n)].Get().(*[]byte); ok {
		return (*p)[:0]
	}
	return make([]byte, 0, classSize(n))
}

func putSmall(b []byte) {
	if c := smallClass(int64(cap(b))); cap(b) == classSize(int64(cap(b))) && c < smallClasses {
		b = b[:0]
		smallBufs[c].Put(&b)
	}
}

// take waits for file i read ahead; nil, nil if it was not.
func (ra *readAhead) take(ctx context.Context, i int) ([]byte, error) {
	a := ra.slots[i]
	if a == nil {
		return nil, nil
	}
	select {
	case <-a.done:
		return a.data, a.err
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

// release gives back the memory of file i, once taken and written.
func (ra *readAhead) release(i int) {
	if a := ra.slots[i]; a != nil {
		putSmall(a.data)
		a.data = nil
		ra.mem.Release(a.size)
	}
}

func (ra *readAhead) stop() {
	ra.cancel()
	ra.wg.Wait()
}

// fixedBuffer collects exactly the bytes it was sized for. It is a
// moverconn.FrameSink: a read fills its memory in place.
type fixedBuffer struct{ b []byte }

func (f *fixedBuffer) Write(p []byte) (int, error) {
	if len(f.b)+len(p) > cap(f.b) {
		return 0, fmt.Errorf("read: more than the %d bytes expected", cap(f.b))
	}
	f.b = append(f.b, p...)
	return len(p), nil
}

// Buffer returns the room for the next n bytes (a buffer of its own if
// they would not fit, which Deliver then refuses).
func (f *fixedBuffer) Buffer(n int) []byte {
	if len(f.b)+n > cap(f.b) {
		return make([]byte, n)
	}
	return f.b[len(f.b) : len(f.b)+n]
}

// Deliver takes p, filled in place or not; its CRC was verified.
func (f *fixedBuffer) Deliver(p []byte, _ uint32) error {
	if n := len(f.b); len(p) > 0 && n+len(p) <= cap(f.b) && &f.b[:n+1][n] == &p[0] {
		f.b = f.b[:n+len(p)]
		return nil
	}
	_, err := f.Write(p)
	return err
}

func (f *fixedBuffer) count() int64 { return int64(len(f.b)) }
