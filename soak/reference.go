package soak

import (
	"math"

	"github.com/metaroce/metaroce/collectives/reduce"
	"github.com/metaroce/metaroce/collectives/sched"
)

// value is element i of rank r's input for the op with salt s: a small
// integer (1..3), so that sums and products over up to 4 ranks are exact in
// every element type, int8 and half included.
func value(s uint32, r, i int) float64 { return float64((uint32(r)*7+uint32(i)*3+s)%3 + 1) }

// input returns rank r's n input elements for salt s.
func input(dt reduce.DType, s uint32, r, n int) []byte {
	es := dt.Size()
	b := make([]byte, n*es)
	for i := 0; i < n; i++ {
		reduce.PutFloat(b[i*es:], dt, value(s, r, i))
	}
	return b
}

// combine applies op to the values of every rank for one element, in rank
// order, in float64 (exact for the small integers used).
func combine(op reduce.Op, vs []float64) float64 {
	acc := vs[0]
	for _, v := range vs[1:] {
		switch op {
		case reduce.OpSum:
			acc += v
		case reduce.OpProd:
			acc *= v
		case reduce.OpMax:
			acc = math.Max(acc, v)
		case reduce.OpMin:
			acc = math.Min(acc, v)
		}
	}
	return acc
}

// expected is rank r's output of collective coll over n ranks with count
// elements (NCCL's meaning of count per collective), computed element by
// element from value without the reduce package.
func expected(coll sched.Collective, dt reduce.DType, op reduce.Op, s uint32, n, r, count, root int) []byte {
	es := dt.Size()
	vs := make([]float64, n)
	reduced := func(base, k int) []byte {
		out := make([]byte, k*es)
		for i := 0; i < k; i++ {
			for q := 0; q < n; q++ {
				vs[q] = value(s, q, base+i)
			}
			reduce.PutFloat(out[i*es:], dt, combine(op, vs))
		}
		return out
	}
	switch coll {
	case sched.AllReduce:
		return reduced(0, count)
	case sched.ReduceScatter:
		return reduced(r*count, count)
	case sched.AllGather:
		var out []byte
		for q := 0; q < n; q++ {
			out = append(out, input(dt, s, q, count)...)
		}
		return out
	case sched.AllToAll:
		var out []byte
		for q := 0; q < n; q++ {
			out = append(out, input(dt, s, q, n*count)[r*count*es:(r+1)*count*es]...)
		}
		return out
	case sched.Broadcast:
		return input(dt, s, root, count)
	case sched.SendRecv:
		return input(dt, s, (r-1+n)%n, count)
	}
	return nil
}

// inOutCounts returns the input and output element counts of one rank.
func inOutCounts(coll sched.Collective, n, count int) (in, out int) {
	switch coll {
	case sched.ReduceScatter:
		return n * count, count
	case sched.AllGather:
		return count, n * count
	case sched.AllToAll:
		return n * count, n * count
	}
	return count, count
}
