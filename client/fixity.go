package client

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"hash"
	"strings"

	"lukechampine.com/blake3"

	"github.com/strata-storage/strata/internal/api"
)

// Fixity algorithms: the whole-file strong hash a put records next to the
// CRC32C of every segment, as "ALGORITHM:HEX", for audits years later and
// for a get with VerifyFixity.
//
// BLAKE3 is the default because it keeps up with the data path: on one core
// of the development machine it hashes several GB/s (SIMD over many 1 KiB
// chunks at once), where SHA-256 with the CPU's SHA instructions does
// ~1.8 GB/s and bounded a single put at ~0.6 of the disk's speed
// (PERFORMANCE.md). SHA-256 stays available for sites whose audit tools
// expect it.
const (
	FixityBLAKE3 = "blake3"
	FixitySHA256 = "sha256"
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
