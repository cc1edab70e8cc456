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
		default:
			return false
		}
	case OpProd:
		switch dt {
		case Float32:
			mulF32AVX2(d, s, n)
		case Float64:
			mulF64AVX2(d, s, n)
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
