package reduce

import (
	"bytes"
	"errors"
	"math"
	"math/big"
	"math/rand/v2"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestPreMulScalar pins the scalar to NCCL's roundings of 1/n.
func TestPreMulScalar(t *testing.T) {
	cases := []struct {
		dt   DType
		n    int
		want float64
	}{
		{Float64, 3, 1.0 / 3},
		{Float32, 3, float64(float32(1.0 / 3))},
		{Float16, 3, 0.333251953125}, // 0x3555
		{BFloat16, 3, 0.333984375},   // 0x3eab
		{Float16, 8, 0.125},
		{BFloat16, 1, 1},
	}
	for _, c := range cases {
		require.Equal(t, c.want, PreMulScalar(c.dt, c.n), "%s n=%d", c.dt, c.n)
	}
}

// roundTo rounds the exact value v to dt's precision and range, nearest even,
// through math/big: the dumb reference for one product.
func roundTo(v *big.Float, dt DType) float64 {
	switch dt {
	case Float64:
		f, _ := v.Float64()
		return f
	case Float32:
		f, _ := v.Float32()
		return float64(f)
	}
	// The 16-bit types multiply in float32, as NCCL's widened kernels do,
	// then round to 16 bits. The product is exact in float32 except where
	// bfloat16's float32 range takes it below float32's subnormals.
	f, _ := v.Float32()
	if dt == Float16 {
		return float64(F16ToF32(F32ToF16(f)))
	}
	return float64(BF16ToF32(F32ToBF16(f)))
}

// TestPreMultiplyMatchesReference checks every float type against products
// rounded once from their exact values, over random and special inputs, in
// place and out of place.
func TestPreMultiplyMatchesReference(t *testing.T) {
	rng := rand.New(rand.NewPCG(11, 12))
	for _, dt := range []DType{Float16, BFloat16, Float32, Float64} {
		for _, n := range []int{1, 2, 3, 5, 7, 8, 64, 1000} {
			src := make([]byte, 257*dt.Size())
			fillRandom(rng, src, dt)
			dst := make([]byte, len(src))
			require.NoError(t, PreMultiply(dst, src, dt, n))
			s := new(big.Float).SetFloat64(PreMulScalar(dt, n))
			for i := 0; i < len(src); i += dt.Size() {
				x := Float(src[i:], dt)
				got := Float(dst[i:], dt)
				if math.IsNaN(x) {
					require.True(t, math.IsNaN(got), "%s n=%d: NaN×s = %v", dt, n, got)
					continue
				}
				var want float64
				if math.IsInf(x, 0) {
					want = x
				} else {
					want = roundTo(new(big.Float).SetPrec(0).Mul(new(big.Float).SetFloat64(x), s), dt)
				}
				require.Equal(t, math.Float64bits(want), math.Float64bits(got), "%s n=%d: %v × %v", dt, n, x, s)
			}
			inPlace := append([]byte(nil), src...)
			require.NoError(t, PreMultiply(inPlace, inPlace, dt, n))
			require.True(t, bytes.Equal(inPlace, dst), "%s n=%d: in place differs", dt, n)
		}
	}
}

// TestPreMultiplyRefuses covers the argument errors.
func TestPreMultiplyRefuses(t *testing.T) {
	for _, c := range []struct {
		dst, src []byte
		dt       DType
		n        int
	}{
		{make([]byte, 4), make([]byte, 4), Int32, 2},
		{make([]byte, 4), make([]byte, 4), Float32, 0},
		{make([]byte, 4), make([]byte, 8), Float32, 2},
		{make([]byte, 3), make([]byte, 3), Float16, 2},
	} {
		require.True(t, errors.Is(PreMultiply(c.dst, c.src, c.dt, c.n), ErrInvalid), "%+v", c)
	}
}

// TestPreMulAverageNoOverflow is the reason for pre-multiplying: eight ranks
// of half 10000 average to about 10000 (rounding in the partial sums), where sum-then-divide overflows to Inf.
func TestPreMulAverageNoOverflow(t *testing.T) {
	const n = 8
	in := make([]byte, 2)
	PutFloat(in, Float16, 10000)
	acc := make([]byte, 2)
	for r := range n {
		term := make([]byte, 2)
		require.NoError(t, PreMultiply(term, in, Float16, n))
		if r == 0 {
			copy(acc, term)
			continue
		}
		require.NoError(t, Reduce(acc, term, Float16, OpSum))
	}
	got := Float(acc, Float16)
	require.False(t, math.IsInf(got, 0), "average overflowed")
	require.InDelta(t, 10000, got, PreMulSumTolerance(Float16, n, 10000))
}

// TestPreMulSumTolerance checks the bound: pre-multiplied averages of random
// inputs, summed in random orders, stay within it of the exact mean.
func TestPreMulSumTolerance(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 6))
	for _, dt := range []DType{Float16, BFloat16, Float32, Float64} {
		for _, n := range []int{2, 3, 5, 6, 7, 9, 12, 33} {
			for trial := 0; trial < 200; trial++ {
				maxAbs := 0.0
				terms := make([][]byte, n)
				exact := new(big.Float).SetPrec(200)
				for r := range n {
					v := Float(encode(dt, (rng.Float64()*2-1)*100), dt)
					maxAbs = max(maxAbs, math.Abs(v))
					exact.Add(exact, new(big.Float).SetFloat64(v))
					terms[r] = make([]byte, dt.Size())
					require.NoError(t, PreMultiply(terms[r], encode(dt, v), dt, n))
				}
				rng.Shuffle(n, func(i, j int) { terms[i], terms[j] = terms[j], terms[i] })
				acc := append([]byte(nil), terms[0]...)
				for _, tm := range terms[1:] {
					require.NoError(t, Reduce(acc, tm, dt, OpSum))
				}
				mean, _ := exact.Quo(exact, new(big.Float).SetInt64(int64(n))).Float64()
				require.LessOrEqual(t, math.Abs(Float(acc, dt)-mean), PreMulSumTolerance(dt, n, maxAbs),
					"%s n=%d: got %v, mean %v", dt, n, Float(acc, dt), mean)
			}
		}
	}
}

// encode returns v as one element of dt.
func encode(dt DType, v float64) []byte {
	b := make([]byte, dt.Size())
	PutFloat(b, dt, v)
	return b
}

// TestPreMultiplyAllocs asserts the zero-allocation budget.
func TestPreMultiplyAllocs(t *testing.T) {
	b := make([]byte, 4096)
	for _, dt := range []DType{Float16, BFloat16, Float32, Float64} {
		if a := testing.AllocsPerRun(20, func() { _ = PreMultiply(b, b, dt, 3) }); a != 0 {
			t.Errorf("PreMultiply %s: %v allocs per call", dt, a)
		}
	}
}
