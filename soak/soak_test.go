package soak

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/metaroce/metaroce/collectives/reduce"
	"github.com/metaroce/metaroce/collectives/sched"
	"github.com/metaroce/metaroce/transport"
	"github.com/metaroce/metaroce/transport/udp"
	"github.com/stretchr/testify/require"
)

// TestReferenceAgainstHandWorked pins the reference on cases worked out
// apart from it (value's hash evaluated in another language), so that a
// wrong reference cannot hide a wrong collective.
func TestReferenceAgainstHandWorked(t *testing.T) {
	// Salt 0. Values 1..3 (k = 3), elements 0..2: rank 0 has 1,2,2 and
	// rank 1 has 2,3,3.
	got := expected(sched.AllReduce, reduce.Int32, reduce.OpSum, 0, 2, 0, 3, 0)
	require.Equal(t, []byte{3, 0, 0, 0, 5, 0, 0, 0, 5, 0, 0, 0}, got)
	got = expected(sched.AllReduce, reduce.Int8, reduce.OpProd, 0, 2, 1, 2, 0)
	require.Equal(t, []byte{2, 6}, got)
	got = expected(sched.SendRecv, reduce.Uint8, reduce.OpSum, 0, 2, 0, 2, 0)
	require.Equal(t, []byte{2, 3}, got, "rank 0 receives rank 1's input")
	got = expected(sched.AllGather, reduce.Uint8, reduce.OpSum, 0, 2, 1, 1, 0)
	require.Equal(t, []byte{1, 2}, got)
	// Floating-point products take values 1..2 (k = 2): rank 0 has
	// 1,2,1,2 and rank 1 has 2,2,2,1; half 2.0 is 0x4000, 4.0 0x4400.
	got = expected(sched.AllReduce, reduce.Float16, reduce.OpProd, 0, 2, 0, 4, 0)
	require.Equal(t, []byte{0, 0x40, 0, 0x44, 0, 0x40, 0, 0x40}, got)

	// 64 ranks, element 0: the inputs (k = 3) sum to 134, which int8
	// wraps to -122 (byte 0x86); their product is 0x40000000 modulo 2^32.
	// With k = 2, 35 ranks contribute 2: the product is 2^35, bfloat16
	// 0x5100, and beyond float16's range (+Inf, 0x7c00).
	require.Equal(t, []byte{0x86}, expected(sched.AllReduce, reduce.Int8, reduce.OpSum, 0, 64, 0, 1, 0))
	require.Equal(t, []byte{0, 0, 0, 0x40}, expected(sched.AllReduce, reduce.Uint32, reduce.OpProd, 0, 64, 0, 1, 0))
	require.Equal(t, []byte{0, 0x51}, expected(sched.AllReduce, reduce.BFloat16, reduce.OpProd, 0, 64, 0, 1, 0))
	require.Equal(t, []byte{0, 0x7c}, expected(sched.AllReduce, reduce.Float16, reduce.OpProd, 0, 64, 0, 1, 0))
}

// TestReferenceMatchesKernelsInAnyOrder reduces the ranks' inputs with the
// real kernels (reduce.Reduce) in the orders a schedule may use (rank
// order, reversed, every ring rotation, a pairwise tree) and checks that
// each order gives the reference's result, for every element type and
// operation the soak draws and for rank counts up to MaxRanks. Before,
// the reference computed in float64 and rounded once, which differed from
// the kernels' per-step rounding in bfloat16 products from about 24 ranks
// and from their wrapping in int32 products at 64 ranks.
func TestReferenceMatchesKernelsInAnyOrder(t *testing.T) {
	const count = 37 // a SIMD body and a tail
	for _, n := range []int{2, 3, 4, 7, 16, 23, 24, 25, 31, 32, 48, 63, MaxRanks} {
		orders := [][]int{identity(n), reversed(identity(n))}
		for k := 1; k < n; k++ {
			orders = append(orders, append(identity(n)[k:], identity(n)[:k]...))
		}
		for _, dt := range reduce.AllDTypes() {
			for _, op := range []reduce.Op{reduce.OpSum, reduce.OpProd, reduce.OpMax, reduce.OpMin} {
				for _, salt := range []uint32{0, 1, 0xdeadbeef} {
					want := expected(sched.AllReduce, dt, op, salt, n, 0, count, 0)
					ins := make([][]byte, n)
					for r := range ins {
						ins[r] = input(dt, op, salt, r, count)
					}
					for _, order := range orders {
						acc := append([]byte(nil), ins[order[0]]...)
						for _, r := range order[1:] {
							require.NoError(t, reduce.Reduce(acc, ins[r], dt, op))
						}
						if !bytes.Equal(acc, want) {
							t.Fatalf("%d ranks, %v %v, salt %#x, order %v: kernels give % x, reference % x", n, dt, op, salt, order, acc, want)
						}
					}
					if got := tree(t, ins, dt, op); !bytes.Equal(got, want) {
						t.Fatalf("%d ranks, %v %v, salt %#x, pairwise tree: kernels give % x, reference % x", n, dt, op, salt, got, want)
					}
				}
			}
		}
	}
}

