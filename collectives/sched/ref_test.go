package sched

import (
	"bytes"
	"encoding/binary"
	"math"
	"math/rand/v2"

	"github.com/metaroce/metaroce/collectives/reduce"
)

var ne = binary.NativeEndian

// putInt stores the small integer v as element i of a dt buffer. Every value the
// tests use is exactly representable in every type (bfloat16 included), and so
// are all the sums and products they produce, so float results are exact
// whatever order a schedule reduces in.
func putInt(b []byte, dt reduce.DType, i int64, v int64) {
	size := int64(dt.Size())
	e := b[i*size : (i+1)*size]
	switch dt {
	case reduce.Int8, reduce.Uint8:
		e[0] = byte(v)
	case reduce.Int32, reduce.Uint32:
		ne.PutUint32(e, uint32(v))
	case reduce.Int64, reduce.Uint64:
		ne.PutUint64(e, uint64(v))
	case reduce.Float16:
		ne.PutUint16(e, reduce.F32ToF16(float32(v)))
	case reduce.BFloat16:
		ne.PutUint16(e, reduce.F32ToBF16(float32(v)))
	case reduce.Float32:
		ne.PutUint32(e, math.Float32bits(float32(v)))
	case reduce.Float64:
		ne.PutUint64(e, math.Float64bits(float64(v)))
	}
}

// fillInput fills b with values chosen so that a reduction over 8 ranks stays
// exact: small integers for sum/avg/min/max, ±1 and 2 for prod (products are
// ±2^k ≤ 256 in magnitude; integer types wrap identically in any order).
func fillInput(rng *rand.Rand, b []byte, dt reduce.DType, op reduce.Op) {
	n := int64(len(b) / dt.Size())
	unsigned := dt == reduce.Uint8 || dt == reduce.Uint32 || dt == reduce.Uint64
	for i := range n {
		var v int64
		switch {
		case op == reduce.OpProd && unsigned:
			v = 1 + rng.Int64N(2)
		case op == reduce.OpProd:
			v = []int64{-1, 1, 2}[rng.IntN(3)]
		case unsigned:
			v = rng.Int64N(9)
		default:
			v = rng.Int64N(9) - 4
		}
		putInt(b, dt, i, v)
	}
}

// reduceAll is the naive reference reduction: element by element over ranks
// 0, 1, ..., n-1 in that order, then the division of an integer avg; a
// floating-point avg scales every input by 1/n first, as the plans do.
func reduceAll(inputs [][]byte, dt reduce.DType, op reduce.Op) []byte {
	n := len(inputs)
	term := func(in []byte) []byte {
		if !reduce.PreMultiplies(dt, op) {
			return in
		}
		out := make([]byte, len(in))
		if err := reduce.PreMultiply(out, in, dt, n); err != nil {
			panic(err)
		}
		return out
	}
	out := append([]byte(nil), term(inputs[0])...)
	for _, in := range inputs[1:] {
		if err := reduce.Reduce(out, term(in), dt, op); err != nil {
			panic(err)
		}
	}
	if op == reduce.OpAvg && !reduce.PreMultiplies(dt, op) {
		if err := reduce.DivideBy(out, dt, n); err != nil {
			panic(err)
		}
	}
	return out
}

// maxInput is the largest magnitude fillInput writes.
const maxInput = 4

// sameResult compares a rank's output with the reference: bit for bit, or,
// for a floating-point average, whose rounding depends on the order the
// algorithm sums in, within twice the bound each of them keeps to the exact
// mean.
func sameResult(cfg Config, got, want []byte) bool {
	if !cfg.Collective.Reduces() || !reduce.PreMultiplies(cfg.DType, cfg.Op) {
		return bytes.Equal(got, want)
	}
	tol := 2 * reduce.PreMulSumTolerance(cfg.DType, cfg.NRanks, maxInput)
	return len(got) == len(want) && reduce.CountFar(got, want, cfg.DType, tol) == 0
}

// expected returns what each rank's output region must hold after the
// collective, and where that region lies in BufRecv (element offset).
func expected(cfg Config, inputs [][]byte) (want [][]byte, at []int64) {
	n := cfg.NRanks
	esize := int64(cfg.DType.Size())
	blk := cfg.Count * esize
	want, at = make([][]byte, n), make([]int64, n)
	switch cfg.Collective {
	case AllReduce:
		all := reduceAll(inputs, cfg.DType, cfg.Op)
		for r := range n {
			want[r] = all
		}
	case ReduceScatter:
		all := reduceAll(inputs, cfg.DType, cfg.Op)
		for r := range n {
			want[r] = all[int64(r)*blk : int64(r+1)*blk]
			if cfg.InPlace {
				at[r] = int64(r) * cfg.Count
			}
		}
	case AllGather:
		var cat []byte
		for r := range n {
			cat = append(cat, inputs[r]...)
		}
		for r := range n {
			want[r] = cat
		}
	case AllToAll:
		for r := range n {
			for j := range n {
				want[r] = append(want[r], inputs[j][int64(r)*blk:int64(r+1)*blk]...)
			}
		}
	case Broadcast:
		for r := range n {
			want[r] = inputs[cfg.Root]
		}
	case SendRecv:
		for r := range n {
			want[r] = inputs[mod(r-1, n)]
		}
	case P2P:
		want[cfg.Peer] = inputs[cfg.Root]
	}
	return want, at
}

// inputBytes is the size of one rank's input for cfg.
func inputBytes(cfg Config) int64 {
	b := cfg.Count * int64(cfg.DType.Size())
	switch cfg.Collective {
	case ReduceScatter, AllToAll:
		return int64(cfg.NRanks) * b
	}
	return b
}
