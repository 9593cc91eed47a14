package disk

import (
	"bytes"
	"sync"
	"testing"
	"unsafe"
)

func addr(b []byte) uintptr { return uintptr(unsafe.Pointer(unsafe.SliceData(b))) }

// TestBufferPool: buffers are a chunk long and aligned for direct I/O
// (the halves of a huge-page region); one given back is the next handed
// out; beyond maxHot a buffer given back has its memory returned (it
// reads zeros, and stays usable) and is handed out after the hot ones.
func TestBufferPool(t *testing.T) {
	p := &BufferPool{}
	a, b := p.Get(), p.Get()
	for _, x := range []*[]byte{a, b} {
		if len(*x) != ChunkSize || cap(*x) != ChunkSize {
			t.Fatalf("buffer of len %d cap %d, want %d", len(*x), cap(*x), ChunkSize)
		}
		if addr(*x)%directAlign != 0 {
			t.Fatalf("buffer at %#x not aligned to %d", addr(*x), directAlign)
		}
	}
	// One region, two halves: the second Get took the first's sibling.
	if lo := min(addr(*a), addr(*b)); lo%hugePage != 0 || max(addr(*a), addr(*b))-lo != ChunkSize {
		t.Errorf("buffers at %#x and %#x: not the halves of one aligned huge page", addr(*a), addr(*b))
	}
	p.Put(a)
	if c := p.Get(); c != a {
		t.Errorf("a buffer given back is not the next handed out")
	}

	// Fill the hot list, then give back two more with data in them (an
	// even number of buffers: whole regions, none left over in the pool).
	var held []*[]byte
	for range maxHot + 2 {
		x := p.Get()
		copy(*x, bytes.Repeat([]byte{0xa5}, 4096))
		held = append(held, x)
	}
	for _, x := range held {
		p.Put(x)
	}
	if len(p.hot) != maxHot || len(p.cold) != 2 {
		t.Fatalf("hot %d, cold %d; want %d and 2", len(p.hot), len(p.cold), maxHot)
	}
	last := held[len(held)-1]
	if !bytes.Equal((*last)[:4096], make([]byte, 4096)) {
		t.Errorf("a buffer beyond maxHot kept its memory")
	}
	for range maxHot {
		p.Get()
	}
	if x := p.Get(); x != last {
		t.Errorf("the cold buffer is not handed out after the hot ones")
	} else {
		(*x)[0] = 1 // still mapped, writable
	}
}

// TestBufferPoolConcurrent: buffers handed out at once are distinct, and
// survive being written and given back from many goroutines (run with
// -race).
func TestBufferPoolConcurrent(t *testing.T) {
	p := &BufferPool{}
	var mu sync.Mutex
	out := map[uintptr]bool{}
	var wg sync.WaitGroup
	for g := range 16 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range 200 {
				x := p.Get()
				mu.Lock()
				if out[addr(*x)] {
					mu.Unlock()
					t.Errorf("buffer %#x handed out twice", addr(*x))
					return
				}
				out[addr(*x)] = true
				mu.Unlock()
				(*x)[i%ChunkSize] = byte(g)
				mu.Lock()
				delete(out, addr(*x))
				mu.Unlock()
				p.Put(x)
			}
		}()
	}
	wg.Wait()
}
