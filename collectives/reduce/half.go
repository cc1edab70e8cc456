package reduce

import "math"

// F16ToF32 widens an IEEE 754 binary16 value to float32. The conversion is exact;
// NaN payloads are kept (shifted into the top of the float32 mantissa).
func F16ToF32(h uint16) float32 {
	sign := uint32(h&0x8000) << 16
	exp := uint32(h>>10) & 0x1f
	mant := uint32(h & 0x3ff)
	switch exp {
	case 0:
		// Zero or subnormal: mant × 2^-24, exact in float32.
		f := float32(mant) * (1.0 / (1 << 24))
		return math.Float32frombits(math.Float32bits(f) | sign)
	case 0x1f:
		return math.Float32frombits(sign | 0x7f800000 | mant<<13)
	}
	return math.Float32frombits(sign | (exp+127-15)<<23 | mant<<13)
}

// F32ToF16 narrows a float32 to IEEE 754 binary16 with round-to-nearest-even.
// Values too large become ±Inf, values too small become ±0 (through the
// subnormals), and a NaN stays a quiet NaN with the top of its payload.
func F32ToF16(f float32) uint16 {
	b := math.Float32bits(f)
	sign := uint16(b>>16) & 0x8000
	exp := int32(b>>23) & 0xff
	mant := b & 0x7fffff
	if exp == 0xff {
		if mant == 0 {
			return sign | 0x7c00
		}
		return sign | 0x7e00 | uint16(mant>>13)
	}
	e := exp - 127 + 15
	if e >= 0x1f {
		return sign | 0x7c00
	}
	if e >= 1 {
		// Normal: the exponent and mantissa form one integer, so a carry out of
		// the mantissa while rounding bumps the exponent (and 0x7bff+1 is Inf).
		v := uint32(e)<<10 | mant>>13
		return sign | uint16(roundNearestEven(v, mant&0x1fff, 13))
	}
	if exp == 0 {
		return sign // float32 subnormals are far below half's smallest subnormal
	}
	// Half subnormal: the value is full × 2^(exp-150) and one half ulp is 2^-24,
	// so the half mantissa is full shifted right by 14-e bits.
	full := mant | 0x800000
	shift := uint32(14 - e)
	if shift > 24 {
		return sign // below half of the smallest subnormal
	}
	v := full >> shift
	return sign | uint16(roundNearestEven(v, full&(1<<shift-1), shift))
}

// roundNearestEven rounds the truncated value v up by one when the dropped low
// bits rem (of width bits) are above half, or exactly half and v is odd.
func roundNearestEven(v, rem, bits uint32) uint32 {
	half := uint32(1) << (bits - 1)
	if rem > half || (rem == half && v&1 == 1) {
		v++
	}
	return v
}
