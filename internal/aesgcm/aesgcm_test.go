package aesgcm

import (
	"bytes"
	"crypto/aes"
	"crypto/cipher"
	"encoding/hex"
	"fmt"
	"math/rand/v2"
	"testing"
)

// stdlib is crypto/cipher's GCM with key: the reference for every test.
func stdlib(t testing.TB, key []byte) cipher.AEAD {
	b, err := aes.NewCipher(key)
	if err != nil {
		t.Fatal(err)
	}
	g, err := cipher.NewGCM(b)
	if err != nil {
		t.Fatal(err)
	}
	return g
}

// wideOrSkip is this package's implementation; a machine without the
// instructions has nothing of it to test, and New gives it the standard
// library's (TestNewFallsBack).
func wideOrSkip(t testing.TB, key []byte) cipher.AEAD {
	if !haveAsm {
		t.Skip("no VAES/VPCLMULQDQ/AVX-512 on this CPU: New uses crypto/cipher")
	}
	b, err := aes.NewCipher(key)
	if err != nil {
		t.Fatal(err)
	}
	return newWide(b, key)
}

func TestSbox(t *testing.T) {
	// FIPS 197 figure 7's corners and a few cells.
	for in, want := range map[byte]byte{0x00: 0x63, 0x01: 0x7c, 0x53: 0xed, 0xff: 0x16, 0x10: 0xca, 0x9a: 0xb8} {
		if sbox[in] != want {
			t.Errorf("sbox[%#x] = %#x, want %#x", in, sbox[in], want)
		}
	}
}

func TestKeyExpansion(t *testing.T) {
	// FIPS 197 appendix A.1.
	key, _ := hex.DecodeString("2b7e151628aed2a6abf7158809cf4f3c")
	var rk [176]byte
	expandKey128(key, &rk)
	if got := hex.EncodeToString(rk[160:]); got != "d014f9a8c9ee2589e13f0cc8b6630ca6" {
		t.Fatalf("last round key %s", got)
	}
}

// TestAgainstStdlib seals and opens with both implementations, keys,
// nonces, additional data and lengths around every boundary the
// assembly has (16-byte blocks, 64-byte registers, 256-byte loops) and
// the channel's frames.
func TestAgainstStdlib(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	lengths := []int{0, 1, 15, 16, 17, 63, 64, 65, 255, 256, 257, 511, 1000, 4096, 4111, 65536 + 48, 256<<10 - 1, 256 << 10}
	for i := 0; i < 40; i++ {
		lengths = append(lengths, r.IntN(3000))
	}
	for _, n := range lengths {
		for _, na := range []int{0, 4, 13, 16, 300} {
			key, nonce := make([]byte, 16), make([]byte, 12)
			fill(r, key)
			fill(r, nonce)
			aad, pt := make([]byte, na), make([]byte, n)
			fill(r, aad)
			fill(r, pt)
			ref, got := stdlib(t, key), wideOrSkip(t, key)
			want := ref.Seal(nil, nonce, pt, aad)
			sealed := got.Seal(nil, nonce, pt, aad)
			if !bytes.Equal(sealed, want) {
				t.Fatalf("len %d aad %d: sealed differs from crypto/cipher's", n, na)
			}
			// In place, as the channel opens: into the ciphertext's own buffer.
			opened, err := got.Open(sealed[:0], nonce, sealed, aad)
			if err != nil || !bytes.Equal(opened, pt) {
				t.Fatalf("len %d aad %d: open: %v", n, na, err)
			}
			// In place sealing, with a prefix in dst, as the channel seals.
			buf := append([]byte("hdr"), pt...)
			buf = append(buf, make([]byte, 16)...)
			s2 := got.Seal(buf[:3], nonce, buf[3:3+n], aad)
			if !bytes.Equal(s2[3:], want) || string(s2[:3]) != "hdr" {
				t.Fatalf("len %d: in-place seal differs", n)
			}
		}
	}
}

// TestCounterWraps: GCM's counter is the last 32 bits only; a nonce whose
// derived counter wraps inside a message must carry no further.
func TestCounterWraps(t *testing.T) {
	key := make([]byte, 16)
	ref, got := stdlib(t, key), wideOrSkip(t, key)
	// crypto/cipher takes 12-byte nonces as J0 = nonce || 1, so inc32
	// wraps only after 2^32 blocks: check inc32 itself, and the keystream
	// across a wrap against the block cipher.
	var b [16]byte
	b[12], b[13], b[14], b[15] = 0xff, 0xff, 0xff, 0xfe
	c := inc32(b, 3)
	if c[11] != 0 || c[15] != 1 {
		t.Fatalf("inc32 carried: %x", c)
	}
	w := got.(*wide)
	src := make([]byte, 320)
	dst := make([]byte, 320)
	ctrXor(&w.rk, &b, &dst[0], &src[0], len(src))
	blk, _ := aes.NewCipher(key)
	for i := 0; i < 20; i++ {
		var want [16]byte
		ctr := inc32(b, uint32(i))
		blk.Encrypt(want[:], ctr[:])
		if !bytes.Equal(dst[16*i:16*i+16], want[:]) {
			t.Fatalf("block %d of the keystream across the wrap differs", i)
		}
	}
	_ = ref
}