// tree reduces ins pairwise: (0,1), (2,3), …, then the pairs' results, as
// a reduction tree does.
func tree(t *testing.T, ins [][]byte, dt reduce.DType, op reduce.Op) []byte {
	level := make([][]byte, len(ins))
	for i := range ins {
		level[i] = append([]byte(nil), ins[i]...)
	}
	for len(level) > 1 {
		var next [][]byte
		for i := 0; i < len(level); i += 2 {
			if i+1 < len(level) {
				require.NoError(t, reduce.Reduce(level[i], level[i+1], dt, op))
			}
			next = append(next, level[i])
		}
		level = next
	}
	return level[0]
}

func identity(n int) []int {
	s := make([]int, n)
	for i := range s {
		s[i] = i
	}
	return s
}

func reversed(s []int) []int {
	out := make([]int, len(s))
	for i, v := range s {
		out[len(s)-1-i] = v
	}
	return out
}

// TestInputsVaryWithinARank: one rank's elements are not all equal, so a
// misplaced element cannot pass for the right one.
func TestInputsVaryWithinARank(t *testing.T) {
	for _, k := range []uint32{2, 3} {
		seen := map[uint64]bool{}
		for i := 0; i < 16; i++ {
			seen[value(0, k, 0, i)] = true
		}
		require.Len(t, seen, int(k), "values 1..%d within rank 0", k)
	}
}

// TestSoakShort runs the soak for a few seconds: every round kind at least
// once, no corrupted result, every failure surfaced, nothing leaked.
func TestSoakShort(t *testing.T) {
	if testing.Short() {
		t.Skip("soak takes about 10 s")
	}
	rep, err := Run(context.Background(), Options{Duration: 8 * time.Second, Seed: 3, OpsPerRound: 12, MaxCount: 1 << 15, Logf: t.Logf})
	require.NoError(t, err)
	t.Log(rep)
	for _, e := range rep.FirstErrors {
		t.Log(e)
	}
	require.Zero(t, rep.Corrupted)
	require.Zero(t, rep.Unexpected)
	require.Zero(t, rep.MissedKills)
	require.Positive(t, rep.Ops)
	require.LessOrEqual(t, rep.GoroutinesAfter, rep.GoroutinesBefore, "goroutines leaked")
	require.LessOrEqual(t, rep.FDsAfter, rep.FDsBefore, "file descriptors leaked")
}

