package reduce

import (
	"encoding/binary"
	"math"
)

// PutFloat writes v as one little-endian element of type dt at the start of
// p (len(p) >= dt.Size()). Integer types take v truncated toward zero, as
// Go's conversion does, and wrap to their width; float16 and bfloat16 round
// to nearest even. It is meant for building inputs and expected results in
// tests and checks, where values are small integers that every type holds
// exactly.
func PutFloat(p []byte, dt DType, v float64) {
	switch dt {
	case Int8, Uint8:
		p[0] = byte(int8(v))
	case Int32, Uint32:
		binary.LittleEndian.PutUint32(p, uint32(int32(v)))
	case Int64, Uint64:
		binary.LittleEndian.PutUint64(p, uint64(int64(v)))
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
