package sched

import (
	"bytes"
	"fmt"
	"testing"

	"github.com/metaroce/metaroce/collectives/reduce"
)

// TestInPlaceReduceScatterKeepsOtherBlocks: an in-place reduce-scatter
// (NCCL's layout: the output is block Rank of the input) writes only that
// block; the other blocks keep the caller's data, as under NCCL, whose send
// buffer is const. The partial sums used to accumulate in those blocks.
func TestInPlaceReduceScatterKeepsOtherBlocks(t *testing.T) {
	for _, n := range []int{2, 3, 4, 5} {
		for _, dt := range []reduce.DType{reduce.Int32, reduce.Float32, reduce.Float16} {
			for _, op := range []reduce.Op{reduce.OpSum, reduce.OpMax, reduce.OpAvg} {
				for _, ch := range []int{1, 3} {
					cfg := Config{Collective: ReduceScatter, NRanks: n, Count: 37, DType: dt, Op: op, Channels: ch, ChunkBytes: 24, InPlace: true}
					t.Run(fmt.Sprintf("n%d/%v/%v/ch%d", n, dt, op, ch), func(t *testing.T) {
						plans, err := BuildAll(cfg)
						if err != nil {
							t.Fatal(err)
						}
						es := int64(dt.Size())
						blk := cfg.Count * es
						inputs := make([][]byte, n)
						bufs := make([]Buffers, n)
						for r := range n {
							inputs[r] = make([]byte, int64(n)*blk)
							for i := int64(0); i < int64(n)*cfg.Count; i++ {
								reduce.PutFloat(inputs[r][i*es:], dt, float64((int64(r)*5+i)%9+1))
							}
							bufs[r] = Buffers{Recv: append([]byte(nil), inputs[r]...)}
						}
						if err := Execute(plans, bufs, ExecOptions{Rendezvous: true}); err != nil {
							t.Fatal(err)
						}
						want, _ := expected(cfg, inputs)
						for r := range n {
							got := bufs[r].Recv[int64(r)*blk : int64(r+1)*blk]
							if !sameResult(cfg, got, want[r]) {
								t.Fatalf("rank %d: wrong result block", r)
							}
							for j := range n {
								if j == r {
									continue
								}
								lo, hi := int64(j)*blk, int64(j+1)*blk
								if !bytes.Equal(bufs[r].Recv[lo:hi], inputs[r][lo:hi]) {
									t.Fatalf("rank %d: block %d of the input was overwritten", r, j)
								}
							}
						}
					})
				}
			}
		}
	}
}
