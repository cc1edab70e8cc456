package scenarios

import (
	"testing"

	"github.com/metaroce/metaroce/collectives/sched"
	"github.com/stretchr/testify/require"
)

// TestSchedProgsMatch: in every program made from a real schedule, the k-th
// message host a sends to host b has the length of the k-th message b
// receives from a, so every send meets a receive that fits it.
func TestSchedProgsMatch(t *testing.T) {
	for _, coll := range []sched.Collective{sched.AllReduce, sched.AllToAll, sched.AllGather, sched.ReduceScatter} {
		for _, n := range []int{2, 3, 8, 16} {
			progs, err := schedProgs(coll, n, 1<<20, 2)
			require.NoError(t, err)
			sent := map[[2]int][]uint64{}
			recv := map[[2]int][]uint64{}
			for h, prog := range progs {
				for _, st := range prog {
					for _, x := range st.sends {
						sent[[2]int{h, x.peer}] = append(sent[[2]int{h, x.peer}], x.bytes)
					}
					for _, x := range st.recvs {
						recv[[2]int{x.peer, h}] = append(recv[[2]int{x.peer, h}], x.bytes)
					}
				}
			}
			require.Equal(t, sent, recv, "%v n=%d", coll, n)
			require.NotEmpty(t, sent, "%v n=%d", coll, n)
		}
	}
}
