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
