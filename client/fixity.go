package client

import (
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"fmt"
	"hash"
	"io"
	"math/bits"
	"strings"
	"sync"

	"lukechampine.com/blake3"
	"lukechampine.com/blake3/guts"

	"github.com/strata-storage/strata/internal/api"
)

// Fixity algorithms: the whole-file strong hash a put records next to the
// CRC32C of every segment, as "ALGORITHM:HEX", for audits years later and
// for a get with VerifyFixity.
//
// BLAKE3 is the default: a 256-bit cryptographic hash that runs at 3–4
// GB/s on one core (SIMD over many 1 KiB chunks at once), so a put keeps
// the disk's pace; `b3sum` (Debian's b3sum package) checks it outside
// Strata. SHA-256, which more audit tools know, runs at ~1.9 GB/s a core
// even with SHA instructions: on the development machine a single put
// recording it is bound by the hash at ~0.8 of the disk (PERFORMANCE.md).
const (
	FixitySHA256 = "sha256"
	FixityBLAKE3 = "blake3"
	// DefaultFixity is what a put records unless told otherwise.
	DefaultFixity = FixityBLAKE3
)

// newHash returns a hash for algorithm alg ("" for the default).
func newHash(alg string) (hash.Hash, string, error) {
	alg, err := fixityAlg(alg)
	switch {
	case err != nil:
		return nil, "", err
	case alg == FixityBLAKE3:
		return blake3.New(32, nil), alg, nil
	}
	return sha256.New(), alg, nil
}

// fixityAlg returns the algorithm alg names ("" for the default), or an
// error if there is none such: what a put checks before anything moves,
// without the hash's state (a BLAKE3 hasher is a few KiB, made for every
// empty file too).
func fixityAlg(alg string) (string, error) {
	switch alg {
	case "":
		return DefaultFixity, nil
	case FixityBLAKE3, FixitySHA256:
		return alg, nil
	}
	return "", api.Errorf(api.ErrInvalid, "unknown fixity algorithm %q (have %s, %s)", alg, FixityBLAKE3, FixitySHA256)
}

// fixityString is the recorded form of a finished hash.
func fixityString(alg string, h hash.Hash) string {
	return alg + ":" + hex.EncodeToString(h.Sum(nil))
}

// recordedHash returns a hash of the algorithm a recorded fixity names, to
// verify it.
func recordedHash(fixity string) (hash.Hash, string, error) {
	alg, _, ok := strings.Cut(fixity, ":")
	if !ok || alg == "" {
		return nil, "", fmt.Errorf("recorded fixity %q names no algorithm", fixity)
	}
	return newHash(alg)
}

// fixityOfBytes is the fixity of a whole small file held in memory, hashed
// in the calling goroutine.
func fixityOfBytes(alg string, p []byte) (string, error) {
	if alg == "" || alg == FixityBLAKE3 {
		sum := blake3Sum256(p)
		return FixityBLAKE3 + ":" + hex.EncodeToString(sum[:]), nil
	}
	h, alg, err := newHash(alg)
	if err != nil {
		return "", err
	}
	h.Write(p)
	return fixityString(alg, h), nil
}

// blake3Sum256 is BLAKE3-256 of p, computed in the calling goroutine: the
// blake3 package's Hasher starts a goroutine per subtree of every Write,
// which for the small files of a many-file put cost more in hand-offs
// than the hashing (a put keeps 64 files in flight on its own). Up to 16
// chunks go through one SIMD compression; a larger input is split as
// BLAKE3's tree is, the left subtree the largest power of two of chunks
// that leaves the right one at least a byte.
func blake3Sum256(p []byte) [32]byte {
	n := blake3Node(p, 0)
	n.Flags |= guts.FlagRoot
	out := guts.WordsToBytes(guts.CompressNode(n))
	return [32]byte(out[:32])
}

