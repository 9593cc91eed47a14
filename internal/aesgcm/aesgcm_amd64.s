//go:build amd64 && !purego

#include "textflag.h"

// Byte reversal within each 128-bit lane (VPSHUFB): a block becomes the
// little-endian integer whose bit 127 is its first bit.
DATA bswap<>+0x00(SB)/8, $0x08090a0b0c0d0e0f
DATA bswap<>+0x08(SB)/8, $0x0001020304050607
GLOBL bswap<>(SB), RODATA|NOPTR, $16

// Counter offsets of the four lanes of a register, added to a reversed
// counter block's low dword (its inc32 counter).
DATA lanes<>+0x00(SB)/8, $0
DATA lanes<>+0x08(SB)/8, $0
DATA lanes<>+0x10(SB)/8, $1
DATA lanes<>+0x18(SB)/8, $0
DATA lanes<>+0x20(SB)/8, $2
DATA lanes<>+0x28(SB)/8, $0
DATA lanes<>+0x30(SB)/8, $3
DATA lanes<>+0x38(SB)/8, $0
GLOBL lanes<>(SB), RODATA|NOPTR, $64

DATA four<>+0x00(SB)/8, $4
DATA four<>+0x08(SB)/8, $0
GLOBL four<>(SB), RODATA|NOPTR, $16

DATA sixteen<>+0x00(SB)/8, $16
DATA sixteen<>+0x08(SB)/8, $0
GLOBL sixteen<>(SB), RODATA|NOPTR, $16

// GHASH's reduction constant: its high qword, x^63+x^62+x^57, is x^-64
// times the field polynomial's low terms in the reflected order.
DATA gfpoly<>+0x00(SB)/8, $0x0000000000000001
DATA gfpoly<>+0x08(SB)/8, $0xc200000000000000
GLOBL gfpoly<>(SB), RODATA|NOPTR, $16

// One AES round with round key K on four registers.
#define ROUND4(K) \
	VAESENC K, Z0, Z0; \
	VAESENC K, Z1, Z1; \
	VAESENC K, Z2, Z2; \
	VAESENC K, Z3, Z3

// func ctrXor(rk *[176]byte, ctr *[16]byte, dst, src *byte, n int)
TEXT ·ctrXor(SB), NOSPLIT, $0-40
	MOVQ rk+0(FP), AX
	MOVQ ctr+8(FP), BX
	MOVQ dst+16(FP), DI
	MOVQ src+24(FP), SI
	MOVQ n+32(FP), CX

	VBROADCASTI32X4 0(AX), Z16
	VBROADCASTI32X4 16(AX), Z17
	VBROADCASTI32X4 32(AX), Z18
	VBROADCASTI32X4 48(AX), Z19
	VBROADCASTI32X4 64(AX), Z20
	VBROADCASTI32X4 80(AX), Z21
	VBROADCASTI32X4 96(AX), Z22
	VBROADCASTI32X4 112(AX), Z23
	VBROADCASTI32X4 128(AX), Z24
	VBROADCASTI32X4 144(AX), Z25
	VBROADCASTI32X4 160(AX), Z26
	VBROADCASTI32X4 bswap<>(SB), Z27
	// Z28: the next four counter blocks, reversed (counters in dword 0).
	VBROADCASTI32X4 0(BX), Z28
	VPSHUFB Z27, Z28, Z28
	VPADDD lanes<>(SB), Z28, Z28
	VBROADCASTI32X4 four<>(SB), Z29
	VBROADCASTI32X4 sixteen<>(SB), Z30

ctr256:
	CMPQ CX, $256
	JB   ctr64
	VPADDD  Z29, Z28, Z1
	VPADDD  Z29, Z1, Z2
	VPADDD  Z29, Z2, Z3
	VPSHUFB Z27, Z28, Z0
	VPSHUFB Z27, Z1, Z1
	VPSHUFB Z27, Z2, Z2
	VPSHUFB Z27, Z3, Z3
	VPADDD  Z30, Z28, Z28
	VPXORD  Z16, Z0, Z0
	VPXORD  Z16, Z1, Z1
	VPXORD  Z16, Z2, Z2
	VPXORD  Z16, Z3, Z3
	ROUND4(Z17)
	ROUND4(Z18)
	ROUND4(Z19)
	ROUND4(Z20)
	ROUND4(Z21)
	ROUND4(Z22)
	ROUND4(Z23)
	ROUND4(Z24)
	ROUND4(Z25)
	VAESENCLAST Z26, Z0, Z0
	VAESENCLAST Z26, Z1, Z1
	VAESENCLAST Z26, Z2, Z2
	VAESENCLAST Z26, Z3, Z3
	VPXORD    0(SI), Z0, Z0
	VPXORD    64(SI), Z1, Z1
	VPXORD    128(SI), Z2, Z2
	VPXORD    192(SI), Z3, Z3
	VMOVDQU64 Z0, 0(DI)
	VMOVDQU64 Z1, 64(DI)
	VMOVDQU64 Z2, 128(DI)
	VMOVDQU64 Z3, 192(DI)
	ADDQ $256, SI
	ADDQ $256, DI
	SUBQ $256, CX
	JMP  ctr256

