package collectives

import (
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/metaroce/metaroce/collectives/reduce"
	"github.com/metaroce/metaroce/collectives/sched"
)

// TestCallTag: the tag is the same for calls that pair (whatever the rank,
// the place or the settings the communicator fills in) and differs where
// the ranks must agree.
func TestCallTag(t *testing.T) {
	base := sched.Config{Collective: sched.AllReduce, Count: 1000, DType: reduce.Float32, Op: reduce.OpSum}
	with := func(f func(*sched.Config)) sched.Config { c := base; f(&c); return c }
	same := []sched.Config{
		with(func(c *sched.Config) { c.Rank, c.NRanks = 3, 8 }),
		with(func(c *sched.Config) { c.InPlace = true }),
		with(func(c *sched.Config) { c.Channels, c.ChunkBytes = 4, 1<<20 }),
	}
	for _, c := range same {
		assert.Equal(t, callTag(base), callTag(c), "%+v", c)
	}
	differ := []sched.Config{
		with(func(c *sched.Config) { c.Count = 1001 }),
		with(func(c *sched.Config) { c.DType = reduce.Int32 }),
		with(func(c *sched.Config) { c.Op = reduce.OpMax }),
		with(func(c *sched.Config) { c.Collective = sched.ReduceScatter }),
	}
	for _, c := range differ {
		assert.NotEqual(t, callTag(base), callTag(c), "%+v", c)
	}
	// The reduction matters only where the collective reduces, the root
	// only where it has one.
	gather := sched.Config{Collective: sched.AllGather, Count: 10, DType: reduce.Uint8}
	assert.Equal(t, callTag(gather), callTag(with(func(c *sched.Config) { *c = gather; c.Op = reduce.OpMax; c.Root = 2 })))
	bcast := sched.Config{Collective: sched.Broadcast, Count: 10, DType: reduce.Uint8, Root: 1}
	assert.NotEqual(t, callTag(bcast), callTag(with(func(c *sched.Config) { *c = bcast; c.Root = 0 })))
	p2p := sched.Config{Collective: sched.P2P, Count: 10, DType: reduce.Uint8, Root: 0, Peer: 1}
	assert.NotEqual(t, callTag(p2p), callTag(with(func(c *sched.Config) { *c = p2p; c.Peer = 2 })))
}