func blake3Node(p []byte, counter uint64) guts.Node {
	chunks := (len(p) + guts.ChunkSize - 1) / guts.ChunkSize
	switch {
	case chunks <= 1:
		return guts.CompressChunk(p, &guts.IV, counter, 0)
	case len(p) == guts.MaxSIMD*guts.ChunkSize:
		// A whole SIMD group, hashed in place (every leaf of a large
		// input but its last): the copy below cost a tenth of a
		// streamed upload's CPU.
		return guts.CompressBuffer((*[guts.MaxSIMD * guts.ChunkSize]byte)(p), len(p), &guts.IV, counter, 0)
	case chunks <= guts.MaxSIMD:
		var buf [guts.MaxSIMD * guts.ChunkSize]byte
		copy(buf[:], p)
		return guts.CompressBuffer(&buf, len(p), &guts.IV, counter, 0)
	}
	left := 1 << (bits.Len(uint(chunks-1)) - 1) // chunks
	l := blake3Node(p[:left*guts.ChunkSize], counter)
	r := blake3Node(p[left*guts.ChunkSize:], counter+uint64(left))
	return guts.ParentNode(guts.ChainingValue(l), guts.ChainingValue(r), &guts.IV, 0)
}

// treeHash assembles a put's BLAKE3 fixity from the stripes' own readings
// of the source, so a streamed put reads its source once. BLAKE3 is a
// tree: a span of 2^k 1 KiB chunks starting at a multiple of 2^k chunks is
// a subtree whose node depends only on those bytes and their position.
// Each stripe hashes what it reads into such a node in its own read-ahead
// goroutine, in parallel and in any order; the root is built from the
// nodes at the end. The bytes hashed are the bytes sent (the same buffer,
// before it is reused), so the fixity describes what the movers stored
// even if the source changes meanwhile, without the second reading and
// per-stripe CRC32C comparison that fixityOf needs.
//
// Readings tile the tree when each starts at a multiple of the power of
// two at or above its length, as they do for stripe units that are powers
// of two or multiples of the 1 MiB frame; sum reports when they do not
// (or when a retried stripe spoiled the set), and the put then hashes by
// fixityOf instead.
type treeHash struct {
	mu      sync.Mutex
	pieces  map[int64]treePiece // by offset in the file
	spoiled bool
}

type treePiece struct {
	n    int64
	node guts.Node
}

func newTreeHash() *treeHash { return &treeHash{pieces: map[int64]treePiece{}} }

// readerAt returns src with every reading hashed into t.
func (t *treeHash) readerAt(src io.ReaderAt) io.ReaderAt { return treeReader{src: src, t: t} }

// spoil marks the pieces unusable: a stripe sent again may have read
// different bytes, at different boundaries, than its first attempt.
func (t *treeHash) spoil() {
	t.mu.Lock()
	t.spoiled = true
	t.mu.Unlock()
}

type treeReader struct {
	src io.ReaderAt
	t   *treeHash
}

func (r treeReader) ReadAt(p []byte, off int64) (int, error) {
	n, err := r.src.ReadAt(p, off)
	if n > 0 && off%guts.ChunkSize == 0 {
		node := blake3Node(p[:n], uint64(off/guts.ChunkSize))
		r.t.mu.Lock()
		r.t.pieces[off] = treePiece{n: int64(n), node: node}
		r.t.mu.Unlock()
	}
	return n, err
}

// sum returns the fixity of the first size bytes, or false when the
// pieces read do not make up BLAKE3's tree over them.
func (t *treeHash) sum(size int64) (string, bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.spoiled || size == 0 {
		return "", false
	}
	n, ok := t.node(0, size)
	if !ok {
		return "", false
	}
	n.Flags |= guts.FlagRoot
	out := guts.WordsToBytes(guts.CompressNode(n))
	return FixityBLAKE3 + ":" + hex.EncodeToString(out[:32]), true
}

// node is the node of bytes [lo, hi), split as blake3Node splits them.
func (t *treeHash) node(lo, hi int64) (guts.Node, bool) {
	if p, ok := t.pieces[lo]; ok && p.n == hi-lo {
		return p.node, true
	}
	chunks := (hi - lo + guts.ChunkSize - 1) / guts.ChunkSize
	if chunks <= 1 {
		return guts.Node{}, false
	}
	left := int64(1) << (bits.Len64(uint64(chunks-1)) - 1) * guts.ChunkSize
	l, ok := t.node(lo, lo+left)
	if !ok {
		return guts.Node{}, false
	}
	r, ok := t.node(lo+left, hi)
	if !ok {
		return guts.Node{}, false
	}
	return guts.ParentNode(guts.ChainingValue(l), guts.ChainingValue(r), &guts.IV, 0), true
}

