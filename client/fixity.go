package client

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"hash"
	"math/bits"
	"strings"

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
	if alg == "" {
		alg = DefaultFixity
	}
	switch alg {
	case FixityBLAKE3:
		return blake3.New(32, nil), alg, nil
	case FixitySHA256:
		return sha256.New(), alg, nil
	}
	return nil, "", api.Errorf(api.ErrInvalid, "unknown fixity algorithm %q (have %s, %s)", alg, FixityBLAKE3, FixitySHA256)
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
