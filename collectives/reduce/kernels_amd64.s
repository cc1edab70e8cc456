//go:build !purego

#include "textflag.h"

// BINOP128 applies the AVX2 instruction INSTR to 128-byte blocks:
// dst[i] = src[i] INSTR dst[i] for n bytes, where n is a multiple of 128.
// Loads and stores are unaligned (VMOVDQU), so any buffer offset works.
#define BINOP128(INSTR) \
	MOVQ dst+0(FP), DI \
	MOVQ src+8(FP), SI \
	MOVQ n+16(FP), CX \
	SHRQ $7, CX \
	JZ   done \
loop: \
	VMOVDQU 0(SI), Y0 \
	VMOVDQU 32(SI), Y1 \
	VMOVDQU 64(SI), Y2 \
	VMOVDQU 96(SI), Y3 \
	INSTR 0(DI), Y0, Y0 \
	INSTR 32(DI), Y1, Y1 \
	INSTR 64(DI), Y2, Y2 \
	INSTR 96(DI), Y3, Y3 \
	VMOVDQU Y0, 0(DI) \
	VMOVDQU Y1, 32(DI) \
	VMOVDQU Y2, 64(DI) \
	VMOVDQU Y3, 96(DI) \
	ADDQ $128, SI \
	ADDQ $128, DI \
	DECQ CX \
	JNZ  loop \
	VZEROUPPER \
done: \
	RET

// func addF32AVX2(dst, src unsafe.Pointer, n int)
TEXT ·addF32AVX2(SB), NOSPLIT, $0-24
	BINOP128(VADDPS)

// func addF64AVX2(dst, src unsafe.Pointer, n int)
TEXT ·addF64AVX2(SB), NOSPLIT, $0-24
	BINOP128(VADDPD)

// func mulF32AVX2(dst, src unsafe.Pointer, n int)
TEXT ·mulF32AVX2(SB), NOSPLIT, $0-24
	BINOP128(VMULPS)

// func mulF64AVX2(dst, src unsafe.Pointer, n int)
TEXT ·mulF64AVX2(SB), NOSPLIT, $0-24
	BINOP128(VMULPD)

// func addI8AVX2(dst, src unsafe.Pointer, n int)
TEXT ·addI8AVX2(SB), NOSPLIT, $0-24
	BINOP128(VPADDB)

// func addI32AVX2(dst, src unsafe.Pointer, n int)
TEXT ·addI32AVX2(SB), NOSPLIT, $0-24
	BINOP128(VPADDD)

// func addI64AVX2(dst, src unsafe.Pointer, n int)
TEXT ·addI64AVX2(SB), NOSPLIT, $0-24
	BINOP128(VPADDQ)

// func maxS8AVX2(dst, src unsafe.Pointer, n int)
TEXT ·maxS8AVX2(SB), NOSPLIT, $0-24
	BINOP128(VPMAXSB)

// func minS8AVX2(dst, src unsafe.Pointer, n int)
TEXT ·minS8AVX2(SB), NOSPLIT, $0-24
	BINOP128(VPMINSB)

// func maxU8AVX2(dst, src unsafe.Pointer, n int)
TEXT ·maxU8AVX2(SB), NOSPLIT, $0-24
	BINOP128(VPMAXUB)

// func minU8AVX2(dst, src unsafe.Pointer, n int)
TEXT ·minU8AVX2(SB), NOSPLIT, $0-24
	BINOP128(VPMINUB)

// func maxS32AVX2(dst, src unsafe.Pointer, n int)
TEXT ·maxS32AVX2(SB), NOSPLIT, $0-24
	BINOP128(VPMAXSD)

// func minS32AVX2(dst, src unsafe.Pointer, n int)
TEXT ·minS32AVX2(SB), NOSPLIT, $0-24
	BINOP128(VPMINSD)

// func maxU32AVX2(dst, src unsafe.Pointer, n int)
TEXT ·maxU32AVX2(SB), NOSPLIT, $0-24
	BINOP128(VPMAXUD)

// func minU32AVX2(dst, src unsafe.Pointer, n int)
TEXT ·minU32AVX2(SB), NOSPLIT, $0-24
	BINOP128(VPMINUD)

// HALFOP64 applies the float32 instruction INSTR to 64-byte blocks of
// binary16 elements (32 per block) with F16C: each operand is widened to
// float32 exactly (VCVTPH2PS), combined as dst = dst INSTR src, rounded once
// to float32, and narrowed to nearest even (VCVTPS2PH, immediate 0), which is
// what the scalar f16Op computes. n is a multiple of 64.
#define HALFOP64(INSTR) \
	MOVQ dst+0(FP), DI \
	MOVQ src+8(FP), SI \
	MOVQ n+16(FP), CX \
	SHRQ $6, CX \
	JZ   done \
