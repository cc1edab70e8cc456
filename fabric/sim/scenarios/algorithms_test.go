package scenarios

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/metaroce/metaroce/collectives/reduce"
	"github.com/metaroce/metaroce/collectives/sched"
)

// allReduceTime runs one all-reduce of size bytes per rank with algo on the
// collective scenario's 64-host fabric (seed 1, no loss) and returns its
// completion time in µs.
func allReduceTime(t *testing.T, proto string, algo sched.Algorithm, size uint64) float64 {
	t.Helper()
	o := Options{Seed: 1}
	o.fill()
	o.ConcurrentSenders = schedInFlight * schedChannels
	o.RoCERendezvous = true
	r := &runner{o: &o}
	s, err := build(&o, o.fabric(8, 8, 8, 1), proto)
	require.NoError(t, err)
	plans, err := sched.BuildAll(sched.Config{Collective: sched.AllReduce, Algorithm: algo, NRanks: 64,
		DType: reduce.Uint8, Op: reduce.OpSum, Count: int64(size), Channels: schedChannels, ChunkBytes: metaroceChunk})
	require.NoError(t, err)
	j := newPlanJob(s, plans)
	r.runApps(s, j.apps(), 2_000_000_000, j.done)
	require.NoError(t, j.Err)
	require.Equal(t, 64, j.Finished, "%s %s %d B: not every rank finished", proto, algo, size)
	return float64(j.End-j.Start) / 1e3
}

// TestAllReduceAlgorithms measures where recursive halving and doubling and
// the ring cross over on the simulated 64-host fabric over MetaRoCE, which
// sched.AutoHalvingMaxBlockBytes is set from: halving is ahead while the
// latency of the ring's 126 steps dominates (1 and 4 MiB: 16 and 64 KiB
// blocks) and behind once the bandwidth term does (16 MiB), and the
// automatic choice takes the faster one at each of these sizes.
func TestAllReduceAlgorithms(t *testing.T) {
	if testing.Short() {
		t.Skip("64-host simulations")
	}
	for _, size := range []uint64{1 << 20, 4 << 20, 16 << 20} {
		ring := allReduceTime(t, MetaRoCE, sched.AlgoRing, size)
		halving := allReduceTime(t, MetaRoCE, sched.AlgoHalvingDoubling, size)
		auto := sched.ChooseAlgorithm(sched.AllReduce, 64, int64(size))
		t.Logf("%2d MiB: ring %7.1f µs, halving %7.1f µs, auto picks %s", size>>20, ring, halving, auto)
		faster := sched.AlgoRing
		if halving < ring {
			faster = sched.AlgoHalvingDoubling
		}
		require.Equal(t, faster, auto, "%d MiB over 64 ranks", size>>20)
	}
}
