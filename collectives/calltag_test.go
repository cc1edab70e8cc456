package collectives

import (
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/metaroce/metaroce/collectives/reduce"
	"github.com/metaroce/metaroce/collectives/sched"
)

// TestCallTag: the tag is the same for calls that pair (whatever the rank,
// the place, or settings that do not change the messages) and differs
// where the ranks must agree: the call's arguments and its schedule.
func TestCallTag(t *testing.T) {
	base := sched.Config{Collective: sched.AllReduce, Algorithm: sched.AlgoRing, Count: 1000, DType: reduce.Float32, Op: reduce.OpSum,
		Channels: 2, ChunkBytes: 1 << 20, GroupSize: 2}
	with := func(f func(*sched.Config)) sched.Config { c := base; f(&c); return c }
	same := []sched.Config{
		with(func(c *sched.Config) { c.Rank, c.NRanks = 3, 8 }),
		with(func(c *sched.Config) { c.InPlace = true }),
		// A chunk size that rounds to the same elements, the messages in
		// flight of an all-to-all, and a group size that the ring does
		// not use make the same messages.
		with(func(c *sched.Config) { c.ChunkBytes = 1<<20 + 3 }),
		with(func(c *sched.Config) { c.AllToAllInFlight = 16 }),
		with(func(c *sched.Config) { c.GroupSize = 4 }),
	}
	for _, c := range same {
		assert.Equal(t, callTag(base), callTag(c), "%+v", c)
	}
	differ := []sched.Config{
		with(func(c *sched.Config) { c.Count = 1001 }),
		with(func(c *sched.Config) { c.DType = reduce.Int32 }),
		with(func(c *sched.Config) { c.Op = reduce.OpMax }),
		with(func(c *sched.Config) { c.Collective = sched.ReduceScatter }),
		with(func(c *sched.Config) { c.Algorithm = sched.AlgoHalvingDoubling }),
		with(func(c *sched.Config) { c.Channels = 1 }),
		with(func(c *sched.Config) { c.ChunkBytes = 1 << 19 }),
	}
	for _, c := range differ {
		assert.NotEqual(t, callTag(base), callTag(c), "%+v", c)
	}
	// The reduction matters only where the collective reduces, the root
	// only where it has one, the group size only where the algorithm
	// uses it.
	gather := sched.Config{Collective: sched.AllGather, Count: 10, DType: reduce.Uint8}
	assert.Equal(t, callTag(gather), callTag(with(func(c *sched.Config) { *c = gather; c.Op = reduce.OpMax; c.Root = 2 })))
	bcast := sched.Config{Collective: sched.Broadcast, Count: 10, DType: reduce.Uint8, Root: 1}
	assert.NotEqual(t, callTag(bcast), callTag(with(func(c *sched.Config) { *c = bcast; c.Root = 0 })))
	p2p := sched.Config{Collective: sched.P2P, Count: 10, DType: reduce.Uint8, Root: 0, Peer: 1}
	assert.NotEqual(t, callTag(p2p), callTag(with(func(c *sched.Config) { *c = p2p; c.Peer = 2 })))
	hier := with(func(c *sched.Config) { c.Algorithm = sched.AlgoHierarchical })
	assert.NotEqual(t, callTag(hier), callTag(with(func(c *sched.Config) { *c = hier; c.GroupSize = 4 })))

	// The schedule in words, as mismatch errors give it.
	assert.Equal(t, "algorithm ring, 2 channels, 1048576-byte chunks", scheduleOf(with(func(c *sched.Config) { c.ChunkBytes = 1<<20 + 3 })).String())
	assert.Equal(t, "algorithm hierarchical, 1 channel, 131072-byte chunks, groups of 2 ranks", scheduleOf(with(func(c *sched.Config) {
		c.Algorithm, c.Channels, c.ChunkBytes = sched.AlgoHierarchical, 0, 0
	})).String())
}
