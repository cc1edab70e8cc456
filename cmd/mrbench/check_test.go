package main

import (
	"math"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/metaroce/metaroce/collectives/reduce"
	"github.com/metaroce/metaroce/collectives/sched"
)

// TestFillPatternMatchesReference compares the doubling fill and the chunked
// comparison with element-by-element loops.
func TestFillPatternMatchesReference(t *testing.T) {
	for _, dt := range reduce.AllDTypes() {
		es := dt.Size()
		// Sums repeat every valuePeriod elements, float averages every
		// valuePeriod × n.
		for _, op := range []reduce.Op{reduce.OpSum, reduce.OpAvg} {
			table := inputs{dt: dt, op: op, n: 4, reduces: true}.table(2)
			period := int64(len(table) / es)
			for _, n := range []int{0, 1, 6, 7, 8, 50} {
				for _, off := range []int64{0, 3, 13} {
					got := make([]byte, n*es)
					fillPattern(got, table, es, off)
					want := make([]byte, n*es)
					for i := 0; i < n; i++ {
						k := int((off + int64(i)) % period)
						copy(want[i*es:], table[k*es:(k+1)*es])
					}
					require.Equal(t, want, got, "%v n=%d off=%d", dt, n, off)
					assert.Zero(t, countWrong(got, table, es, off))
					if n > 0 {
						got[len(got)-1] ^= 0x01
						got[0] ^= 0x80
						want := int64(2)
						if n == 1 { // both flips hit the one element
							want = 1
						}
						assert.Equal(t, want, countWrong(got, table, es, off), "%v n=%d", dt, n)
					}
				}
			}
		}
	}
}

// TestReducedTableExact: the expected all-reduce of the input patterns
// equals an exact float64 computation, for every type and op and for rank
// counts where a plain pattern would overflow the exact integers of
// bfloat16 (256) and float16 (2048). Exact partial sums are what make the
// expected output the same in every order of reduction.
func TestReducedTableExact(t *testing.T) {
	for _, dt := range reduce.AllDTypes() {
		for _, op := range reduce.AllOps() {
			for _, n := range []int{1, 2, 5, 8, 90, 300, 1000} {
				in := inputs{dt: dt, op: op, n: n, reduces: true}
				got, err := in.reduced()
				require.NoError(t, err)
				want := make([]byte, len(got))
				for k := 0; k < in.period(); k++ {
					acc := in.value(0, k)
					for r := 1; r < n; r++ {
						v := in.value(r, k)
						switch op {
						case reduce.OpSum, reduce.OpAvg:
							acc += v
						case reduce.OpProd:
							acc *= v
						case reduce.OpMin:
							acc = math.Min(acc, v)
						case reduce.OpMax:
							acc = math.Max(acc, v)
						}
					}
					if !dt.IsFloat() {
						acc = wrapInt(dt, acc) // integer types wrap, in any order alike
					}
					switch {
					case in.preMul():
						// One nonzero input, scaled by 1/n rounded to
						// the type as NCCL rounds it, the product rounded
						// once (exact in float64 for these small values).
						acc = roundTo(dt, acc*reduce.PreMulScalar(dt, n))
					case op == reduce.OpAvg:
						acc = math.Trunc(acc / float64(n))
					}
					putValue(want[k*dt.Size():], dt, acc)
				}
				assert.Equal(t, want, got, "%v %v n=%d", dt, op, n)
			}
		}
	}
}

// roundTo rounds v to the nearest value of float type dt (ties to even).
func roundTo(dt reduce.DType, v float64) float64 {
	b := make([]byte, dt.Size())
	putValue(b, dt, v)
	return reduce.Float(b, dt)
}

// wrapInt reduces v modulo the width of integer type dt, as its
// arithmetic does, into the type's range. It is exact for the values these
// patterns reach: small sums, and products that are powers of two.
func wrapInt(dt reduce.DType, v float64) float64 {
	m := math.Ldexp(1, 8*dt.Size())
	v = math.Mod(v, m)
	if dt == reduce.Int8 || dt == reduce.Int32 || dt == reduce.Int64 {
		if v >= m/2 {
			v -= m
		}
	}
	return v
}

