// Package aesgcm is AES-128-GCM (NIST SP 800-38D) for the movers' data
// channel, computed with the VAES and VPCLMULQDQ instructions on 512-bit
// registers where the CPU has them, and by the standard library's
// crypto/cipher GCM everywhere else. It owns nothing but that cipher.
//
// Why not only crypto/cipher: a put or get over the encrypted data
// channel is bound by the two cores' CPU, and AES-GCM is the largest part
// of what it costs beyond plain TCP. The standard library's assembly
// works on 128-bit registers (AES-NI, eight blocks at a time); it sealed
// and opened at 3.5–3.8 GB/s a core here. With VAES a core encrypts four
// blocks an instruction and VPCLMULQDQ multiplies four GHASH blocks
// (Linux's aes-gcm-avx10 and OpenSSL's AVX-512 GCM do the same); this
// package seals and opens 256 KiB frames at about twice that rate
// (go test -bench . ./internal/aesgcm, which measures both in the same
// run). Go's crypto packages do not use these instructions, and no
// maintained Go module offers them.
//
// What is written here is only the bulk work: the CTR keystream and
// GHASH over whole blocks, in aesgcm_amd64.s. The hash key, E(K, J0),
// the key powers and the tag comparison use crypto/aes and
// crypto/subtle. The tests compare every output with crypto/cipher's, for
// random keys, nonces, lengths and additional data, and fuzz it.
//
// The counter is GCM's inc32 of the last four bytes, as the standard
// defines it; nonces are 12 bytes; tags 16.
package aesgcm

import (
	"crypto/aes"
	"crypto/cipher"
	"crypto/subtle"
	"encoding/binary"
	"errors"
	"math/bits"
	"unsafe"
)

// New returns AES-GCM with key, which must be 16, 24 or 32 bytes. A
// 16-byte key on a CPU with VAES, VPCLMULQDQ and AVX-512 gets this
// package's implementation; any other the standard library's.
func New(key []byte) (cipher.AEAD, error) {
	block, err := aes.NewCipher(key)
	if err != nil {
		return nil, err
	}
	if len(key) != 16 || !haveAsm {
		return cipher.NewGCM(block)
	}
	return newWide(block, key), nil
}

// Accelerated says whether New uses this package's implementation for
// 16-byte keys on this machine.
func Accelerated() bool { return haveAsm }

const (
	nonceSize = 12
	tagSize   = 16
	// maxPlain is GCM's limit on one message: 2^32 - 2 blocks.
	maxPlain = (1<<32 - 2) * 16
)

var errOpen = errors.New("cipher: message authentication failed")

// wide is AES-128-GCM on wide registers.
type wide struct {
	block cipher.Block
	rk    [11 * 16]byte // the AES-128 round keys, in the order of the rounds
	// keys holds H^16 … H^1, each multiplied by x^-1 and stored as a
	// little-endian 128-bit integer whose bit 127 is the coefficient of
	// x^0: what one carry-less multiply and reduction by the assembly
	// need to yield X·H^i (see ghashBlocks).
	keys [16 * 16]byte
}

func newWide(block cipher.Block, key []byte) *wide {
	g := &wide{block: block}
	expandKey128(key, &g.rk)
	var h [16]byte
	block.Encrypt(h[:], h[:])
	hk := loadElem(h[:])
	p := hk
	for i := 15; i >= 0; i-- {
		k := p.timesInvX()
		binary.LittleEndian.PutUint64(g.keys[i*16:], k.lo)
		binary.LittleEndian.PutUint64(g.keys[i*16+8:], k.hi)
		p = p.mul(hk)
	}
	return g
}

func (g *wide) NonceSize() int { return nonceSize }
func (g *wide) Overhead() int  { return tagSize }

