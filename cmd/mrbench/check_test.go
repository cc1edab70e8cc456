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
		table := inputTable(dt, reduce.OpSum, 2)
		for _, n := range []int{0, 1, 6, 7, 8, 50} {
			for _, off := range []int64{0, 3, 13} {
				got := make([]byte, n*es)
				fillPattern(got, table, es, off)
				want := make([]byte, n*es)
				for i := 0; i < n; i++ {
					k := int((off + int64(i)) % valuePeriod)
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

// TestReducedTableExact: the expected all-reduce of the input patterns equals
// an exact float64 computation, for every type and op.
func TestReducedTableExact(t *testing.T) {
	for _, dt := range reduce.AllDTypes() {
		for _, op := range reduce.AllOps() {
			for _, n := range []int{1, 2, 5, 8} {
				got, err := reducedTable(dt, op, n)
				require.NoError(t, err)
				want := make([]byte, len(got))
				for k := 0; k < valuePeriod; k++ {
					acc := inputValue(op, 0, k)
					for r := 1; r < n; r++ {
						v := inputValue(op, r, k)
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
					if op == reduce.OpAvg {
						acc /= float64(n)
						if !dt.IsFloat() {
							acc = math.Trunc(acc)
						}
					}
					putValue(want[k*dt.Size():], dt, acc)
				}
				assert.Equal(t, want, got, "%v %v n=%d", dt, op, n)
			}
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
