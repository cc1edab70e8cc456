package main

import (
	"context"
	"fmt"
	"math"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/metaroce/metaroce/collectives/reduce"
	"github.com/metaroce/metaroce/collectives/sched"
)

var benchCollectives = []sched.Collective{sched.AllReduce, sched.ReduceScatter, sched.AllGather, sched.AllToAll, sched.Broadcast, sched.SendRecv}

// runMemSweep runs s over the in-memory reference with n ranks and returns
// rank 0's rows.
func runMemSweep(t *testing.T, g *memGroup, s sweep) ([]Row, sweepResult) {
	t.Helper()
	var rows []Row
	var res sweepResult
	var mu sync.Mutex
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	err := g.run(func(c comm) error {
		onRow := func(r Row) { rows = append(rows, r) }
		r, err := s.run(ctx, c, nil, onRow)
		if c.Rank() == 0 {
			mu.Lock()
			res = r
			mu.Unlock()
		}
		return err
	})
	require.NoError(t, err)
	return rows, res
}

func smallSweep(c sched.Collective) sweep {
	return sweep{Coll: c, Sizes: []int64{0, 4, 64, 1000, 4096}, DTypes: []reduce.DType{reduce.Float32, reduce.Int8, reduce.Float16, reduce.Float64},
		Ops: []reduce.Op{reduce.OpSum, reduce.OpProd, reduce.OpMin, reduce.OpMax, reduce.OpAvg}, Iters: 2, Warmup: 1, Check: 1,
		Average: 1, Root: 1, Timeout: 10 * time.Second}
}

// TestSweepReferenceCorrect runs every collective, data type and operation
// through the reference communicator: the checker must find nothing wrong,
// and every row must carry the layout's sizes. Size 0 is the first row of
// every type and operation, with a count of 0.
func TestSweepReferenceCorrect(t *testing.T) {
	for _, n := range []int{2, 3, 4} {
		for _, c := range benchCollectives {
			t.Run(fmt.Sprintf("%v/n%d", c, n), func(t *testing.T) {
				s := smallSweep(c)
				if !c.Reduces() {
					s.Ops = []reduce.Op{reduce.OpSum}
				}
				rows, res := runMemSweep(t, newMemGroup(n), s)
				require.NotEmpty(t, rows)
				assert.Zero(t, res.OutOfBounds)
				zero := 0
				for _, r := range rows {
					assert.Zero(t, r.OutOfPlace.Wrong, "%+v", r)
					assert.Zero(t, r.InPlace.Wrong, "%+v", r)
					if r.Bytes == 0 {
						zero++
						assert.Zero(t, r.Count, "%+v", r)
					}
					dt, err := reduce.ParseDType(r.Type)
					require.NoError(t, err)
					// nccl-tests' count: the call's count argument,
					// one rank's block for the blocked collectives.
					blocks := int64(1)
					switch c {
					case sched.ReduceScatter, sched.AllGather, sched.AllToAll:
						blocks = int64(n)
					}
					assert.Equal(t, r.Bytes, blocks*r.Count*int64(dt.Size()))
					if c == sched.Broadcast {
						assert.Equal(t, 1, r.Root)
					} else {
						assert.Equal(t, -1, r.Root)
					}
					if !c.Reduces() {
						assert.Equal(t, "none", r.RedOp)
					}
				}
				assert.Equal(t, len(s.DTypes)*len(s.Ops), zero, "one row of size 0 per type and operation")
			})
		}
	}
}

// TestSweepDetectsWrongElements damages outputs in known ways: the counts
// must match exactly, so the checker can fail. The row of size 0 has no
// element to damage.
func TestSweepDetectsWrongElements(t *testing.T) {
	for _, c := range benchCollectives {
		t.Run(c.String(), func(t *testing.T) {
			g := newMemGroup(3)
			g.corrupt = func(rank int, k call, recv []byte) {
				if rank == 2 && !k.InPlace && k.DType == reduce.Float32 && k.Count > 0 {
					recv[0] ^= 0x40 // one element of rank 2's output
				}
			}
			s := smallSweep(c)
			s.Ops = []reduce.Op{reduce.OpSum}
			s.DTypes = []reduce.DType{reduce.Float32}
			rows, _ := runMemSweep(t, g, s)
			require.NotEmpty(t, rows)
			for _, r := range rows {
				want := int64(1)
				if r.Bytes == 0 {
					want = 0
				}
				assert.Equal(t, want, r.OutOfPlace.Wrong, "%+v", r)
				assert.Zero(t, r.InPlace.Wrong, "%+v", r)
			}
		})
	}
}

