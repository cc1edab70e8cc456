package transport

import (
	"testing"

	"github.com/metaroce/metaroce/transport/wire"
	"github.com/stretchr/testify/require"
)

// TestTombstoneOfFinishingFlowOutlivesLaterReleases: a flow released while
// a receive of it is still in progress keeps its tombstone however many
// flows are released after it (docs/spec.md §3.4, "Releasing a flow": a
// released id must not be used again). Forgetting it, as the oldest of
// more than maxTombstones, let a receive on the same id join the old flow,
// and once the old flow was freed, let a fresh flow on that id take a late
// copy of the old flow's DATA into the new buffer.
func TestTombstoneOfFinishingFlowOutlivesLaterReleases(t *testing.T) {
	e, c := testConn(t, Config{Planes: 1, PathsPerPlane: 1}, 4152)
	const old = 5
	require.NoError(t, e.PostRecv(0, c.id, old, []RecvBuf{{Cap: 8192, Cookie: 1}}))
	// Two segments of 4096 bytes: the first lands, the second is late.
	first := &wire.Data{Flow: old, Msg: 0, Index: 0, Offset: 0, MsgLen: 8192, Payload: make([]byte, 4096)}
	require.True(t, c.place(1000, first).OK)
	require.NoError(t, e.ReleaseFlow(1000, c.id, old))
	require.NotNil(t, c.flows[old], "the receive is in progress: the flow is not freed yet")

	// More released ids than the connection remembers.
	for f := uint32(1000); f < 1000+maxTombstones+1; f++ {
		require.NoError(t, e.ReleaseFlow(2000, c.id, f))
	}
	err := e.PostRecv(2000, c.id, old, []RecvBuf{{Cap: 8192, Cookie: 2}})
	require.ErrorIs(t, err, ErrInvalid, "a receive on the released id was taken while its flow finished")
	require.ErrorContains(t, err, "flow 5 was released")

	// The old receive completes and its flow goes; the id stays released.
	second := &wire.Data{Flow: old, Msg: 0, Index: 0, Offset: 4096, MsgLen: 8192, Payload: make([]byte, 4096)}
	require.True(t, c.place(3000, second).OK)
	require.Nil(t, c.flows[old], "the released flow was not freed once idle")
	err = e.PostRecv(3000, c.id, old, []RecvBuf{{Cap: 8192, Cookie: 3}})
	require.ErrorIs(t, err, ErrInvalid, "a receive on the released id was taken once its flow was freed")

	// A late copy of the old flow's DATA is stale: not placed, not NACKed.
	c.ctrlQ = c.ctrlQ[:0]
	before := e.Counters()
	require.False(t, c.place(4000, first).OK, "late DATA of the released flow was placed")
	require.Equal(t, before.Dropped[DropStale]+1, e.Counters().Dropped[DropStale])
	require.Empty(t, c.ctrlQ, "late DATA of a released flow was NACKed")
}

// TestTombstonesStayBounded: the tombstones of flows whose state is gone
// are at most maxTombstones, the oldest forgotten first; those of released
// flows still in progress come on top, at most MaxFlowsPerConn of them,
// and join the queue of forgettable ones when their flow is freed.
func TestTombstonesStayBounded(t *testing.T) {
	e, c := testConn(t, Config{Planes: 1, PathsPerPlane: 1, MaxFlowsPerConn: 8}, 4152)
	const busy = 8 // flows 1..8 stay in progress
	for f := uint32(1); f <= busy; f++ {
		require.NoError(t, e.PostRecv(0, c.id, f, []RecvBuf{{Cap: 100, Cookie: uint64(f)}}))
		require.NoError(t, e.ReleaseFlow(0, c.id, f))
	}
	for f := uint32(100); f < 100+3*maxTombstones; f++ {
		require.NoError(t, e.ReleaseFlow(0, c.id, f))
	}
	require.Equal(t, maxTombstones+busy, len(c.released))
	require.Equal(t, maxTombstones, len(c.releasedOrder))
	require.False(t, c.isReleased(100), "the oldest freed id was not forgotten")
	require.True(t, c.isReleased(100+3*maxTombstones-1))
	for f := uint32(1); f <= busy; f++ {
		require.True(t, c.isReleased(f), "flow %d in progress lost its tombstone", f)
	}

	// Flow 1 completes and is freed: its tombstone is now the newest
	// forgettable one, and the oldest is forgotten for it.
	d := &wire.Data{Flow: 1, Msg: 0, Index: 0, Offset: 0, MsgLen: 100, Payload: make([]byte, 100)}
	oldest := c.releasedOrder[0]
	require.True(t, c.place(1000, d).OK)
	require.Nil(t, c.flows[1])
	require.Equal(t, maxTombstones+busy-1, len(c.released))
	require.Equal(t, maxTombstones, len(c.releasedOrder))
	require.Equal(t, uint32(1), c.releasedOrder[maxTombstones-1])
	require.False(t, c.isReleased(oldest))
	require.True(t, c.isReleased(1))
}