loop: \
	VCVTPH2PS 0(DI), Y0 \
	VCVTPH2PS 16(DI), Y1 \
	VCVTPH2PS 32(DI), Y2 \
	VCVTPH2PS 48(DI), Y3 \
	VCVTPH2PS 0(SI), Y4 \
	VCVTPH2PS 16(SI), Y5 \
	VCVTPH2PS 32(SI), Y6 \
	VCVTPH2PS 48(SI), Y7 \
	INSTR Y4, Y0, Y0 \
	INSTR Y5, Y1, Y1 \
	INSTR Y6, Y2, Y2 \
	INSTR Y7, Y3, Y3 \
	VCVTPS2PH $0, Y0, 0(DI) \
	VCVTPS2PH $0, Y1, 16(DI) \
	VCVTPS2PH $0, Y2, 32(DI) \
	VCVTPS2PH $0, Y3, 48(DI) \
	ADDQ $64, SI \
	ADDQ $64, DI \
	DECQ CX \
	JNZ  loop \
	VZEROUPPER \
done: \
	RET

// func addF16F16C(dst, src unsafe.Pointer, n int)
TEXT ·addF16F16C(SB), NOSPLIT, $0-24
	HALFOP64(VADDPS)

// func mulF16F16C(dst, src unsafe.Pointer, n int)
TEXT ·mulF16F16C(SB), NOSPLIT, $0-24
	HALFOP64(VMULPS)

// func scaleF16F16C(dst, src unsafe.Pointer, n int, s float32)
// dst = src × s for n bytes (a multiple of 64) of binary16, each product
// rounded once (exact in float32, then to nearest even).
TEXT ·scaleF16F16C(SB), NOSPLIT, $0-28
	MOVQ dst+0(FP), DI
	MOVQ src+8(FP), SI
	MOVQ n+16(FP), CX
	VBROADCASTSS s+24(FP), Y8
	SHRQ $6, CX
	JZ   done
loop:
	VCVTPH2PS 0(SI), Y0
	VCVTPH2PS 16(SI), Y1
	VCVTPH2PS 32(SI), Y2
	VCVTPH2PS 48(SI), Y3
	VMULPS Y8, Y0, Y0
	VMULPS Y8, Y1, Y1
	VMULPS Y8, Y2, Y2
	VMULPS Y8, Y3, Y3
	VCVTPS2PH $0, Y0, 0(DI)
	VCVTPS2PH $0, Y1, 16(DI)
	VCVTPS2PH $0, Y2, 32(DI)
	VCVTPS2PH $0, Y3, 48(DI)
	ADDQ $64, SI
	ADDQ $64, DI
	DECQ CX
	JNZ  loop
	VZEROUPPER
done:
	RET

// BF16CONST loads the constants BF16ROUND uses: Y10 = 1, Y11 = 0x7fff,
// Y12 = 0x7fffffff (the magnitude mask), Y13 = 0x7f800000 (+Inf), Y14 =
// 0x40 (the quiet bit of a bfloat16 NaN), in every dword.
#define BF16CONST \
	MOVL $1, AX \
	MOVQ AX, X10 \
	VPBROADCASTD X10, Y10 \
	MOVL $0x7fff, AX \
	MOVQ AX, X11 \
	VPBROADCASTD X11, Y11 \
	MOVL $0x7fffffff, AX \
	MOVQ AX, X12 \
	VPBROADCASTD X12, Y12 \
	MOVL $0x7f800000, AX \
	MOVQ AX, X13 \
	VPBROADCASTD X13, Y13 \
	MOVL $0x40, AX \
	MOVQ AX, X14 \
	VPBROADCASTD X14, Y14

// BF16ROUND rounds the eight float32 values in R to bfloat16, nearest even,
// leaving each in the low half of its dword, exactly as the scalar
// F32ToBF16: (b + 0x7fff + (b>>16)&1) >> 16, or (b>>16)|0x40 for a NaN.
// It clobbers Y4-Y7.
#define BF16ROUND(R) \
	VPSRLD $16, R, Y4 \
	VPAND Y10, Y4, Y5 \
	VPADDD Y11, R, Y6 \
	VPADDD Y5, Y6, Y6 \
	VPSRLD $16, Y6, Y6 \
	VPAND Y12, R, Y7 \
	VPCMPGTD Y13, Y7, Y7 \
	VPOR Y14, Y4, Y4 \
	VPBLENDVB Y7, Y4, Y6, R

