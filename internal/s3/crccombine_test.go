package s3

import (
	"encoding/base64"
	"math/rand/v2"
	"testing"
)

// sumOf is a checksum header's value for data, computed the direct way.
func sumOf(alg string, data []byte) string {
	h := checksumAlgs[alg]()
	h.Write(data)
	return base64.StdEncoding.EncodeToString(h.Sum(nil))
}

// combined splits data at cuts, checksums each part and combines them.
func combined(t testing.TB, alg string, data []byte, cuts []int) string {
	var sums []string
	var sizes []int64
	from := 0
	for _, to := range append(cuts, len(data)) {
		sums = append(sums, sumOf(alg, data[from:to]))
		sizes = append(sizes, int64(to-from))
		from = to
	}
	got, ok := combineSums(alg, sums, sizes)
	if !ok {
		t.Fatalf("%s: not combined", alg)
	}
	return got
}

// The combination of the parts' CRCs is the whole object's CRC, for each
// CRC a FULL_OBJECT checksum may be, parts of any size (empty ones too).
func TestCombineSums(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	data := make([]byte, 3<<20+17)
	for i := range data {
		data[i] = byte(rng.Uint32())
	}
	for _, tc := range []struct {
		name string
		n    int
		cuts []int
	}{
		{"one part", 1000, nil},
		{"equal parts", 3 << 20, []int{1 << 20, 2 << 20}},
		{"last part short", 3<<20 + 17, []int{1 << 20, 2 << 20, 3 << 20}},
		{"one byte each", 4, []int{1, 2, 3}},
		{"an empty part", 100, []int{50, 50}},
		{"odd sizes", 1 << 20, []int{7, 4099, 65537}},
	} {
		for alg := range crcPolys {
			t.Run(tc.name+"/"+alg, func(t *testing.T) {
				want := sumOf(alg, data[:tc.n])
				if got := combined(t, alg, data[:tc.n], tc.cuts); got != want {
					t.Fatalf("combined %s, want %s", got, want)
				}
			})
		}
	}
}

// What cannot be combined says so: a hash that is no CRC, a part without
// its checksum or with a malformed one.
func TestCombineSumsRefused(t *testing.T) {
	good := sumOf("crc32", []byte("part"))
	for _, tc := range []struct {
		name, alg string
		sums      []string
	}{
		{"sha256", "sha256", []string{sumOf("sha256", []byte("a")), sumOf("sha256", []byte("b"))}},
		{"no parts", "crc32", nil},
		{"a part without", "crc32", []string{good, ""}},
		{"not base64", "crc32", []string{good, "!!!!"}},
		{"crc64 length for crc32", "crc32", []string{good, sumOf("crc64nvme", []byte("x"))}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got, ok := combineSums(tc.alg, tc.sums, make([]int64, len(tc.sums))); ok {
				t.Fatalf("combined to %s, want refused", got)
			}
		})
	}
}

func FuzzCRCCombine(f *testing.F) {
	f.Add([]byte("hello, world"), uint16(5), uint16(3))
	f.Add(make([]byte, 4096), uint16(0), uint16(4096))
	f.Fuzz(func(t *testing.T, data []byte, a, b uint16) {
		i, j := int(a)%(len(data)+1), int(b)%(len(data)+1)
		if i > j {
			i, j = j, i
		}
		for alg := range crcPolys {
			if got, want := combined(t, alg, data, []int{i, j}), sumOf(alg, data); got != want {
				t.Fatalf("%s of %d bytes cut at %d and %d: combined %s, want %s", alg, len(data), i, j, got, want)
			}
		}
	})
}
