package scenarios

import (
	"fmt"
	"testing"

	"github.com/metaroce/metaroce/collectives/sched"
	"github.com/metaroce/metaroce/fabric/sim"
	"github.com/metaroce/metaroce/fabric/sim/agents"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestSchedPlansMatch: in the plans the simulator runs, the k-th message
// rank a sends to rank b on a channel has the length of the k-th message b
// receives from a on it, so every send meets a receive that fits it (with
// and without a grouping of the ranks by leaf).
func TestSchedPlansMatch(t *testing.T) {
	type stream struct{ from, to, ch int }
	for _, coll := range []sched.Collective{sched.AllReduce, sched.AllToAll, sched.AllGather, sched.ReduceScatter} {
		for _, n := range []int{2, 3, 8, 16} {
			group := 0
			if n%4 == 0 {
				group = 4
			}
			plans, err := schedPlans(coll, n, 1<<20, 2, group)
			require.NoError(t, err)
			sent, recv := map[stream][]int64{}, map[stream][]int64{}
			for r, p := range plans {
				for _, st := range p.Steps {
					switch st.Kind {
					case sched.KindSend:
						k := stream{r, st.Peer, st.Channel}
						require.Len(t, sent[k], st.Seq, "%v n=%d: sends of %v out of Seq order", coll, n, k)
						sent[k] = append(sent[k], st.Src.Len)
					case sched.KindRecv:
						k := stream{st.Peer, r, st.Channel}
						require.Len(t, recv[k], st.Seq, "%v n=%d: receives of %v out of Seq order", coll, n, k)
						recv[k] = append(recv[k], st.Dst.Len)
					}
				}
			}
			require.Equal(t, sent, recv, "%v n=%d", coll, n)
			require.NotEmpty(t, sent, "%v n=%d", coll, n)
		}
	}
}

// runPlans runs coll over 8 hosts of fabric c (2 leaves of 4) with proto,
// the ranks grouped by leaf, and requires that every rank finished without
// an error.
func runPlans(t *testing.T, o *Options, c sim.Config, proto string, coll sched.Collective, bytes uint64) (*sim.Sim, *planJob) {
	t.Helper()
	plans, err := schedPlans(coll, 8, bytes, schedChannels, 4)
	require.NoError(t, err)
	return runPlanJob(t, o, c, proto, plans, nil)
}

// TestPlanJobRunsEveryPlan runs small collectives over both transports on
// an 8-host fabric: every rank finishes without an error, and the
// all-to-all never has more receives posted than the real executor keeps
// in flight (receives are posted as the algorithm reaches them).
func TestPlanJobRunsEveryPlan(t *testing.T) {
	// RoCEv2 with NCCL's rendezvous, as the collective scenario runs it.
	o := Options{Seed: 3, Smoke: true, RoCERendezvous: true}
	o.fill()
	c := o.fabric(2, 2, 4, 1)
	for _, coll := range []sched.Collective{sched.AllReduce, sched.AllToAll, sched.AllGather, sched.ReduceScatter} {
		for _, proto := range []string{MetaRoCE, RoCEv2PFC} {
			t.Run(fmt.Sprintf("%v/%s", coll, proto), func(t *testing.T) {
				_, j := runPlans(t, &o, c, proto, coll, 2<<20)
				assert.Greater(t, j.End, j.Start)
				for _, h := range j.hosts {
					assert.Zero(t, h.left, "rank %d", h.id)
					assert.Zero(t, h.recvOut, "rank %d", h.id)
					if coll == sched.AllToAll {
						assert.LessOrEqual(t, h.PeakRecvs, h.plan.RecvPeers(), "rank %d", h.id)
					}
				}
			})
		}
	}
}

// TestPlanJobDeclaresSenders: like the real executor, each rank declares
// before its plan how many peers will send to it at once, at most the
// endpoint's configured bound: one for the hierarchical ring (8 ranks in
// groups of 4, from 16 KiB blocks), two for recursive halving and doubling
// (below that), the all-to-all's rounds in flight for the all-to-all (all 7
// of 8 ranks' rounds while its messages are small).
func TestPlanJobDeclaresSenders(t *testing.T) {
	base := Options{Seed: 3, Smoke: true}
	base.fill()
	c := base.fabric(2, 2, 4, 1)
	for _, tc := range []struct {
		bound int
		coll  sched.Collective
		size  uint64
		want  int
	}{
		{0, sched.AllReduce, 1 << 20, 1}, {0, sched.AllToAll, 256 << 10, 7}, {4, sched.AllToAll, 256 << 10, 4},
		{0, sched.AllReduce, 96 << 10, 2}, {0, sched.AllReduce, 256 << 10, 1}, {4, sched.AllReduce, 1 << 20, 1},
	} {
		o := Options{Seed: 3, Smoke: true, ConcurrentSenders: tc.bound}
		o.fill()
		s, _ := runPlans(t, &o, c, MetaRoCE, tc.coll, tc.size)
		for h, host := range s.Hosts() {
			ep := host.T.(*agents.MetaRoCE).EP
			assert.Equal(t, tc.want, ep.Config().ConcurrentSenders, "%v, bound %d, rank %d", tc.coll, tc.bound, h)
		}
	}
}