func (g *wide) Seal(dst, nonce, plaintext, additionalData []byte) []byte {
	if len(nonce) != nonceSize {
		panic("aesgcm: incorrect nonce length given to GCM")
	}
	if uint64(len(plaintext)) > maxPlain {
		panic("aesgcm: message too large for GCM")
	}
	ret, out := sliceForAppend(dst, len(plaintext)+tagSize)
	if inexactOverlap(out, plaintext) {
		panic("aesgcm: invalid buffer overlap")
	}
	var j0 [16]byte
	copy(j0[:], nonce)
	j0[15] = 1
	g.xorKeyStream(out[:len(plaintext)], plaintext, j0)
	tag := g.tag(j0, additionalData, out[:len(plaintext)])
	copy(out[len(plaintext):], tag[:])
	return ret
}

func (g *wide) Open(dst, nonce, ciphertext, additionalData []byte) ([]byte, error) {
	if len(nonce) != nonceSize {
		panic("aesgcm: incorrect nonce length given to GCM")
	}
	if len(ciphertext) < tagSize || uint64(len(ciphertext)) > maxPlain+tagSize {
		return nil, errOpen
	}
	n := len(ciphertext) - tagSize
	var j0 [16]byte
	copy(j0[:], nonce)
	j0[15] = 1
	want := g.tag(j0, additionalData, ciphertext[:n])
	ret, out := sliceForAppend(dst, n)
	if inexactOverlap(out, ciphertext) {
		panic("aesgcm: invalid buffer overlap")
	}
	// The tag is checked before a byte is decrypted, so a forged message
	// leaves dst as it was.
	if subtle.ConstantTimeCompare(want[:], ciphertext[n:]) != 1 {
		return nil, errOpen
	}
	g.xorKeyStream(out, ciphertext[:n], j0)
	return ret, nil
}

// xorKeyStream XORs src with the keystream of the counter blocks that
// follow j0 into dst.
func (g *wide) xorKeyStream(dst, src []byte, j0 [16]byte) {
	ctr := inc32(j0, 1)
	n := len(src) &^ 63
	if n > 0 {
		ctrXor(&g.rk, &ctr, &dst[0], &src[0], n)
		ctr = inc32(ctr, uint32(n/16))
	}
	if rest := len(src) - n; rest > 0 {
		var b [64]byte
		copy(b[:], src[n:])
		ctrXor(&g.rk, &ctr, &b[0], &b[0], 64)
		copy(dst[n:], b[:rest])
	}
}

// tag is GHASH(aad, c) XOR E(K, J0).
func (g *wide) tag(j0 [16]byte, aad, c []byte) [16]byte {
	var y [16]byte
	g.ghash(&y, aad)
	g.ghash(&y, c)
	var l [16]byte
	binary.BigEndian.PutUint64(l[:], uint64(len(aad))*8)
	binary.BigEndian.PutUint64(l[8:], uint64(len(c))*8)
	ghashBlocks(&g.keys, &y, &l[0], 16)
	var t, ek [16]byte
	for i := range t { // y is stored as a little-endian integer: reversed
		t[i] = y[15-i]
	}
	g.block.Encrypt(ek[:], j0[:])
	subtle.XORBytes(t[:], t[:], ek[:])
	return t
}

// ghash adds b, its last block padded with zeros, to the hash y.
func (g *wide) ghash(y *[16]byte, b []byte) {
	n := len(b) &^ 15
	if n > 0 {
		ghashBlocks(&g.keys, y, &b[0], n)
	}
	if n < len(b) {
		var p [16]byte
		copy(p[:], b[n:])
		ghashBlocks(&g.keys, y, &p[0], 16)
	}
}

// inc32 adds n to the last four bytes of a counter block, big-endian,
// modulo 2^32 (SP 800-38D's inc32).
func inc32(b [16]byte, n uint32) [16]byte {
	binary.BigEndian.PutUint32(b[12:], binary.BigEndian.Uint32(b[12:])+n)
	return b
}

// elem is an element of GCM's field as a 128-bit integer hi:lo whose bit
// 127 is the coefficient of x^0 and bit 0 that of x^127: a block read
// big-endian.
type elem struct{ hi, lo uint64 }

