package reduce

import (
	"encoding/binary"
	"math"
)

// PutFloat writes v as one little-endian element of type dt at the start of
// p (len(p) >= dt.Size()). Integer types take v truncated toward zero, as
// Go's conversion does, and wrap to their width, whatever their signedness:
// Uint8 takes 200 and -1 (as 255), Uint64 takes 2^63, Int32 takes 3e9 (as
// 3e9 - 2^32). v must lie in [-2^63, 2^64) for integer types; outside it
// (and for NaN) the element is unspecified. float16 and bfloat16 round to
// nearest even. It is meant for building inputs and expected results in
// tests and checks, where values are small integers that every type holds
// exactly.
func PutFloat(p []byte, dt DType, v float64) {
	switch dt {
	case Int8, Uint8:
		p[0] = byte(intBits(v))
	case Int32, Uint32:
		binary.LittleEndian.PutUint32(p, uint32(intBits(v)))
	case Int64, Uint64:
		binary.LittleEndian.PutUint64(p, intBits(v))
	case Float16:
		binary.LittleEndian.PutUint16(p, F32ToF16(float32(v)))
	case BFloat16:
		binary.LittleEndian.PutUint16(p, F32ToBF16(float32(v)))
	case Float32:
		binary.LittleEndian.PutUint32(p, math.Float32bits(float32(v)))
	case Float64:
		binary.LittleEndian.PutUint64(p, math.Float64bits(v))
	}
}

// Float reads the element of type dt at the start of p (len(p) >= dt.Size(),
// little-endian) widened to float64: the inverse of PutFloat for the values
// it writes. Checks use it to compare floating-point results within a
// tolerance.
func Float(p []byte, dt DType) float64 {
	switch dt {
	case Int8:
		return float64(int8(p[0]))
	case Uint8:
		return float64(p[0])
	case Int32:
		return float64(int32(binary.LittleEndian.Uint32(p)))
	case Uint32:
		return float64(binary.LittleEndian.Uint32(p))
	case Int64:
		return float64(int64(binary.LittleEndian.Uint64(p)))
	case Uint64:
		return float64(binary.LittleEndian.Uint64(p))
	case Float16:
		return float64(F16ToF32(binary.LittleEndian.Uint16(p)))
	case BFloat16:
		return float64(BF16ToF32(binary.LittleEndian.Uint16(p)))
	case Float32:
		return float64(math.Float32frombits(binary.LittleEndian.Uint32(p)))
	case Float64:
		return math.Float64frombits(binary.LittleEndian.Uint64(p))
	}
	return math.NaN()
}

// intBits returns v truncated toward zero as 64 two's-complement bits, which
// callers cut to their width. A float-to-integer conversion whose result
// does not fit the target type is implementation-defined in Go (on amd64 it
// gives 0x8000...), so v goes through the one 64-bit type that holds it:
// uint64 when it is not negative (which reaches 2^64, past int64's range,
// for Uint64 values at or above 2^63), int64 when it is.
func intBits(v float64) uint64 {
	if v >= 0 {
		return uint64(v)
	}
	return uint64(int64(v))
}
