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
// SHA-256 is the default: audit tools know it, and CPUs with SHA
// instructions hash it at ~1.9 GB/s a core. BLAKE3 hashes 4–5 GB/s a core
// (SIMD over many 1 KiB chunks at once) and is the choice where SHA-256
// has no hardware help; on the development machine, two vCPUs that share
// one core's vector units, its AVX-512 hashing slowed the put's other
// work more than it saved (PERFORMANCE.md), so it is not the default.
const (
	FixitySHA256 = "sha256"
	FixityBLAKE3 = "blake3"
	// DefaultFixity is what a put records unless told otherwise.
	DefaultFixity = FixitySHA256
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
