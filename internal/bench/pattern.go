package bench

import (
	"bytes"
	"math/rand/v2"
	"sync"
)

// pattern is the data every scenario writes: a pseudo-random block of
// period bytes, repeated, read at an offset shifted by the file's seed.
// A write is a slice of it (no copy, no generation in the timed loop) and
// a reader checks any range by comparing with the same slice. The period
// is odd-sized so that blocks misplaced by a multiple of 4 KiB never match.
type pattern struct {
	mu   sync.RWMutex
	data []byte // period bytes, repeated to cover the longest record asked for
}

const patternPeriod = 1<<20 + 4099

func newPattern() *pattern {
	p := &pattern{data: make([]byte, patternPeriod)}
	rand.NewChaCha8([32]byte{'s', 't', 'r', 'a', 't', 'a'}).Read(p.data)
	return p
}

// at returns the n bytes of the file with the given seed at offset off.
func (p *pattern) at(seed, off int64, n int) []byte {
	start := int((uint64(seed)*0x9e3779b97f4a7c15 + uint64(off)) % patternPeriod)
	p.mu.RLock()
	if start+n <= len(p.data) {
		b := p.data[start : start+n : start+n]
		p.mu.RUnlock()
		return b
	}
	p.mu.RUnlock()
	p.mu.Lock()
	for l := len(p.data); l < start+n; l = len(p.data) {
		// Byte i repeats byte i − period: the data stays periodic however
		// it grows.
		k := min(patternPeriod, start+n-l)
		p.data = append(p.data, p.data[l-patternPeriod:l-patternPeriod+k]...)
	}
	b := p.data[start : start+n : start+n]
	p.mu.Unlock()
	return b
}

// check compares got with what the file holds at off.
func (p *pattern) check(seed, off int64, got []byte) bool {
	return bytes.Equal(got, p.at(seed, off, len(got)))
}

// reserve grows the pattern so that any record of n bytes is a slice of
// it, so that no timed write pays for the growth.
func (p *pattern) reserve(n int) { p.at(0, patternPeriod-1, n) }
