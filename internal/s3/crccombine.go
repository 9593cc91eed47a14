package s3

import (
	"encoding/base64"
	"encoding/binary"
)

// A multipart upload with a FULL_OBJECT checksum gets the CRC of the whole
// object, though its parts arrive, and are joined, one by one. For the
// reflected CRCs S3 allows there (CRC32, CRC32C, CRC-64/NVME, each with
// initial value and final XOR all ones), the CRC of A‖B follows from the
// CRCs of A and B and the length of B alone, in GF(2):
//
//	crc(A‖B) = crc(A) · x^(8·len(B)) mod P  ⊕  crc(B)
//
// (zlib's crc32_combine, by Mark Adler.) So Complete combines the parts'
// checksums, which UploadPart verified, and the parts are joined without
// a byte read.

// crcPoly is one reflected CRC polynomial and the powers x^(2^k) mod P
// its combination multiplies by.
type crcPoly struct {
	poly  uint64 // reflected
	width uint   // bits: 32 or 64
	x2n   [67]uint64
}

// crcPolys are the CRCs a FULL_OBJECT checksum may be.
var crcPolys = map[string]*crcPoly{
	"crc32":     newCRCPoly(0xedb88320, 32),
	"crc32c":    newCRCPoly(0x82f63b78, 32),
	"crc64nvme": newCRCPoly(0x9a6c9329ac4bc9b5, 64),
}

func newCRCPoly(poly uint64, width uint) *crcPoly {
	c := &crcPoly{poly: poly, width: width}
	p := c.one() >> 1 // x^1
	for k := range c.x2n {
		c.x2n[k] = p
		p = c.mult(p, p)
	}
	return c
}

// one is the polynomial 1 (x^0), the top bit in the reflected order.
func (c *crcPoly) one() uint64 { return 1 << (c.width - 1) }

// mult is a·b mod P.
func (c *crcPoly) mult(a, b uint64) uint64 {
	var p uint64
	for m := c.one(); m != 0 && a != 0; m >>= 1 {
		if a&m != 0 {
			p ^= b
			a ^= m
		}
		if b&1 != 0 {
			b = b>>1 ^ c.poly
		} else {
			b >>= 1
		}
	}
	return p
}

// shift is x^(8·n) mod P: what the CRC of a prefix is multiplied by when
// n bytes follow it. x^(8n) is the product of x^(2^k) over the bits k of
// 8n (k from 3: n counts bytes).
func (c *crcPoly) shift(n int64) uint64 {
	p := c.one()
	for k := 3; n != 0; k++ {
		if n&1 != 0 {
			p = c.mult(c.x2n[k], p)
		}
		n >>= 1
	}
	return p
}

// combine is crc(A‖B) from crc(A), crc(B) and shift(len(B)).
func (c *crcPoly) combine(a, b, shift uint64) uint64 {
	return c.mult(shift, a) ^ b
}

// decode reads a checksum header's value (base64, big-endian).
func (c *crcPoly) decode(v string) (uint64, bool) {
	d, err := base64.StdEncoding.DecodeString(v)
	switch {
	case err != nil || len(d) != int(c.width/8):
		return 0, false
	case c.width == 32:
		return uint64(binary.BigEndian.Uint32(d)), true
	}
	return binary.BigEndian.Uint64(d), true
}

func (c *crcPoly) encode(v uint64) string {
	d := binary.BigEndian.AppendUint64(nil, v)
	return base64.StdEncoding.EncodeToString(d[8-c.width/8:])
}

// combineSums is the FULL_OBJECT checksum of algorithm alg of parts
// whose checksums are sums (as sent) and sizes sizes, or false when alg
// is no CRC or a part's checksum is missing or malformed.
func combineSums(alg string, sums []string, sizes []int64) (string, bool) {
	c := crcPolys[alg]
	if c == nil || len(sums) == 0 {
		return "", false
	}
	shifts := map[int64]uint64{} // the parts but the last are of one size
	var crc uint64
	for i, s := range sums {
		v, ok := c.decode(s)
		if !ok {
			return "", false
		}
		if i == 0 {
			crc = v
			continue
		}
		sh, ok := shifts[sizes[i]]
		if !ok {
			sh = c.shift(sizes[i])
			shifts[sizes[i]] = sh
		}
		crc = c.combine(crc, v, sh)
	}
	return c.encode(crc), true
}
