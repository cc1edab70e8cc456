package reduce

import (
	"encoding/binary"
	"math"
)

// ne is the host byte order: buffers hold elements exactly as the host stores them.
var ne = binary.NativeEndian

// reduceReference is the scalar reference for every dtype × op: one element at a
// time, through encoding/binary loads, with no alignment requirement. The fast
// paths must agree with it bit for bit (NaN payloads aside). It assumes validated
// arguments and treats OpAvg as OpSum.
func reduceReference(dst, src []byte, dt DType, op Op) {
	op = op.Elementwise()
	switch dt {
	case Int8:
		for i := range dst {
			dst[i] = byte(combineInt(int64(int8(dst[i])), int64(int8(src[i])), op))
		}
	case Uint8:
		for i := range dst {
			dst[i] = byte(combineUint(uint64(dst[i]), uint64(src[i]), op))
		}
	case Int32:
		for i := 0; i < len(dst); i += 4 {
			v := combineInt(int64(int32(ne.Uint32(dst[i:]))), int64(int32(ne.Uint32(src[i:]))), op)
			ne.PutUint32(dst[i:], uint32(v))
		}
	case Uint32:
		for i := 0; i < len(dst); i += 4 {
			ne.PutUint32(dst[i:], uint32(combineUint(uint64(ne.Uint32(dst[i:])), uint64(ne.Uint32(src[i:])), op)))
		}
	case Int64:
		for i := 0; i < len(dst); i += 8 {
			ne.PutUint64(dst[i:], uint64(combineInt(int64(ne.Uint64(dst[i:])), int64(ne.Uint64(src[i:])), op)))
		}
	case Uint64:
		for i := 0; i < len(dst); i += 8 {
			ne.PutUint64(dst[i:], combineUint(ne.Uint64(dst[i:]), ne.Uint64(src[i:]), op))
		}
	case Float16:
		for i := 0; i < len(dst); i += 2 {
			v := combineF32(F16ToF32(ne.Uint16(dst[i:])), F16ToF32(ne.Uint16(src[i:])), op)
			ne.PutUint16(dst[i:], F32ToF16(v))
		}
	case BFloat16:
		for i := 0; i < len(dst); i += 2 {
			v := combineF32(BF16ToF32(ne.Uint16(dst[i:])), BF16ToF32(ne.Uint16(src[i:])), op)
			ne.PutUint16(dst[i:], F32ToBF16(v))
		}
	case Float32:
		for i := 0; i < len(dst); i += 4 {
			v := combineF32(math.Float32frombits(ne.Uint32(dst[i:])), math.Float32frombits(ne.Uint32(src[i:])), op)
			ne.PutUint32(dst[i:], math.Float32bits(v))
		}
	case Float64:
		for i := 0; i < len(dst); i += 8 {
			v := combineF64(math.Float64frombits(ne.Uint64(dst[i:])), math.Float64frombits(ne.Uint64(src[i:])), op)
			ne.PutUint64(dst[i:], math.Float64bits(v))
		}
	}
}

// combineInt combines two signed values; the caller truncates to the element
// width, which makes sum and prod wrap exactly as width-sized arithmetic would.
func combineInt(a, b int64, op Op) int64 {
	switch op {
	case OpProd:
		return a * b
	case OpMax:
		return max(a, b)
	case OpMin:
		return min(a, b)
	}
	return a + b
}

func combineUint(a, b uint64, op Op) uint64 {
	switch op {
	case OpProd:
		return a * b
	case OpMax:
		return max(a, b)
	case OpMin:
		return min(a, b)
	}
	return a + b
}

func combineF32(a, b float32, op Op) float32 {
	switch op {
	case OpProd:
		return a * b
	case OpMax:
		return max(a, b)
	case OpMin:
		return min(a, b)
	}
	return a + b
}

func combineF64(a, b float64, op Op) float64 {
	switch op {
	case OpProd:
		return a * b
	case OpMax:
		return max(a, b)
	case OpMin:
		return min(a, b)
	}
	return a + b
}
