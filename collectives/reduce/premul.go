package reduce

import (
	"fmt"
	"math"
	"unsafe"
)

// PreMultiplies reports whether an average of dt starts by scaling every
// rank's input by 1/nranks (PreMultiply) and then sums, rather than summing
// and dividing once at the end (DivideBy). NCCL averages floating-point
// types that way (its pre-multiplied sum, ncclDevPreMulSum), so that an
// average of values that fit the type never overflows on the way: eight
// ranks of float16 10000 sum to 80000, beyond half's 65504, where the scaled
// terms sum to 10000. Integer averages sum and then divide, as NCCL's do.
func PreMultiplies(dt DType, op Op) bool { return op == OpAvg && dt.IsFloat() }

// PreMulScalar returns the factor PreMultiply scales by, 1/n rounded to dt as
// NCCL rounds it: through float32 for half, bfloat16 and float, directly for
// double. It is returned widened to float64.
func PreMulScalar(dt DType, n int) float64 {
	inv := 1.0 / float64(n)
	switch dt {
	case Float16:
		return float64(F16ToF32(F32ToF16(float32(inv))))
	case BFloat16:
		return float64(BF16ToF32(F32ToBF16(float32(inv))))
	case Float32:
		return float64(float32(inv))
	}
	return inv
}

// PreMultiply sets dst[i] = src[i] × PreMulScalar(dt, n), each product
// rounded once to dt (half and bfloat16 multiply in float32, where the
// product of two such values is exact, then round to nearest even). It is the
// first half of a floating-point average; the second is an OpSum reduction of
// the n scaled inputs. dst and src may be the same slice but must not
// partially overlap. dt must be a floating-point type and n at least 1
// (n == 1 copies). PreMultiply allocates nothing.
func PreMultiply(dst, src []byte, dt DType, n int) error {
	if err := checkArgs(dst, src, dt, OpSum); err != nil {
		return err
	}
	if !dt.IsFloat() {
		return fmt.Errorf("%w: pre-multiplied average of integer type %s", ErrInvalid, dt)
	}
	if n < 1 {
		return fmt.Errorf("%w: divisor %d, want at least 1", ErrInvalid, n)
	}
	s := PreMulScalar(dt, n)
	if useAVX2 && len(src) > 0 {
		nb := len(src) &^ 127
		if nb > 0 && avx2Scale(dt, unsafe.Pointer(&dst[0]), unsafe.Pointer(&src[0]), nb, s) {
			dst, src = dst[nb:], src[nb:]
		}
	}
	switch dt {
	case Float16:
		f := float32(s)
		for i := 0; i < len(src); i += 2 {
			ne.PutUint16(dst[i:], F32ToF16(F16ToF32(ne.Uint16(src[i:]))*f))
		}
	case BFloat16:
		f := float32(s)
		for i := 0; i < len(src); i += 2 {
			ne.PutUint16(dst[i:], F32ToBF16(BF16ToF32(ne.Uint16(src[i:]))*f))
		}
	case Float32:
		f := float32(s)
		for i := 0; i < len(src); i += 4 {
			ne.PutUint32(dst[i:], math.Float32bits(math.Float32frombits(ne.Uint32(src[i:]))*f))
		}
	case Float64:
		for i := 0; i < len(src); i += 8 {
			ne.PutUint64(dst[i:], math.Float64bits(math.Float64frombits(ne.Uint64(src[i:]))*s))
		}
	}
	return nil
}

// UnitRoundoff returns dt's unit roundoff, half the distance from 1 to the
// next larger value: 2^-11 for half, 2^-8 for bfloat16, 2^-24 for float and
// 2^-53 for double, 0 for the integer types (exact).
func UnitRoundoff(dt DType) float64 {
	switch dt {
	case Float16:
		return 0x1p-11
	case BFloat16:
		return 0x1p-8
	case Float32:
		return 0x1p-24
	case Float64:
		return 0x1p-53
	}
	return 0
}

// PreMulSumTolerance bounds how far a pre-multiplied average of n inputs of
// dt, each at most maxAbs in magnitude, may lie from the exact mean, whatever
// the order of the n-1 additions: the scalar and each product round once
// (half and bfloat16 scalars twice, through float32), and each addition
// rounds a partial sum no larger than maxAbs, so the error stays below
// (n+2)·u·maxAbs with u = UnitRoundoff(dt); one u more covers the 16-bit
// types' scalar, rounded through float32 first. Checks of averages compare
// within this bound, because the rounding of 1/n makes the result depend on
// the order of reduction, which differs between algorithms.
func PreMulSumTolerance(dt DType, n int, maxAbs float64) float64 {
	return float64(n+3) * UnitRoundoff(dt) * maxAbs
}

// CountFar counts the elements of got (elements of dt, little-endian) that
// lie more than tol from the element at the same index of want, or that are
// NaN where want's is not or the reverse. got and want must have the same
// length, a multiple of dt.Size(). Checks of floating-point averages use it
// with a tolerance from PreMulSumTolerance.
func CountFar(got, want []byte, dt DType, tol float64) int64 {
	var far int64
	es := dt.Size()
	for i := 0; i+es <= len(got) && i+es <= len(want); i += es {
		g, w := Float(got[i:], dt), Float(want[i:], dt)
		switch {
		case math.IsNaN(g) || math.IsNaN(w):
			if math.IsNaN(g) != math.IsNaN(w) {
				far++
			}
		case g == w: // infinities too
		case !(math.Abs(g-w) <= tol):
			far++
		}
	}
	return far
}