func loadElem(b []byte) elem {
	return elem{binary.BigEndian.Uint64(b), binary.BigEndian.Uint64(b[8:])}
}

// mul is the product in GF(2^128) mod x^128+x^7+x^2+x+1, bit by bit as
// SP 800-38D's algorithm 1 gives it; it runs only when a key is set up.
func (a elem) mul(b elem) elem {
	var z elem
	v := b
	for i := 0; i < 128; i++ {
		w := a.hi
		if i >= 64 {
			w = a.lo
		}
		if w>>(63-uint(i%64))&1 == 1 {
			z.hi ^= v.hi
			z.lo ^= v.lo
		}
		// v = v·x: toward bit 0, x^128 folded back as x^7+x^2+x+1.
		carry := v.lo & 1
		v.lo = v.lo>>1 | v.hi<<63
		v.hi >>= 1
		if carry == 1 {
			v.hi ^= 0xe1 << 56
		}
	}
	return z
}

// timesInvX is a·x^-1, the inverse of mul's step: toward bit 127, and
// when a has x^0, adding x^-1·P.
func (a elem) timesInvX() elem {
	top := a.hi >> 63
	r := elem{a.hi<<1 | a.lo>>63, a.lo << 1}
	if top == 1 {
		r.hi ^= 0xc2 << 56
		r.lo ^= 1
	}
	return r
}

// expandKey128 is FIPS 197's key expansion for a 16-byte key.
func expandKey128(key []byte, rk *[11 * 16]byte) {
	var w [44]uint32
	for i := 0; i < 4; i++ {
		w[i] = binary.BigEndian.Uint32(key[4*i:])
	}
	rcon := uint32(1)
	for i := 4; i < 44; i++ {
		t := w[i-1]
		if i%4 == 0 {
			t = subWord(bits.RotateLeft32(t, 8)) ^ rcon<<24
			rcon = uint32(xtime(byte(rcon)))
		}
		w[i] = w[i-4] ^ t
	}
	for i, v := range w {
		binary.BigEndian.PutUint32(rk[4*i:], v)
	}
}

func subWord(w uint32) uint32 {
	return uint32(sbox[w>>24])<<24 | uint32(sbox[w>>16&0xff])<<16 | uint32(sbox[w>>8&0xff])<<8 | uint32(sbox[w&0xff])
}

func xtime(b byte) byte {
	if b&0x80 != 0 {
		return b<<1 ^ 0x1b
	}
	return b << 1
}

// sbox is AES's S-box, computed (the inverse in GF(2^8), then the affine
// map) rather than typed in.
var sbox = func() (s [256]byte) {
	// p runs through GF(2^8)* by powers of 3, q through the inverses.
	p, q := byte(1), byte(1)
	for {
		p ^= xtime(p) // p·3
		q ^= q << 1   // q/3
		q ^= q << 2
		q ^= q << 4
		if q&0x80 != 0 {
			q ^= 0x09
		}
		x := q ^ bits.RotateLeft8(q, 1) ^ bits.RotateLeft8(q, 2) ^ bits.RotateLeft8(q, 3) ^ bits.RotateLeft8(q, 4)
		s[p] = x ^ 0x63
		if p == 1 {
			break
		}
	}
	s[0] = 0x63
	return s
}()

func sliceForAppend(in []byte, n int) (head, tail []byte) {
	if total := len(in) + n; cap(in) >= total {
		head = in[:total]
	} else {
		head = make([]byte, total)
		copy(head, in)
	}
	tail = head[len(in):]
	return
}

// inexactOverlap says whether x and y share memory other than at the
// same start (crypto/cipher's rule: in place, or not at all).
func inexactOverlap(x, y []byte) bool {
	if len(x) == 0 || len(y) == 0 || &x[0] == &y[0] {
		return false
	}
	xs, ys := uintptr(unsafe.Pointer(&x[0])), uintptr(unsafe.Pointer(&y[0]))
	return xs < ys+uintptr(len(y)) && ys < xs+uintptr(len(x))
}
