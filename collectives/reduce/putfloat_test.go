package reduce

import (
	"encoding/binary"
	"math"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestPutFloat writes small integers into every element type and reads
// them back byte by byte: the value lands in exactly one element.
func TestPutFloat(t *testing.T) {
	read := func(p []byte, dt DType) float64 {
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
		default:
			return math.Float64frombits(binary.LittleEndian.Uint64(p))
		}
	}
	signed := map[DType]bool{Int8: true, Int32: true, Int64: true, Float16: true, BFloat16: true, Float32: true, Float64: true}
	for _, dt := range AllDTypes() {
		for _, v := range []float64{0, 1, 3, 127, -2} {
			if v < 0 && !signed[dt] {
				continue
			}
			p := make([]byte, dt.Size()+1)
			p[dt.Size()] = 0xee
			PutFloat(p, dt, v)
			require.Equal(t, byte(0xee), p[dt.Size()], "%v wrote past one element", dt)
			require.Equal(t, v, read(p, dt), "%v %v", dt, v)
		}
	}
}
