package wire

// CRC32C combination (the method of zlib's crc32_combine, for the
// Castagnoli polynomial): given crc(A) and crc(B), compute crc(A‖B) in
// O(log len(B)) without touching the data. Movers and clients check every
// frame's CRC once and derive stream and object CRCs from the frame CRCs,
// instead of scanning each byte three times.

const castagnoliReversed = 0x82f63b78

func gf2Times(mat *[32]uint32, vec uint32) uint32 {
	var sum uint32
	for i := 0; vec != 0; i, vec = i+1, vec>>1 {
		if vec&1 != 0 {
			sum ^= mat[i]
		}
	}
	return sum
}

func gf2Square(square, mat *[32]uint32) {
	for n := 0; n < 32; n++ {
		square[n] = gf2Times(mat, mat[n])
	}
}

// zeroOps[k] is the operator that appends 2^k zero bytes to a CRC.
var zeroOps = func() (ops [64][32]uint32) {
	var odd, even [32]uint32
	odd[0] = castagnoliReversed // the operator for one zero bit
	row := uint32(1)
	for n := 1; n < 32; n++ {
		odd[n] = row
		row <<= 1
	}
	gf2Square(&even, &odd) // two zero bits
	gf2Square(&odd, &even) // four
	gf2Square(&even, &odd) // one zero byte
	ops[0] = even
	for k := 1; k < 64; k++ {
		gf2Square(&ops[k], &ops[k-1])
	}
	return ops
}()

// CombineCRC returns the CRC32C of A‖B from crcA = CRC32C(A), crcB =
// CRC32C(B) and lenB = len(B).
func CombineCRC(crcA, crcB uint32, lenB int64) uint32 {
	if lenB <= 0 {
		return crcA
	}
	for k := 0; lenB != 0; k, lenB = k+1, lenB>>1 {
		if lenB&1 != 0 {
			crcA = gf2Times(&zeroOps[k], crcA)
		}
	}
	return crcA ^ crcB
}
