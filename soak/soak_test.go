package soak

import (
	"context"
	"testing"
	"time"

	"github.com/metaroce/metaroce/collectives/reduce"
	"github.com/metaroce/metaroce/collectives/sched"
	"github.com/stretchr/testify/require"
)

// TestReferenceAgainstHandWorked pins the reference on a case worked by
// hand, so that a wrong reference cannot hide a wrong collective.
func TestReferenceAgainstHandWorked(t *testing.T) {
	// salt 0, 2 ranks: rank 0 inputs 1,1,1,…(i*3 ≡ 0 mod 3) → (0+3i)%3+1 = 1;
	// rank 1 inputs (7+3i)%3+1 = 2.
	got := expected(sched.AllReduce, reduce.Int32, reduce.OpSum, 0, 2, 0, 3, 0)
	require.Equal(t, []byte{3, 0, 0, 0, 3, 0, 0, 0, 3, 0, 0, 0}, got)
	got = expected(sched.AllReduce, reduce.Int8, reduce.OpProd, 0, 2, 1, 2, 0)
	require.Equal(t, []byte{2, 2}, got)
	got = expected(sched.SendRecv, reduce.Uint8, reduce.OpSum, 0, 2, 0, 2, 0)
	require.Equal(t, []byte{2, 2}, got, "rank 0 receives rank 1's input")
	got = expected(sched.AllGather, reduce.Uint8, reduce.OpSum, 0, 2, 1, 1, 0)
	require.Equal(t, []byte{1, 2}, got)
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
