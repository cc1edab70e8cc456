package reduce

import (
	"fmt"
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

// TestPutFloatFullWidth writes integer values across the whole range of each
// width, past the range of the type of the other signedness, and checks
// what Float reads back. PutFloat used to convert through int32 and int64,
// and Go's float-to-integer conversion is implementation-defined when the
// value does not fit: Uint32 values from 2^31 and Uint64 values from 2^63
// came out as 0x80000000... on amd64 instead of themselves. Negative values
// of unsigned types and large values of signed ones wrap to the width, and
// fractions truncate toward zero, as the doc says.
func TestPutFloatFullWidth(t *testing.T) {
	const two63, two64 = 1 << 63, 1 << 64
	cases := []struct {
		dt     DType
		v, out float64
	}{
		{Uint8, 200, 200},
		{Uint8, 255, 255},
		{Uint8, -1, 255},
		{Int8, 200, 200 - 256},
		{Int8, -128, -128},
		{Uint32, 1 << 31, 1 << 31},
		{Uint32, 3e9, 3e9},
		{Uint32, 1<<32 - 1, 1<<32 - 1},
		{Uint32, -1, 1<<32 - 1},
		{Int32, 3e9, 3e9 - 1<<32},
		{Int32, -1 << 31, -1 << 31},
		{Uint64, two63, two63},
		{Uint64, two64 - 2048, two64 - 2048}, // the largest float64 below 2^64
		{Uint64, -2, two64 - 2},
		{Int64, two63, -two63},
		{Int64, -two63, -two63},
		{Int32, -2.7, -2},
		{Uint32, 2.9, 2},
	}
	for _, c := range cases {
		t.Run(fmt.Sprintf("%v/%v", c.dt, c.v), func(t *testing.T) {
			p := make([]byte, 8)
			PutFloat(p, c.dt, c.v)
			require.Equal(t, c.out, Float(p, c.dt))
		})
	}
}