// TestReductionOrderDoesNotMatter: a correct all-reduce that adds the ranks
// in reverse order (a ring, a tree or RCCL each have their own order) gives
// exactly the expected output, pre-multiplied averages included, also at
// rank counts where bfloat16's exact integers run out.
func TestReductionOrderDoesNotMatter(t *testing.T) {
	for _, dt := range []reduce.DType{reduce.BFloat16, reduce.Float16, reduce.Float32} {
		for _, op := range []reduce.Op{reduce.OpSum, reduce.OpAvg} {
			for _, n := range []int{90, 100, 300} {
				in := inputs{dt: dt, op: op, n: n, reduces: true}
				want, err := in.reduced()
				require.NoError(t, err)
				term := func(r int) []byte {
					b := in.table(r)
					if op == reduce.OpAvg {
						require.NoError(t, reduce.PreMultiply(b, b, dt, n))
					}
					return b
				}
				got := term(n - 1)
				for r := n - 2; r >= 0; r-- {
					require.NoError(t, reduce.Reduce(got, term(r), dt, op))
				}
				assert.Zero(t, countWrong(got, want, dt.Size(), 0), "%v %v n=%d", dt, op, n)
			}
		}
	}
}

// TestInputsDifferPerRank: where nothing is reduced, every rank sends its
// own data (up to the ranks a type can tell apart: 118 in int8), so that a
// block from the wrong rank is counted wrong.
func TestInputsDifferPerRank(t *testing.T) {
	for _, dt := range reduce.AllDTypes() {
		ranks := 64
		if dt == reduce.Int8 {
			ranks = 118
		}
		seen := map[string]int{}
		for r := range ranks {
			tb := string(inputs{dt: dt, op: reduce.OpSum, n: ranks}.table(r))
			prev, dup := seen[tb]
			require.False(t, dup, "%v: ranks %d and %d send the same data", dt, prev, r)
			seen[tb] = r
		}
	}
}

func TestLayoutFor(t *testing.T) {
	for _, tc := range []struct {
		c          sched.Collective
		size       int64
		want       layout
		wantReport int64
	}{
		{sched.AllReduce, 1000, layout{250, 1000, 1000}, 1000},
		{sched.AllReduce, 1001, layout{250, 1000, 1000}, 1000},
		{sched.ReduceScatter, 1000, layout{62, 992, 248}, 992},
		{sched.AllGather, 1000, layout{62, 248, 992}, 992},
		{sched.AllToAll, 1000, layout{62, 992, 992}, 992},
		{sched.AllToAll, 8, layout{0, 0, 0}, 0},
		{sched.Broadcast, 4, layout{1, 4, 4}, 4},
	} {
		got := layoutFor(tc.c, tc.size, 4, 4)
		assert.Equal(t, tc.want, got, "%v %d", tc.c, tc.size)
		assert.Equal(t, tc.wantReport, got.Bytes())
	}
	l := layoutFor(sched.ReduceScatter, 64, 4, 4)
	buf := make([]byte, l.Bytes())
	send, recv := inPlaceViews(sched.ReduceScatter, l, buf, 2)
	assert.Len(t, send, 64)
	assert.Len(t, recv, 16)
	assert.Equal(t, &buf[32], &recv[0])
	l = layoutFor(sched.AllGather, 64, 4, 4)
	send, recv = inPlaceViews(sched.AllGather, l, buf, 3)
	assert.Equal(t, &buf[48], &send[0])
	assert.Len(t, recv, 64)
}

// TestAverageCheckCatchesMissingRank: an average that lacks one rank's
// contribution is wrong in every element that rank made nonzero, for every
// float type and rank count: the check compares bit for bit.
func TestAverageCheckCatchesMissingRank(t *testing.T) {
	for _, dt := range []reduce.DType{reduce.Float16, reduce.BFloat16, reduce.Float32, reduce.Float64} {
		for _, n := range []int{2, 3, 5, 8, 16, 33, 64, 300} {
			in := inputs{dt: dt, op: reduce.OpAvg, n: n, reduces: true}
			want, err := in.reduced()
			require.NoError(t, err)
			for _, missing := range []int{0, n - 1} {
				got := make([]byte, len(want))
				for r := range n {
					if r == missing {
						continue
					}
					b := in.table(r)
					require.NoError(t, reduce.PreMultiply(b, b, dt, n))
					require.NoError(t, reduce.Reduce(got, b, dt, reduce.OpSum))
				}
				nonzero := 0
				for k := range in.period() {
					if in.value(missing, k) != 0 {
						nonzero++
					}
				}
				require.Positive(t, nonzero)
				assert.EqualValues(t, nonzero, countWrong(got, want, dt.Size(), 0), "%v n=%d without rank %d", dt, n, missing)
			}
		}
	}
}
