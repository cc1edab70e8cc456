package sched

import (
	"bytes"
	"encoding/binary"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/metaroce/metaroce/collectives/reduce"
	"github.com/stretchr/testify/require"
)

// TestAllReduceBitIdenticalOnEveryRank: with arbitrary float inputs, whose
// sums depend on the order of addition, every rank of an all-reduce holds
// the very same bits: each element is reduced once, in one order, and the
// result is copied to the others. The reference test's exact integers
// cannot show that.
func TestAllReduceBitIdenticalOnEveryRank(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	for _, algo := range []Algorithm{AlgoRing, AlgoRecursiveDoubling, AlgoHalvingDoubling, AlgoHierarchical} {
		for _, dt := range []reduce.DType{reduce.Float32, reduce.Float64, reduce.Float16, reduce.BFloat16} {
			for _, op := range []reduce.Op{reduce.OpSum, reduce.OpAvg, reduce.OpProd} {
				for n := 2; n <= 12; n++ {
					for _, g := range divisors(n) {
						if algo != AlgoHierarchical && g != 1 {
							continue
						}
						for _, inPlace := range []bool{false, true} {
							cfg := Config{Collective: AllReduce, Algorithm: algo, NRanks: n, Count: 53, DType: dt, Op: op,
								Channels: 2, ChunkBytes: 16, InPlace: inPlace, GroupSize: g}
							plans, err := BuildAll(cfg)
							if err != nil {
								t.Fatal(err)
							}
							bufs := make([]Buffers, n)
							for r := range n {
								in := make([]byte, cfg.Count*int64(dt.Size()))
								for i := int64(0); i < cfg.Count; i++ {
									putFloat(in, dt, i, rng.Float64()*2-0.5)
								}
								if inPlace {
									bufs[r] = Buffers{Recv: in}
								} else {
									bufs[r] = Buffers{Send: in, Recv: make([]byte, len(in))}
								}
							}
							if err := Execute(plans, bufs, ExecOptions{}); err != nil {
								t.Fatal(err)
							}
							for r := 1; r < n; r++ {
								if !bytes.Equal(bufs[r].Recv, bufs[0].Recv) {
									t.Errorf("%s %s %s n=%d g=%d inplace=%v: rank %d differs from rank 0", algo, dt, op, n, g, inPlace, r)
								}
							}
						}
					}
				}
			}
		}
	}
}

func putFloat(b []byte, dt reduce.DType, i int64, v float64) {
	size := int64(dt.Size())
	e := b[i*size : (i+1)*size]
	switch dt {
	case reduce.Float16:
		binary.NativeEndian.PutUint16(e, reduce.F32ToF16(float32(v)))
	case reduce.BFloat16:
		binary.NativeEndian.PutUint16(e, reduce.F32ToBF16(float32(v)))
	case reduce.Float32:
		binary.NativeEndian.PutUint32(e, math.Float32bits(float32(v)))
	case reduce.Float64:
		binary.NativeEndian.PutUint64(e, math.Float64bits(v))
	}
}

// TestHugeCountRefused: a count whose buffers would not fit in an int64 of
// bytes is refused, not turned into a negative scratch size; recursive
// doubling's scratch is three times the buffer even at 2 ranks.
func TestHugeCountRefused(t *testing.T) {
	for _, n := range []int{1, 2, 3, 64} {
		for _, algo := range []Algorithm{AlgoRing, AlgoRecursiveDoubling, AlgoHalvingDoubling} {
			cfg := Config{Collective: AllReduce, Algorithm: algo, NRanks: n, Count: math.MaxInt64 / 2, DType: reduce.Int8}
			p, err := Build(cfg)
			if err != nil {
				require.ErrorContains(t, err, "too large")
				continue
			}
			require.GreaterOrEqual(t, p.ScratchBytes, int64(0), "%s at %d ranks", algo, n)
		}
	}
}
