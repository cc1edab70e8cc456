package main

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"math"

	"github.com/metaroce/metaroce/collectives/reduce"
	"github.com/metaroce/metaroce/collectives/sched"
)

// valuePeriod is the period, in elements, of every rank's input pattern. A
// prime keeps the pattern out of step with power-of-two block boundaries, so
// a block landing at the wrong offset shows up as wrong elements.
const valuePeriod = 7

// inputs describes the input patterns of one table row: every rank's
// input repeats a period of valuePeriod small integers, chosen so that the
// expected output is exact and does not depend on the order in which the
// collective reduces (a ring, a tree and RCCL all reduce in different
// orders), and so that, where nothing is reduced, ranks send different data.
type inputs struct {
	dt      reduce.DType
	op      reduce.Op
	n       int  // ranks
	reduces bool // the collective reduces (all-reduce, reduce-scatter)
}

// exactInts is the largest integer up to which every integer is exact in
// dt (for the signed integer types, the largest positive value).
func exactInts(dt reduce.DType) int {
	switch dt {
	case reduce.Int8:
		return math.MaxInt8
	case reduce.Uint8:
		return math.MaxUint8
	case reduce.BFloat16:
		return 1 << 8
	case reduce.Float16:
		return 1 << 11
	case reduce.Float32:
		return 1 << 24
	}
	return math.MaxInt32
}

// period is the number of elements after which every rank's input pattern
// repeats: valuePeriod, or valuePeriod × n for a floating-point average (see
// value).
func (in inputs) period() int {
	if in.preMul() && in.n > 1 {
		return valuePeriod * in.n
	}
	return valuePeriod
}

// value is element k (0 <= k < in.period()) of rank r's input.
//   - Floating-point averages: element k is nonzero on rank k mod n alone,
//     an integer 1..6. Such an average scales each input by 1/n, rounded to
//     the type, and sums: with a single nonzero term the sum adds exact
//     zeros only, so the result is that term, the same in every order of
//     reduction, and a missing or doubled rank shows in every n-th element.
//     (Several nonzero terms would round differently in different orders,
//     and past a few ranks that rounding hides a rank's share of the mean.)
//   - Products: ones and a few twos, exact and in range, or overflowing to
//     the same result in any order.
//   - Sums and averages: integers below m, with m small enough that no
//     partial sum passes exactInts (beyond 256 ranks in bfloat16, only the
//     first 256 ranks contribute). Integer types wrap, which is exact in
//     any order, so only the floating-point types shrink m.
//   - Min, max and the collectives that reduce nothing: integers unique to
//     each group of valuePeriod ranks up to exactInts, so that a block from
//     the wrong rank shows up as wrong elements.
func (in inputs) value(r, k int) float64 {
	base := (3*r + k) % valuePeriod
	switch {
	case in.preMul() && in.n > 1:
		if k%in.n != r {
			return 0
		}
		return float64(1 + (k/in.n)%6)
	case in.reduces && in.op == reduce.OpProd:
		if base == 0 {
			return 2
		}
		return 1
	case in.reduces && (in.op == reduce.OpSum || in.op == reduce.OpAvg):
		if !in.dt.IsFloat() {
			return float64(base)
		}
		limit := exactInts(in.dt)
		m := valuePeriod
		if in.n*(m-1) > limit {
			m = max(2, limit/in.n+1)
		}
		if in.n*(m-1) > limit && r >= limit {
			return 0
		}
		return float64(base % m)
	}
	groups := max(1, (exactInts(in.dt)-valuePeriod+1)/valuePeriod)
	return float64(base + valuePeriod*((r/valuePeriod)%groups))
}

// putValue stores the small integer v as one element of type dt in host byte
// order.
func putValue(b []byte, dt reduce.DType, v float64) {
	e := binary.NativeEndian
	switch dt {
	case reduce.Int8, reduce.Uint8:
		b[0] = byte(int8(v))
	case reduce.Int32, reduce.Uint32:
		e.PutUint32(b, uint32(int32(v)))
	case reduce.Int64, reduce.Uint64:
		e.PutUint64(b, uint64(int64(v)))
	case reduce.Float16:
		e.PutUint16(b, reduce.F32ToF16(float32(v)))
	case reduce.BFloat16:
		e.PutUint16(b, reduce.F32ToBF16(float32(v)))
	case reduce.Float32:
		e.PutUint32(b, math.Float32bits(float32(v)))
	case reduce.Float64:
		e.PutUint64(b, math.Float64bits(v))
	default:
		panic(fmt.Sprintf("putValue: invalid dtype %d", dt))
	}
}

// table is one period of rank r's input pattern, in.period() elements.
func (in inputs) table(r int) []byte {
	es, p := in.dt.Size(), in.period()
	t := make([]byte, p*es)
	for k := 0; k < p; k++ {
		putValue(t[k*es:], in.dt, in.value(r, k))
	}
	return t
}

