package soak

import (
	"encoding/binary"

	"github.com/metaroce/metaroce/collectives/reduce"
	"github.com/metaroce/metaroce/collectives/sched"
)

// MaxRanks is the largest number of ranks whose results the reference
// predicts exactly, for every element type and operation the soak draws.
// The bound comes from bfloat16 sums: bfloat16 holds every integer up to
// 256 exactly, and a sum of n inputs of at most 3 stays below that for n up
// to 85 (float16 holds integers up to 2048). 64 is the largest job the soak
// is meant for, with room to spare.
const MaxRanks = 64

// valueRange returns how many distinct input values (1..k) the ranks
// contribute for a reduction of op over dt. The reduction order is the
// collective's (a ring starts each chunk at another rank, a tree pairs
// ranks up), so the reference can only be exact when every order gives the
// same result:
//
//   - integer sums and products wrap at the element width, and arithmetic
//     modulo 2^bits is associative and commutative: any values;
//   - floating-point sums of 1..3 over at most MaxRanks ranks never leave
//     the integers every float type holds exactly (see MaxRanks);
//   - floating-point products of 1..3 do (3^16 needs 26 bits, bfloat16 has
//     8), and then every order rounds differently; products of 1 and 2 are
//     powers of two, exact in every type until they overflow to +Inf
//     (float16 beyond 2^15), which no later step undoes: any order gives
//     the same result;
//   - max and min pick one of the inputs: any order.
func valueRange(dt reduce.DType, op reduce.Op) uint32 {
	if dt.IsFloat() && op == reduce.OpProd {
		return 2
	}
	return 3
}

// value is element i of rank r's input for the op with salt s: one of the
// values 1..k (see valueRange), drawn by a small integer hash of (s, r, i).
// The hash has no period in i, so that an element written at the wrong
// offset within one rank's data shows up as corruption (a value that
// depends on i only modulo k would hide shifts by multiples of k).
func value(s uint32, k uint32, r, i int) uint64 {
	h := s ^ uint32(r)*0x9e3779b1 ^ uint32(i)*0x85ebca77
	h ^= h >> 15
	h *= 0x2c1b3c6d
	h ^= h >> 12
	return uint64(h%k + 1)
}

// input returns rank r's n input elements for salt s of a collective on dt
// with operation op (op only chooses the values, see valueRange).
func input(dt reduce.DType, op reduce.Op, s uint32, r, n int) []byte {
	es := dt.Size()
	k := valueRange(dt, op)
	b := make([]byte, n*es)
	for i := 0; i < n; i++ {
		reduce.PutFloat(b[i*es:], dt, float64(value(s, k, r, i)))
	}
	return b
}

// combine reduces one element's inputs vs (in rank order) with op and
// writes the result, one element of dt, to p. Each step computes what the
// reduce kernels compute, written independently of them: integers in
// 64-bit arithmetic that wraps and is then cut to the element width (equal
// to wrapping at the width at every step, modulo 2^bits); float32 and
// float64 in their own precision; float16 and bfloat16 widened to float32,
// combined, and rounded back to nearest even at every step. With the
// inputs of valueRange the order of the steps does not matter, so the
// result equals the collective's whatever order its schedule uses.
func combine(p []byte, dt reduce.DType, op reduce.Op, vs []uint64) {
	if !dt.IsFloat() {
		acc := vs[0]
		for _, v := range vs[1:] {
			switch op {
			case reduce.OpSum:
				acc += v
			case reduce.OpProd:
				acc *= v
			case reduce.OpMax:
				acc = max(acc, v) // inputs are positive: signedness does not matter
			case reduce.OpMin:
				acc = min(acc, v)
			}
		}
		putInt(p, dt.Size(), acc)
		return
	}
	acc := float64(vs[0])
	for _, v := range vs[1:] {
		switch dt {
		case reduce.Float64:
			acc = step(op, acc, float64(v))
		case reduce.Float32:
			acc = float64(step(op, float32(acc), float32(v)))
		case reduce.Float16:
			acc = float64(reduce.F16ToF32(reduce.F32ToF16(step(op, float32(acc), float32(v)))))
		case reduce.BFloat16:
			acc = float64(reduce.BF16ToF32(reduce.F32ToBF16(step(op, float32(acc), float32(v)))))
		}
	}
	reduce.PutFloat(p, dt, acc)
}

// step is one floating-point step of op in T's precision (Go rounds every
// float32 operation to float32).
func step[T float32 | float64](op reduce.Op, a, b T) T {
	switch op {
	case reduce.OpSum:
		return a + b
	case reduce.OpProd:
		return a * b
	case reduce.OpMax:
		return max(a, b)
	}
	return min(a, b)
}

// putInt writes the low size bytes of v, little-endian: v wrapped to the
// element width.
func putInt(p []byte, size int, v uint64) {
	switch size {
	case 1:
		p[0] = byte(v)
	case 4:
		binary.LittleEndian.PutUint32(p, uint32(v))
	case 8:
		binary.LittleEndian.PutUint64(p, v)
	}
}

// expected is rank r's output of collective coll over n ranks with count
// elements (NCCL's meaning of count per collective), computed element by
// element from value without the reduce kernels.
func expected(coll sched.Collective, dt reduce.DType, op reduce.Op, s uint32, n, r, count, root int) []byte {
	es := dt.Size()
	k := valueRange(dt, op)
	vs := make([]uint64, n)
	reduced := func(base, cnt int) []byte {
		out := make([]byte, cnt*es)
		for i := 0; i < cnt; i++ {
			for q := 0; q < n; q++ {
				vs[q] = value(s, k, q, base+i)
			}
			combine(out[i*es:], dt, op, vs)
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
			out = append(out, input(dt, op, s, q, count)...)
		}
		return out
	case sched.AllToAll:
		var out []byte
		for q := 0; q < n; q++ {
			out = append(out, input(dt, op, s, q, n*count)[r*count*es:(r+1)*count*es]...)
		}
		return out
	case sched.Broadcast:
		return input(dt, op, s, root, count)
	case sched.SendRecv:
		return input(dt, op, s, (r-1+n)%n, count)
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