// BF16OP32 applies the float32 instruction INSTR to 32-byte blocks of
// bfloat16 elements (16 per block): widened exactly by a 16-bit shift,
// combined as dst = dst INSTR src in float32, rounded back by BF16ROUND,
// and packed (VPACKUSDW packs within 128-bit lanes; VPERMQ restores the
// order). n is a multiple of 32.
#define BF16OP32(INSTR) \
	MOVQ dst+0(FP), DI \
	MOVQ src+8(FP), SI \
	MOVQ n+16(FP), CX \
	BF16CONST \
	SHRQ $5, CX \
	JZ   done \
loop: \
	VPMOVZXWD 0(DI), Y0 \
	VPMOVZXWD 16(DI), Y1 \
	VPMOVZXWD 0(SI), Y2 \
	VPMOVZXWD 16(SI), Y3 \
	VPSLLD $16, Y0, Y0 \
	VPSLLD $16, Y1, Y1 \
	VPSLLD $16, Y2, Y2 \
	VPSLLD $16, Y3, Y3 \
	INSTR Y2, Y0, Y0 \
	INSTR Y3, Y1, Y1 \
	BF16ROUND(Y0) \
	BF16ROUND(Y1) \
	VPACKUSDW Y1, Y0, Y0 \
	VPERMQ $0xd8, Y0, Y0 \
	VMOVDQU Y0, 0(DI) \
	ADDQ $32, SI \
	ADDQ $32, DI \
	DECQ CX \
	JNZ  loop \
	VZEROUPPER \
done: \
	RET

// func addBF16AVX2(dst, src unsafe.Pointer, n int)
TEXT ·addBF16AVX2(SB), NOSPLIT, $0-24
	BF16OP32(VADDPS)

// func mulBF16AVX2(dst, src unsafe.Pointer, n int)
TEXT ·mulBF16AVX2(SB), NOSPLIT, $0-24
	BF16OP32(VMULPS)

// func scaleBF16AVX2(dst, src unsafe.Pointer, n int, s float32)
// dst = src × s for n bytes (a multiple of 32) of bfloat16, each product
// rounded to float32 and then to bfloat16, as the scalar path does.
TEXT ·scaleBF16AVX2(SB), NOSPLIT, $0-28
	MOVQ dst+0(FP), DI
	MOVQ src+8(FP), SI
	MOVQ n+16(FP), CX
	VBROADCASTSS s+24(FP), Y8
	BF16CONST
	SHRQ $5, CX
	JZ   done
loop:
	VPMOVZXWD 0(SI), Y0
	VPMOVZXWD 16(SI), Y1
	VPSLLD $16, Y0, Y0
	VPSLLD $16, Y1, Y1
	VMULPS Y8, Y0, Y0
	VMULPS Y8, Y1, Y1
	BF16ROUND(Y0)
	BF16ROUND(Y1)
	VPACKUSDW Y1, Y0, Y0
	VPERMQ $0xd8, Y0, Y0
	VMOVDQU Y0, 0(DI)
	ADDQ $32, SI
	ADDQ $32, DI
	DECQ CX
	JNZ  loop
	VZEROUPPER
done:
	RET

// SCALE128 sets dst = src × s for n bytes (a multiple of 128) of the float
// type that MUL multiplies, s broadcast into Y8 by BCAST.
#define SCALE128(BCAST, MUL) \
	MOVQ dst+0(FP), DI \
	MOVQ src+8(FP), SI \
	MOVQ n+16(FP), CX \
	BCAST s+24(FP), Y8 \
	SHRQ $7, CX \
	JZ   done \
loop: \
	MUL 0(SI), Y8, Y0 \
	MUL 32(SI), Y8, Y1 \
	MUL 64(SI), Y8, Y2 \
	MUL 96(SI), Y8, Y3 \
	VMOVDQU Y0, 0(DI) \
	VMOVDQU Y1, 32(DI) \
	VMOVDQU Y2, 64(DI) \
	VMOVDQU Y3, 96(DI) \
	ADDQ $128, SI \
	ADDQ $128, DI \
	DECQ CX \
	JNZ  loop \
	VZEROUPPER \
done: \
	RET

// func scaleF32AVX2(dst, src unsafe.Pointer, n int, s float32)
TEXT ·scaleF32AVX2(SB), NOSPLIT, $0-28
	SCALE128(VBROADCASTSS, VMULPS)

// func scaleF64AVX2(dst, src unsafe.Pointer, n int, s float64)
TEXT ·scaleF64AVX2(SB), NOSPLIT, $0-32
	SCALE128(VBROADCASTSD, VMULPD)