func TestOpenRefusesForgeries(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	key, nonce := make([]byte, 16), make([]byte, 12)
	fill(r, key)
	g := wideOrSkip(t, key)
	pt := make([]byte, 1000)
	fill(r, pt)
	sealed := g.Seal(nil, nonce, pt, []byte("ad"))
	for _, bit := range []int{0, 7, 8 * 500, 8*1000 + 3, 8*len(sealed) - 1} {
		bad := bytes.Clone(sealed)
		bad[bit/8] ^= 1 << (bit % 8)
		dst := make([]byte, 0, len(pt))
		if _, err := g.Open(dst, nonce, bad, []byte("ad")); err == nil {
			t.Fatalf("bit %d flipped: opened", bit)
		}
		if !bytes.Equal(dst[:cap(dst)], make([]byte, cap(dst))) {
			t.Fatalf("bit %d flipped: plaintext released into dst", bit)
		}
	}
	if _, err := g.Open(nil, nonce, sealed, []byte("ae")); err == nil {
		t.Fatal("other additional data: opened")
	}
	if _, err := g.Open(nil, nonce, sealed[:15], nil); err == nil {
		t.Fatal("shorter than a tag: opened")
	}
}

func TestNewFallsBack(t *testing.T) {
	for _, n := range []int{16, 24, 32} {
		g, err := New(make([]byte, n))
		if err != nil {
			t.Fatal(err)
		}
		_, isWide := g.(*wide)
		if want := n == 16 && haveAsm; isWide != want {
			t.Errorf("key of %d bytes: wide %v, want %v", n, isWide, want)
		}
		ref := stdlib(t, make([]byte, n))
		nonce := make([]byte, 12)
		if !bytes.Equal(g.Seal(nil, nonce, []byte("x"), nil), ref.Seal(nil, nonce, []byte("x"), nil)) {
			t.Errorf("key of %d bytes: differs from crypto/cipher", n)
		}
	}
	if _, err := New(make([]byte, 15)); err == nil {
		t.Error("a 15-byte key was taken")
	}
}

func FuzzAgainstStdlib(f *testing.F) {
	f.Add([]byte("k"), []byte("n"), []byte{}, []byte("plain"))
	f.Add(make([]byte, 16), make([]byte, 12), make([]byte, 4), make([]byte, 300))
	f.Fuzz(func(t *testing.T, key, nonce, aad, pt []byte) {
		key = pad(key, 16)
		nonce = pad(nonce, 12)
		ref, got := stdlib(t, key), wideOrSkip(t, key)
		want := ref.Seal(nil, nonce, pt, aad)
		sealed := got.Seal(nil, nonce, pt, aad)
		if !bytes.Equal(sealed, want) {
			t.Fatalf("sealed differs from crypto/cipher's")
		}
		if o, err := got.Open(nil, nonce, want, aad); err != nil || !bytes.Equal(o, pt) {
			t.Fatalf("open: %v", err)
		}
		// Any ciphertext crypto/cipher refuses, this refuses too.
		_, e1 := ref.Open(nil, nonce, pt, aad)
		_, e2 := got.Open(nil, nonce, pt, aad)
		if (e1 == nil) != (e2 == nil) {
			t.Fatalf("open of arbitrary bytes: crypto/cipher %v, here %v", e1, e2)
		}
	})
}

// BenchmarkSealOpen seals and opens a frame of the data channel's size
// with crypto/cipher and with this package, for comparison in one run.
func BenchmarkSealOpen(b *testing.B) {
	key, nonce := make([]byte, 16), make([]byte, 12)
	buf := make([]byte, 256<<10, 256<<10+16)
	for _, impl := range []string{"stdlib", "wide"} {
		var g cipher.AEAD
		if impl == "stdlib" {
			g = stdlib(b, key)
		} else {
			g = wideOrSkip(b, key)
		}
		for _, op := range []string{"seal", "open"} {
			b.Run(fmt.Sprintf("%s/%s", impl, op), func(b *testing.B) {
				sealed := g.Seal(nil, nonce, buf, nil)
				b.SetBytes(int64(len(buf)))
				for b.Loop() {
					if op == "seal" {
						g.Seal(buf[:0], nonce, buf, nil)
					} else if _, err := g.Open(buf[:0], nonce, sealed, nil); err != nil {
						b.Fatal(err)
					}
				}
			})
		}
	}
}

func fill(r *rand.Rand, b []byte) {
	for i := range b {
		b[i] = byte(r.Uint32())
	}
}

func pad(b []byte, n int) []byte {
	out := make([]byte, n)
	copy(out, b)
	return out
}