// TestSweepDetectsOutOfBounds writes one byte past the receive buffer.
func TestSweepDetectsOutOfBounds(t *testing.T) {
	g := newMemGroup(2)
	g.corrupt = func(rank int, k call, recv []byte) {
		if rank == 1 && !k.InPlace && k.DType == reduce.Float32 && cap(recv) > len(recv) {
			recv[:len(recv)+1][len(recv)] = 0
		}
	}
	s := smallSweep(sched.AllReduce)
	s.DTypes, s.Ops = []reduce.DType{reduce.Float32}, []reduce.Op{reduce.OpSum}
	rows, res := runMemSweep(t, g, s)
	assert.Equal(t, int64(len(rows)), res.OutOfBounds)
}

// TestSweepUncheckedReportsNA: -c 0 leaves #wrong unknown (-1).
func TestSweepUncheckedReportsNA(t *testing.T) {
	s := smallSweep(sched.AllReduce)
	s.Check = 0
	s.DTypes, s.Ops = []reduce.DType{reduce.Float32}, []reduce.Op{reduce.OpSum}
	rows, _ := runMemSweep(t, newMemGroup(2), s)
	for _, r := range rows {
		assert.Equal(t, int64(-1), r.OutOfPlace.Wrong)
		assert.Contains(t, formatRow(r), "N/A")
	}
}

func TestSweepRejectsBadRoot(t *testing.T) {
	s := smallSweep(sched.Broadcast)
	s.Root = 5
	err := newMemGroup(2).run(func(c comm) error {
		_, err := s.run(context.Background(), c, nil, nil)
		return err
	})
	assert.ErrorContains(t, err, "root 5")
}

func TestCombineTimes(t *testing.T) {
	ts := []float64{4, 1, 7, 4}
	get := func(r int) float64 { return ts[r] }
	for _, tc := range []struct {
		mode int
		want float64
	}{{0, 4}, {1, 4}, {2, 1}, {3, 7}} {
		assert.Equal(t, tc.want, combineTimes(tc.mode, len(ts), get), "mode %d", tc.mode)
	}
}

// failDoneComm is a comm that refuses every call whose context is already
// done, as a transport does when it looks at the deadline first.
type failDoneComm struct{ comm }

func (c failDoneComm) Collective(ctx context.Context, k call, send, recv []byte) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	return c.comm.Collective(ctx, k, send, recv)
}

// TestSweepLongTimeout: a timeout long enough to mean "none" times the
// iterations of a batch exceeds what a time.Duration holds; the batch's
// deadline stays that far away instead of wrapping around into the past,
// which failed every batch at once.
func TestSweepLongTimeout(t *testing.T) {
	s := smallSweep(sched.AllReduce)
	s.Sizes, s.DTypes, s.Ops = []int64{64}, []reduce.DType{reduce.Float32}, []reduce.Op{reduce.OpSum}
	s.Iters, s.Warmup = 20, 2
	s.Timeout = 1000000 * time.Hour // -T 1000000h: 20 of them overflow
	g := newMemGroup(2)
	err := g.run(func(c comm) error {
		_, err := s.run(context.Background(), failDoneComm{c}, nil, nil)
		return err
	})
	require.NoError(t, err)
	assert.Equal(t, time.Duration(math.MaxInt64), batchTimeout(s.Timeout, s.Iters))
	assert.Equal(t, 3*time.Second, batchTimeout(time.Second, 3))
	assert.Equal(t, time.Second, batchTimeout(time.Second, 0), "a batch of no iterations still gets one timeout")
}
