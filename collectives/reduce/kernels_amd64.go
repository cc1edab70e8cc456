//go:build !purego

package reduce

import "unsafe"

// haveAVX2Asm reports that this build carries the AVX2 assembly kernels; whether
// they run is decided by useAVX2 from cpuid.
const haveAVX2Asm = true

// The AVX2 kernels combine n bytes (a multiple of 128) of src into dst in place;
// see kernels_amd64.s. They neither retain nor let escape their pointers.

//go:noescape
func addF32AVX2(dst, src unsafe.Pointer, n int)

//go:noescape
func addF64AVX2(dst, src unsafe.Pointer, n int)

//go:noescape
func mulF32AVX2(dst, src unsafe.Pointer, n int)

//go:noescape
func mulF64AVX2(dst, src unsafe.Pointer, n int)

//go:noescape
func addI8AVX2(dst, src unsafe.Pointer, n int)

//go:noescape
func addI32AVX2(dst, src unsafe.Pointer, n int)

//go:noescape
func addI64AVX2(dst, src unsafe.Pointer, n int)

//go:noescape
func maxS8AVX2(dst, src unsafe.Pointer, n int)

//go:noescape
func minS8AVX2(dst, src unsafe.Pointer, n int)

//go:noescape
func maxU8AVX2(dst, src unsafe.Pointer, n int)

//go:noescape
func minU8AVX2(dst, src unsafe.Pointer, n int)

//go:noescape
func maxS32AVX2(dst, src unsafe.Pointer, n int)

//go:noescape
func minS32AVX2(dst, src unsafe.Pointer, n int)

//go:noescape
func maxU32AVX2(dst, src unsafe.Pointer, n int)

//go:noescape
func minU32AVX2(dst, src unsafe.Pointer, n int)

// The 16-bit float kernels: n is a multiple of 64 bytes (binary16, F16C) or
// 32 (bfloat16, AVX2 integer rounding); either way a multiple of 128 works.

//go:noescape
func addF16F16C(dst, src unsafe.Pointer, n int)

//go:noescape
func mulF16F16C(dst, src unsafe.Pointer, n int)

//go:noescape
func addBF16AVX2(dst, src unsafe.Pointer, n int)

//go:noescape
func mulBF16AVX2(dst, src unsafe.Pointer, n int)

// The scaling kernels set dst = src × s for n bytes (a multiple of 128), each
// product rounded once to the element type (for the 16-bit types, through
// float32, as the scalar path does); dst and src may be the same.

//go:noescape
func scaleF16F16C(dst, src unsafe.Pointer, n int, s float32)

//go:noescape
func scaleBF16AVX2(dst, src unsafe.Pointer, n int, s float32)

//go:noescape
func scaleF32AVX2(dst, src unsafe.Pointer, n int, s float32)

//go:noescape
func scaleF64AVX2(dst, src unsafe.Pointer, n int, s float64)

// avx2Scale scales the first n bytes (a multiple of 128) of src into dst by s
// with the kernel for dt and reports whether one exists.
func avx2Scale(dt DType, d, s unsafe.Pointer, n int, f float64) bool {
	switch dt {
	case Float16:
		if !useF16C {
			return false
		}
		scaleF16F16C(d, s, n, float32(f))
	case BFloat16:
		scaleBF16AVX2(d, s, n, float32(f))
	case Float32:
		scaleF32AVX2(d, s, n, float32(f))
	case Float64:
		scaleF64AVX2(d, s, n, f)
	default:
		return false
	}
	return true
}

// avx2Reduce combines the first n bytes (a multiple of 128) of src into dst with
// the assembly kernel for dt × op (op already elementwise) and reports whether one
// exists. Float min/max have none on purpose: VMINPS/VMAXPS return the second
// operand for NaN and for ±0 pairs, which would make the result depend on operand
// order. Calls are direct (not through a func value) so that escape analysis
// keeps seeing the kernels as non-escaping.
func avx2Reduce(dt DType, op Op, d, s unsafe.Pointer, n int) bool {
	switch op {
	case OpSum:
		switch dt {
		case Int8, Uint8:
			addI8AVX2(d, s, n)
		case Int32, Uint32:
			addI32AVX2(d, s, n)
		case Int64, Uint64:
			addI64AVX2(d, s, n)
		case Float32:
			addF32AVX2(d, s, n)
		case Float64:
			addF64AVX2(d, s, n)
		case Float16:
			if !useF16C {
				return false
			}
			addF16F16C(d, s, n)
		case BFloat16:
			addBF16AVX2(d, s, n)
		default:
			return false
		}
	case OpProd:
		switch dt {
		case Float32:
			mulF32AVX2(d, s, n)
		case Float64:
			mulF64AVX2(d, s, n)
		case Float16:
			if !useF16C {
				return false
			}
			mulF16F16C(d, s, n)
		case BFloat16:
			mulBF16AVX2(d, s, n)
		default:
			return false
		}
	case OpMax:
		switch dt {
		case Int8:
			maxS8AVX2(d, s, n)
		case Uint8:
			maxU8AVX2(d, s, n)
		case Int32:
			maxS32AVX2(d, s, n)
		case Uint32:
			maxU32AVX2(d, s, n)
		default:
			return false
		}
	case OpMin:
		switch dt {
		case Int8:
			minS8AVX2(d, s, n)
		case Uint8:
			minU8AVX2(d, s, n)
		case Int32:
			minS32AVX2(d, s, n)
		case Uint32:
			minU32AVX2(d, s, n)
		default:
			return false
		}
	default:
		return false
	}
	return true
}
