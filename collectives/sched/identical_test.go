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

// TestReduceScatterAverageScratch: an out-of-place reduce-scatter average
// scales its input piece by piece into two block-sized slots, so its
// scratch stays at four blocks whatever the rank count (it held the whole
// scaled input, n+2 blocks, before), and the largest counts it cannot
// address are refused rather than wrapped to a negative size.
func TestReduceScatterAverageScratch(t *testing.T) {
	for _, n := range []int{2, 3, 8, 64} {
		cfg := Config{Collective: ReduceScatter, NRanks: n, Count: 1000, DType: reduce.Float16, Op: reduce.OpAvg, ChunkBytes: 256}
		p, err := Build(cfg)
		require.NoError(t, err)
		require.Equal(t, int64(4*1000*2), p.ScratchBytes, "%d ranks", n)
		premul := 0
		for i := range p.Steps {
			if p.Steps[i].Kind == KindPreMul {
				premul++
			}
		}
		require.Equal(t, n*((1000*2+255)/256), premul, "%d ranks: one scaling step per input piece", n)
	}
	for _, n := range []int{2, 4, 8} {
		cfg := Config{Collective: ReduceScatter, NRanks: n, Count: math.MaxInt64 / 8, DType: reduce.Float16, Op: reduce.OpAvg, ChunkBytes: math.MaxInt64, Channels: 1}
		p, err := Build(cfg)
		if err != nil {
			require.ErrorContains(t, err, "too large")
			continue
		}
		require.GreaterOrEqual(t, p.ScratchBytes, int64(0), "%d ranks", n)
	}
}

// TestAverageScalesFirstNeededChunkFirst: with the scaling steps ordered by
// first use, an executor that runs the most recently readied step first (as
// the collectives' does) sends its first message after scaling one chunk,
// on every rank, rather than most of the input.
func TestAverageScalesFirstNeededChunkFirst(t *testing.T) {
	for _, inPlace := range []bool{false, true} {
		cfg := Config{Collective: AllReduce, Algorithm: AlgoRing, NRanks: 4, Count: 1 << 18, DType: reduce.Float32,
			Op: reduce.OpAvg, ChunkBytes: 16 << 10, InPlace: inPlace}
		plans, err := BuildAll(cfg)
		require.NoError(t, err)
		require.NoError(t, Validate(plans))
		for _, p := range plans {
			waiting := make([]int, len(p.Steps))
			users := make([][]int, len(p.Steps))
			var ready []int
			for i := range p.Steps {
				waiting[i] = len(p.Steps[i].Deps)
				for _, d := range p.Steps[i].Deps {
					users[d] = append(users[d], i)
				}
				if waiting[i] == 0 {
					ready = append(ready, i)
				}
			}
			scaled := 0
			for len(ready) > 0 {
				i := ready[len(ready)-1]
				ready = ready[:len(ready)-1]
				k := p.Steps[i].Kind
				if k == KindSend {
					break
				}
				if k == KindRecv {
					continue // posted; completes later
				}
				if k == KindPreMul {
					scaled++
				}
				for _, u := range users[i] {
					if waiting[u]--; waiting[u] == 0 {
						ready = append(ready, u)
					}
				}
			}
			require.LessOrEqual(t, scaled, 1, "in place %v rank %d: chunks scaled before the first send", inPlace, p.Rank)
		}
	}
}