// TreeHash builds a file's BLAKE3 fixity from pieces hashed apart, in
// other requests or processes: S3 parts hashed as they arrive, joined by
// Concat without being read again. Pieces tile BLAKE3's tree when each
// starts at a multiple of the power of two at or above its length (the
// aligned power-of-two blocks of parts of a whole number of MiB, and the
// last part).
type TreeHash struct{ t *treeHash }

// NewTreeHash returns an empty TreeHash.
func NewTreeHash() *TreeHash { return &TreeHash{newTreeHash()} }

// At returns a writer hashing the bytes at off onwards (off a multiple of
// 1 MiB) in 1 MiB blocks; Close hashes the last, short one.
func (h *TreeHash) At(off int64) *TreeWriter {
	return &TreeWriter{t: h.t, off: off, buf: make([]byte, 0, treeBlock)}
}

// treeBlock is the piece a TreeWriter hashes at once: 1,024 chunks.
const treeBlock = 1 << 20

// TreeWriter hashes a run of a file's bytes into a TreeHash.
type TreeWriter struct {
	t   *treeHash
	off int64 // of buf's start
	buf []byte
}

// Write hashes whole blocks of p where they start a block, and gathers
// the rest in its buffer.
func (w *TreeWriter) Write(p []byte) (int, error) {
	n := len(p)
	for len(p) > 0 {
		if len(w.buf) == 0 && len(p) >= treeBlock {
			w.hash(p[:treeBlock])
			p = p[treeBlock:]
			continue
		}
		k := min(len(p), treeBlock-len(w.buf))
		w.buf = append(w.buf, p[:k]...)
		p = p[k:]
		if len(w.buf) == treeBlock {
			w.hash(w.buf)
			w.buf = w.buf[:0]
		}
	}
	return n, nil
}

// Close hashes what is left.
func (w *TreeWriter) Close() error {
	if len(w.buf) > 0 {
		w.hash(w.buf)
		w.buf = w.buf[:0]
	}
	return nil
}

// hash adds b, the block at w.off, to the tree.
func (w *TreeWriter) hash(b []byte) {
	node := blake3Node(b, uint64(w.off/guts.ChunkSize))
	w.t.mu.Lock()
	w.t.pieces[w.off] = treePiece{n: int64(len(b)), node: node}
	w.t.mu.Unlock()
	w.off += int64(len(b))
}

// Node returns the node of bytes [lo, hi), encoded for AddNode, or false
// when the pieces hashed do not make it up.
func (h *TreeHash) Node(lo, hi int64) (string, bool) {
	h.t.mu.Lock()
	defer h.t.mu.Unlock()
	n, ok := h.t.node(lo, hi)
	if !ok {
		return "", false
	}
	words := make([]uint32, 0, 8+16+4)
	words = append(append(words, n.CV[:]...), n.Block[:]...)
	words = append(words, uint32(n.Counter), uint32(n.Counter>>32), n.BlockLen, n.Flags)
	b := make([]byte, 0, 4*len(words))
	for _, v := range words {
		b = binary.LittleEndian.AppendUint32(b, v)
	}
	return hex.EncodeToString(b), true
}

// AddNode adds the node of bytes [lo, hi) that Node encoded.
func (h *TreeHash) AddNode(lo, hi int64, enc string) error {
	b, err := hex.DecodeString(enc)
	if err != nil || len(b) != 4*(8+16+4) || lo < 0 || hi <= lo {
		return fmt.Errorf("tree node %q of [%d, %d): malformed", enc, lo, hi)
	}
	word := func(i int) uint32 { return binary.LittleEndian.Uint32(b[4*i:]) }
	var n guts.Node
	for i := range n.CV {
		n.CV[i] = word(i)
	}
	for i := range n.Block {
		n.Block[i] = word(8 + i)
	}
	n.Counter = uint64(word(24)) | uint64(word(25))<<32
	n.BlockLen, n.Flags = word(26), word(27)
	h.t.mu.Lock()
	h.t.pieces[lo] = treePiece{n: hi - lo, node: n}
	h.t.mu.Unlock()
	return nil
}

// Sum returns the BLAKE3 fixity of the first size bytes ("blake3:HEX"),
// or false when the pieces do not make up BLAKE3's tree over them.
func (h *TreeHash) Sum(size int64) (string, bool) { return h.t.sum(size) }
