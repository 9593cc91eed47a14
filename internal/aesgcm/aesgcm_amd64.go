//go:build amd64 && !purego

package aesgcm

import "golang.org/x/sys/cpu"

// haveAsm: 512-bit registers the OS saves, AES and carry-less multiply on
// them, and the byte shuffles and three-way XORs of AVX-512BW/F.
var haveAsm = cpu.X86.HasAVX512F && cpu.X86.HasAVX512BW && cpu.X86.HasAVX512VL &&
	cpu.X86.HasAVX512VAES && cpu.X86.HasAVX512VPCLMULQDQ

// ctrXor XORs n bytes (a multiple of 64) of src with the AES-128
// keystream of the counter blocks from ctr on (inc32 between blocks) into
// dst, which may be src.
//
//go:noescape
func ctrXor(rk *[11 * 16]byte, ctr *[16]byte, dst, src *byte, n int)

// ghashBlocks adds n bytes (a multiple of 16) of src to the GHASH state y,
// a little-endian 128-bit integer with x^0 at bit 127.
//
//go:noescape
func ghashBlocks(keys *[16 * 16]byte, y *[16]byte, src *byte, n int)
