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
