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

// inputValue is element k of rank r's input: a small integer, so that every
// reduction of up to a few dozen ranks is exact in every data type and the
// expected result does not depend on the order of reduction. Products use
// ones and a few twos, which keeps them exact and in range.
func inputValue(op reduce.Op, r, k int) float64 {
	v := (3*r + k) % valuePeriod
	if op == reduce.OpProd {
		if v == 0 {
			return 2
		}
		return 1
	}
	return float64(v)
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

// inputTable is one period of rank r's input pattern, valuePeriod elements.
func inputTable(dt reduce.DType, op reduce.Op, r int) []byte {
	es := dt.Size()
	t := make([]byte, valuePeriod*es)
	for k := 0; k < valuePeriod; k++ {
		putValue(t[k*es:], dt, inputValue(op, r, k))
	}
	return t
}

// reducedTable is one period of the elementwise reduction of all n ranks'
// input patterns: the expected output of all-reduce (and, shifted, of
// reduce-scatter). It reduces in rank order with package reduce, which is
// exact for these inputs, then divides once for OpAvg as the collectives do.
func reducedTable(dt reduce.DType, op reduce.Op, n int) ([]byte, error) {
	acc := inputTable(dt, op, 0)
	for r := 1; r < n; r++ {
		if err := reduce.Reduce(acc, inputTable(dt, op, r), dt, op); err != nil {
			return nil, err
		}
	}
	if op == reduce.OpAvg {
		if err := reduce.DivideBy(acc, dt, n); err != nil {
			return nil, err
		}
	}
	return acc, nil
}

// rotated returns table rotated left by off elements (of es bytes), so that
// element i of the result is element (off+i) mod valuePeriod of table.
func rotated(table []byte, es int, off int64) []byte {
	s := int(off%valuePeriod) * es
	out := make([]byte, 0, len(table))
	out = append(out, table[s:]...)
	return append(out, table[:s]...)
}

// fillPattern sets element i of dst to element (off+i) mod valuePeriod of
// table. dst's length must be a multiple of the element size.
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
// (l.RecvBytes long) after collective c over n ranks whose inputs were
// inputTable(dt, op, rank). reduced is reducedTable(dt, op, n) for reducing
// collectives.
func checkOutput(c sched.Collective, l layout, recv []byte, dt reduce.DType, op reduce.Op, me, n, root int, reduced []byte) int64 {
	es := dt.Size()
	blk := l.Count * int64(es)
	switch c {
	case sched.AllReduce:
		return countWrong(recv, reduced, es, 0)
	case sched.ReduceScatter:
		return countWrong(recv, reduced, es, int64(me)*l.Count)
	case sched.Broadcast:
		return countWrong(recv, inputTable(dt, op, root), es, 0)
	case sched.SendRecv:
		return countWrong(recv, inputTable(dt, op, (me-1+n)%n), es, 0)
	case sched.AllGather:
		var w int64
		for p := 0; p < n; p++ {
			w += countWrong(recv[int64(p)*blk:int64(p+1)*blk], inputTable(dt, op, p), es, 0)
		}
		return w
	case sched.AllToAll:
		var w int64
		for p := 0; p < n; p++ {
			w += countWrong(recv[int64(p)*blk:int64(p+1)*blk], inputTable(dt, op, p), es, int64(me)*l.Count)
		}
		return w
	}
	panic(fmt.Sprintf("checkOutput: collective %v", c))
}