ctr64:
	CMPQ CX, $64
	JB   ctrdone
	VPSHUFB Z27, Z28, Z0
	VPADDD  Z29, Z28, Z28
	VPXORD  Z16, Z0, Z0
	VAESENC Z17, Z0, Z0
	VAESENC Z18, Z0, Z0
	VAESENC Z19, Z0, Z0
	VAESENC Z20, Z0, Z0
	VAESENC Z21, Z0, Z0
	VAESENC Z22, Z0, Z0
	VAESENC Z23, Z0, Z0
	VAESENC Z24, Z0, Z0
	VAESENC Z25, Z0, Z0
	VAESENCLAST Z26, Z0, Z0
	VPXORD    0(SI), Z0, Z0
	VMOVDQU64 Z0, 0(DI)
	ADDQ $64, SI
	ADDQ $64, DI
	SUBQ $64, CX
	JMP  ctr64

ctrdone:
	VZEROUPPER
	RET

// MUL(X, K, LO, MI, HI, T): the unreduced products of the blocks X by
// the key powers K, lane by lane, into LO, MI and HI (see MUL4).
#define MUL(X, K, LO, MI, HI, T) \
	VPCLMULQDQ $0x00, K, X, LO; \
	VPCLMULQDQ $0x01, K, X, MI; \
	VPCLMULQDQ $0x10, K, X, T; \
	VPCLMULQDQ $0x11, K, X, HI; \
	VPXORD     T, MI, MI

// MUL4(X, K): the unreduced products of four blocks X by four key powers
// K, added into LO (Z4), MI (Z5) and HI (Z7): LO = x_L·k_L, MI = x_L·k_H
// + x_H·k_L, HI = x_H·k_H, lane by lane.
#define MUL4(X, K) \
	VPCLMULQDQ $0x00, K, X, Z8; \
	VPCLMULQDQ $0x01, K, X, Z9; \
	VPCLMULQDQ $0x10, K, X, Z10; \
	VPCLMULQDQ $0x11, K, X, Z11; \
	VPXORD     Z8, Z4, Z4; \
	VPTERNLOGD $0x96, Z9, Z10, Z5; \
	VPXORD     Z11, Z7, Z7

// REDUCE(LO, MI, HI, T, P): HI = the 256-bit LO + MI·2^64 + HI·2^128
// reduced mod GHASH's polynomial, with P holding gfpoly (the method of
// Linux's aes-gcm-avx10 _ghash_reduce: two folds by x^63+x^62+x^57).
#define REDUCE(LO, MI, HI, T, P) \
	VPCLMULQDQ $0x01, LO, P, T; \
	VPSHUFD    $0x4e, LO, LO; \
	VPTERNLOGD $0x96, T, LO, MI; \
	VPCLMULQDQ $0x01, MI, P, T; \
	VPSHUFD    $0x4e, MI, MI; \
	VPTERNLOGD $0x96, T, MI, HI

// func ghashBlocks(keys *[256]byte, y *[16]byte, src *byte, n int)
//
// keys holds H^16 … H^1 times x^-1: a carry-less product of two elements
// in this bit order is the field product times x, so X·(H^i·x^-1) reduces
// to X·H^i. Sixteen blocks at a time: y = (y+X1)·H^16 + X2·H^15 + … +
// X16·H, with one reduction; then block by block.
TEXT ·ghashBlocks(SB), NOSPLIT, $0-32
	MOVQ keys+0(FP), AX
	MOVQ y+8(FP), BX
	MOVQ src+16(FP), SI
	MOVQ n+24(FP), CX

	VBROADCASTI32X4 bswap<>(SB), Z27
	VBROADCASTI32X4 gfpoly<>(SB), Z26
	VMOVDQU64 0(BX), X20

	CMPQ CX, $256
	JB   gtail
	VMOVDQU64 0(AX), Z16
	VMOVDQU64 64(AX), Z17
	VMOVDQU64 128(AX), Z18
	VMOVDQU64 192(AX), Z19

g256:
	CMPQ CX, $256
	JB   gtail
	VMOVDQU64 0(SI), Z0
	VMOVDQU64 64(SI), Z1
	VMOVDQU64 128(SI), Z2
	VMOVDQU64 192(SI), Z3
	VPSHUFB Z27, Z0, Z0
	VPSHUFB Z27, Z1, Z1
	VPSHUFB Z27, Z2, Z2
	VPSHUFB Z27, Z3, Z3
	VPXORD  Z20, Z0, Z0
	MUL(Z0, Z16, Z4, Z5, Z7, Z6)
	MUL4(Z1, Z17)
	MUL4(Z2, Z18)
	MUL4(Z3, Z19)
	REDUCE(Z4, Z5, Z7, Z8, Z26)
	// Add the four lanes.
	VEXTRACTI64X4 $1, Z7, Y8
	VPXORQ        Y8, Y7, Y7
	VEXTRACTI32X4 $1, Y7, X8
	VPXORQ        X8, X7, X20
	ADDQ $256, SI
	SUBQ $256, CX
	JMP  g256

gtail:
	TESTQ CX, CX
	JZ    gdone
	VMOVDQU64 240(AX), X21

g16:
	VMOVDQU64  0(SI), X0
	VPSHUFB    X27, X0, X0
	VPXORQ     X20, X0, X0
	MUL(X0, X21, X4, X5, X7, X6)
	REDUCE(X4, X5, X7, X8, X26)
	VMOVDQA64  X7, X20
	ADDQ $16, SI
	SUBQ $16, CX
	JNZ  g16

gdone:
	VMOVDQU64 X20, 0(BX)
	VZEROUPPER
	RET