// reduced is one period of the elementwise reduction of all the ranks'
// input patterns: the expected output of all-reduce (and, shifted, of
// reduce-scatter). It reduces in rank order with package reduce, which is
// exact for these inputs, then divides once for an integer OpAvg as the
// collectives do. A floating-point OpAvg scales every input by 1/n first,
// as NCCL and the collectives do, which value's inputs keep exact too.
func (in inputs) reduced() ([]byte, error) {
	premul := in.preMul()
	term := func(r int) ([]byte, error) {
		t := in.table(r)
		if premul {
			return t, reduce.PreMultiply(t, t, in.dt, in.n)
		}
		return t, nil
	}
	acc, err := term(0)
	if err != nil {
		return nil, err
	}
	for r := 1; r < in.n; r++ {
		t, err := term(r)
		if err != nil {
			return nil, err
		}
		if err := reduce.Reduce(acc, t, in.dt, in.op); err != nil {
			return nil, err
		}
	}
	if in.op == reduce.OpAvg && !premul {
		if err := reduce.DivideBy(acc, in.dt, in.n); err != nil {
			return nil, err
		}
	}
	return acc, nil
}

// preMul reports whether the row averages a floating-point type, which
// pre-multiplies: its inputs follow their own pattern (see value).
func (in inputs) preMul() bool { return in.reduces && reduce.PreMultiplies(in.dt, in.op) }

// rotated returns table rotated left by off elements (of es bytes), so that
// element i of the result is element (off+i) mod p of table, p being the
// table's length in elements (its period).
func rotated(table []byte, es int, off int64) []byte {
	s := int(off%int64(len(table)/es)) * es
	out := make([]byte, 0, len(table))
	out = append(out, table[s:]...)
	return append(out, table[:s]...)
}

// fillPattern sets element i of dst to element (off+i) mod p of table (p
// elements long). dst's length must be a multiple of the element size.
func fillPattern(dst, table []byte, es int, off int64) {
	if len(dst) == 0 {
		return
	}
	pat := rotated(table, es, off)
	n := copy(dst, pat)
	for n < len(dst) {
		n += copy(dst[n:], dst[:n]) // doubling: whole periods each time
	}
}

// countWrong counts the elements of got that differ from the pattern
// fillPattern(table, off) would write: a bytewise comparison per period,
// element by element only inside periods that differ.
func countWrong(got, table []byte, es int, off int64) int64 {
	pat := rotated(table, es, off)
	var wrong int64
	for len(got) > 0 {
		n := min(len(pat), len(got))
		if !bytes.Equal(got[:n], pat[:n]) {
			for i := 0; i < n; i += es {
				if !bytes.Equal(got[i:i+es], pat[i:i+es]) {
					wrong++
				}
			}
		}
		got = got[n:]
	}
	return wrong
}

// guardBytes is the size of the sentinel area after each receive region; a
// collective that writes into it is counted as out of bounds.
const guardBytes = 64

// sentinel is the byte value of never-written memory. As an element of any
// type it differs from every expected value.
const sentinel = 0xA5

func fillSentinel(b []byte) {
	for i := range b {
		b[i] = sentinel
	}
}

// countClobbered counts the bytes of b that are no longer the sentinel.
func countClobbered(b []byte) int64 {
	var n int64
	for _, x := range b {
		if x != sentinel {
			n++
		}
	}
	return n
}

// checkOutput counts the wrong elements of rank me's receive buffer recv
// (l.RecvBytes long) after collective c over in.n ranks whose inputs were
// in.table(rank). reduced is in.reduced() for reducing collectives.
func checkOutput(c sched.Collective, l layout, recv []byte, in inputs, me, root int, reduced []byte) int64 {
	es, n := in.dt.Size(), in.n
	blk := l.Count * int64(es)
	switch c {
	case sched.AllReduce:
		return countWrong(recv, reduced, es, 0)
	case sched.ReduceScatter:
		return countWrong(recv, reduced, es, int64(me)*l.Count)
	case sched.Broadcast:
		return countWrong(recv, in.table(root), es, 0)
	case sched.SendRecv:
		return countWrong(recv, in.table((me-1+n)%n), es, 0)
	case sched.AllGather:
		var w int64
		for p := 0; p < n; p++ {
			w += countWrong(recv[int64(p)*blk:int64(p+1)*blk], in.table(p), es, 0)
		}
		return w
	case sched.AllToAll:
		var w int64
		for p := 0; p < n; p++ {
			w += countWrong(recv[int64(p)*blk:int64(p+1)*blk], in.table(p), es, int64(me)*l.Count)
		}
		return w
	}
	panic(fmt.Sprintf("checkOutput: collective %v", c))
}
