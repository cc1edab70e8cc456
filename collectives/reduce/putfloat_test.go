package reduce

import (
	"testing"

	"github.com/stretchr/testify/require"
)

// TestPutFloat writes small integers into every element type and reads
// them back with Float: the value lands in exactly one element, and Float
// inverts PutFloat.
func TestPutFloat(t *testing.T) {
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
			require.Equal(t, v, Float(p, dt), "%v %v", dt, v)
		}
	}
}
