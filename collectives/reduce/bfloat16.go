package reduce

import "math"

// BF16ToF32 widens a bfloat16 (the upper 16 bits of a float32) to float32; exact.
func BF16ToF32(h uint16) float32 { return math.Float32frombits(uint32(h) << 16) }

// F32ToBF16 narrows a float32 to bfloat16 with round-to-nearest-even. Overflow
// rounds to ±Inf as IEEE requires; a NaN stays a quiet NaN (never rounds to Inf).
func F32ToBF16(f float32) uint16 {
	b := math.Float32bits(f)
	if b&0x7fffffff > 0x7f800000 {
		return uint16(b>>16) | 0x40
	}
	// Adding 0x7fff plus the lowest kept bit rounds half-way cases to even.
	return uint16((b + 0x7fff + (b>>16)&1) >> 16)
}