// TestJudge: in a kill round only a dead-peer error at the victim's last
// op or later is the expected one; an earlier failure, which loss rather
// than the kill caused, and any other kind of error are unexpected.
func TestJudge(t *testing.T) {
	const victim, killAt = 1, 5
	// The shape of a survivor's error: the soak's op, the collective's
	// step, the datapath's peer, the core's connection error.
	peerErr := func(op int, core error) rankResult {
		err := fmt.Errorf("op %d (allreduce): %w", op, fmt.Errorf("collectives: AllReduce on rank 0: receiving from rank 1 (channel 0, message 3): %w",
			&udp.PeerError{Err: &transport.ConnError{Conn: 1, Remote: 2, Err: core}}))
		return rankResult{err: err, failedOp: op}
	}
	other := func(op int, err error) rankResult {
		return rankResult{err: fmt.Errorf("op %d: %w", op, err), failedOp: op}
	}
	for _, tc := range []struct {
		name         string
		kill         bool
		r            int
		x            rankResult
		launchFailed bool
		ctxErr       error
		want         verdict
	}{
		{"victim", true, victim, rankResult{failedOp: -1}, false, nil, verdictFine},
		{"survivor without error", true, 0, rankResult{failedOp: -1}, false, nil, verdictMissed},
		{"survivor of a failed launch", true, 0, rankResult{failedOp: -1}, true, nil, verdictFine},
		{"closed at the kill", true, 0, peerErr(killAt, transport.ErrClosed), false, nil, verdictSurfaced},
		{"closed at the victim's last op", true, 0, peerErr(killAt-1, transport.ErrClosed), false, nil, verdictSurfaced},
		{"silent after the kill", true, 2, peerErr(killAt+3, transport.ErrPeerDead), false, nil, verdictSurfaced},
		{"dead peer before the kill", true, 0, peerErr(killAt-2, transport.ErrPeerDead), false, nil, verdictUnexpected},
		{"mismatch after the kill", true, 0, other(killAt+1, errors.New("ranks disagree on the call")), false, nil, verdictUnexpected},
		{"call timeout after the kill", true, 0, other(killAt, context.DeadlineExceeded), false, nil, verdictUnexpected},
		{"not connected", true, 0, rankResult{err: errors.New("not every rank connected"), failedOp: -1}, false, nil, verdictUnexpected},
		{"error without a kill", false, 0, peerErr(3, transport.ErrClosed), false, nil, verdictUnexpected},
		{"no error without a kill", false, 0, rankResult{failedOp: -1}, false, nil, verdictFine},
		{"interrupted", false, 0, peerErr(3, transport.ErrClosed), false, context.Canceled, verdictInterrupted},
		{"interrupted kill round", true, 0, rankResult{failedOp: -1}, false, context.Canceled, verdictInterrupted},
	} {
		v, at := -1, 0
		if tc.kill {
			v, at = victim, killAt
		}
		require.Equal(t, tc.want, judge(tc.kill, v, at, tc.r, tc.x, tc.launchFailed, tc.ctxErr), tc.name)
	}
}

// TestNoWorkIsUnhealthy: a run that checked nothing proves nothing.
func TestNoWorkIsUnhealthy(t *testing.T) {
	require.False(t, (&Report{}).Healthy())
	rep, err := Run(context.Background(), Options{Duration: time.Nanosecond})
	require.NoError(t, err)
	require.Zero(t, rep.Rounds)
	require.False(t, rep.Healthy())
	require.Contains(t, rep.String(), "healthy false (nothing was checked")
}

func TestRunRejectsBadOptions(t *testing.T) {
	for _, opt := range []Options{{Duration: -time.Second}, {Ranks: 1}, {Ranks: MaxRanks + 1}, {Ranks: -2}} {
		_, err := Run(context.Background(), opt)
		require.Error(t, err, "%+v", opt)
	}
}

// TestInterruptedRoundIsNotJudged cancels the run's context once the
// ranks of a round have connected: the errors that follow are the
// interruption's, not findings, and the report says it was interrupted.
func TestInterruptedRoundIsNotJudged(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	opt := Options{OpsPerRound: 6, MaxCount: 4096}.withDefaults()
	rep := &Report{}
	spec := driverSpec(rep, opt, Fault{Name: "clean"})
	spec.start = func() error { cancel(); return nil }
	require.NoError(t, round(ctx, rep, opt, spec, 9))
	require.Zero(t, rep.Unexpected, "%v", rep.FirstErrors)
	require.Zero(t, rep.MissedKills)

	rep, err := Run(ctx, Options{})
	require.NoError(t, err)
	require.True(t, rep.Interrupted)
	require.False(t, rep.Healthy())
	require.Contains(t, rep.String(), "interrupted")
}
