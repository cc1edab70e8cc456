#include "textflag.h"

// Byte-reversal mask of one 128-bit lane (VPSHUFB), and the reduction
// constant of the reflected GCM field (low half 1, high half 0xc2 << 56).
DATA ghashBswap<>+0(SB)/8, $0x08090a0b0c0d0e0f
DATA ghashBswap<>+8(SB)/8, $0x0001020304050607
GLOBL ghashBswap<>(SB), RODATA|NOPTR, $16
DATA ghashPoly<>+0(SB)/8, $0x0000000000000001
DATA ghashPoly<>+8(SB)/8, $0xc200000000000000
GLOBL ghashPoly<>(SB), RODATA|NOPTR, $16

// REDUCE folds the 256-bit product HI:LO (LO holding the middle term
// already) into LO, using POLY and scratch T: two rounds of
// LO = swap(LO) ⊕ LO.lo·POLY.hi, then LO ⊕= HI.
#define REDUCE(LO, HI, POLY, T) \
	VPCLMULQDQ $0x10, POLY, LO, T \
	VPSHUFD    $0x4e, LO, LO      \
	VPXOR      T, LO, LO          \
	VPCLMULQDQ $0x10, POLY, LO, T \
	VPSHUFD    $0x4e, LO, LO      \
	VPXOR      T, LO, LO          \
	VPXOR      HI, LO, LO

// MUL4(T, X) multiplies the four blocks of X by the four key powers of T
// and adds the products into Z12 (low), Z13 (high) and Z14 (middle).
#define MUL4(T, X) \
	VPCLMULQDQ $0x00, T, X, Z15       \
	VPCLMULQDQ $0x11, T, X, Z16       \
	VPXORQ     Z15, Z12, Z12          \
	VPXORQ     Z16, Z13, Z13          \
	VPCLMULQDQ $0x01, T, X, Z15       \
	VPCLMULQDQ $0x10, T, X, Z16       \
	VPTERNLOGQ $0x96, Z16, Z15, Z14

// LOAD4(off, X) reads four blocks at SI+off into X, byte-reversed.
#define LOAD4(off, X) \
	VMOVDQU64 off(SI), X \
	VPSHUFB   Z31, X, X

// FOLD sums the lanes of Z12, Z13 and Z14, reduces the product into X4
// (leaving its upper lanes zero) and clears the partial products.
#define FOLD \
	VEXTRACTI64X4 $1, Z12, Y15 \
	VPXOR         Y15, Y12, Y12 \
	VEXTRACTI128  $1, Y12, X15  \
	VPXOR         X15, X12, X12 \
	VEXTRACTI64X4 $1, Z13, Y15 \
	VPXOR         Y15, Y13, Y13 \
	VEXTRACTI128  $1, Y13, X15  \
	VPXOR         X15, X13, X13 \
	VEXTRACTI64X4 $1, Z14, Y15 \
	VPXOR         Y15, Y14, Y14 \
	VEXTRACTI128  $1, Y14, X15  \
	VPXOR         X15, X14, X14 \
	VPSLLDQ       $8, X14, X15  \
	VPSRLDQ       $8, X14, X14  \
	VPXOR         X15, X12, X12 \
	VPXOR         X14, X13, X13 \
	REDUCE(X12, X13, X7, X15)   \
	VMOVDQA       X12, X4       \
	VPXORQ        Z12, Z12, Z12 \
	VPXORQ        Z13, Z13, Z13 \
	VPXORQ        Z14, Z14, Z14

// func ghashAVX512(acc *[2]uint64, pow *[32][2]uint64, p *byte, n int)
//
// Registers: X4 the accumulator; Z0..Z7 key^32..key^1, four per register;
// Z31 the byte-reversal mask in every lane; X7 the reduction constant;
// Z8..Z11 and Z17..Z20 input blocks; Z12/Z13/Z14 low, high and middle
// partial products; Z15, Z16 scratch. The accumulator's chain (one
// multiply and one reduction) is paid once per 32 blocks; the other
// products of an iteration are independent of it.
TEXT ·ghashAVX512(SB), NOSPLIT, $0-32
	MOVQ acc+0(FP), AX
	MOVQ pow+8(FP), BX
	MOVQ p+16(FP), SI
	MOVQ n+24(FP), CX

	VBROADCASTI32X4 ghashBswap<>(SB), Z31
	VMOVDQU         ghashPoly<>(SB), X7
	VMOVDQU         (AX), X4
	VPXORQ          Z12, Z12, Z12
	VPXORQ          Z13, Z13, Z13
	VPXORQ          Z14, Z14, Z14

	CMPQ CX, $16
	JB   single

	VMOVDQU64 256(BX), Z0
	VMOVDQU64 320(BX), Z1
	VMOVDQU64 384(BX), Z2
	VMOVDQU64 448(BX), Z3
	CMPQ      CX, $32
	JB        loop16
	VMOVDQU64 0(BX), Z5
	VMOVDQU64 64(BX), Z6
	VMOVDQU64 128(BX), Z21
	VMOVDQU64 192(BX), Z22

loop32:
	LOAD4(0, Z8)
	LOAD4(64, Z9)
	LOAD4(128, Z10)
	LOAD4(192, Z11)
	LOAD4(256, Z17)
	LOAD4(320, Z18)
	LOAD4(384, Z19)
	LOAD4(448, Z20)
	VPXORQ Z4, Z8, Z8
	MUL4(Z5, Z8)
	MUL4(Z6, Z9)
	MUL4(Z21, Z10)
	MUL4(Z22, Z11)
	MUL4(Z0, Z17)
	MUL4(Z1, Z18)
	MUL4(Z2, Z19)
	MUL4(Z3, Z20)
	FOLD
	ADDQ $512, SI
	SUBQ $32, CX
	CMPQ CX, $32
	JAE  loop32
	CMPQ CX, $16
	JB   single

loop16:
	LOAD4(0, Z8)
	LOAD4(64, Z9)
	LOAD4(128, Z10)
	LOAD4(192, Z11)
	VPXORQ Z4, Z8, Z8
	MUL4(Z0, Z8)
	MUL4(Z1, Z9)
	MUL4(Z2, Z10)
	MUL4(Z3, Z11)
	FOLD
	ADDQ $256, SI
	SUBQ $16, CX

single:
	TESTQ   CX, CX
	JZ      done
	VMOVDQU 496(BX), X5

loop1:
	VMOVDQU    (SI), X8
	VPSHUFB    X31, X8, X8
	VPXOR      X8, X4, X4
	VPCLMULQDQ $0x00, X5, X4, X12
	VPCLMULQDQ $0x11, X5, X4, X13
	VPCLMULQDQ $0x01, X5, X4, X14
	VPCLMULQDQ $0x10, X5, X4, X15
	VPXOR      X15, X14, X14
	VPSLLDQ    $8, X14, X15
	VPSRLDQ    $8, X14, X14
	VPXOR      X15, X12, X12
	VPXOR      X14, X13, X13
	REDUCE(X12, X13, X7, X15)
	VMOVDQA    X12, X4
	ADDQ       $16, SI
	DECQ       CX
	JNZ        loop1

done:
	VMOVDQU X4, (AX)
	VZEROUPPER
	RET
