package scenarios

import (
	"fmt"

	"github.com/metaroce/metaroce/collectives/reduce"
	"github.com/metaroce/metaroce/collectives/sched"
)

// metaroceChunk is the message size the collectives use over MetaRoCE
// (collectives.DefaultMetaRoCEChunkBytes; the simulator may not import the
// collectives package, which reaches the UDP driver).
const metaroceChunk = 512 << 10

// schedChannels is the collectives' default channel count over MetaRoCE
// (collectives.DefaultMetaRoCEChannels).
const schedChannels = 1

// schedPlans builds, for every rank of an n-rank collective over bytes of
// data (per rank; all-to-all: the whole send buffer), the plan the
// collectives run for real with their defaults over MetaRoCE, told that
// the ranks come in groups of group per leaf (collectives.Config.GroupSize;
// 0: not told), for planJob to execute on the simulated hosts: the
// all-to-all keeps sched.AutoAllToAllInFlight messages in flight, as
// collectives.Comm does.
func schedPlans(coll sched.Collective, n int, bytes uint64, channels, group int) ([]*sched.Plan, error) {
	cfg := sched.Config{Collective: coll, NRanks: n, DType: reduce.Uint8, Op: reduce.OpSum,
		Count: int64(bytes), Channels: channels, ChunkBytes: metaroceChunk, GroupSize: group}
	if coll == sched.AllToAll {
		cfg.Count = int64(bytes) / int64(n)
		cfg.AllToAllInFlight = sched.AutoAllToAllInFlight(cfg)
	}
	plans, err := sched.BuildAll(cfg)
	if err != nil {
		return nil, fmt.Errorf("simulated %v: %w", coll, err)
	}
	return plans, nil
}
