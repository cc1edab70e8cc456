package transport

import (
	"testing"

	"github.com/metaroce/metaroce/transport/wire"
	"github.com/stretchr/testify/require"
)

// TestLateDataForReleasedFlowIsStale: a late copy of DATA for a flow that
// was released and freed belongs to a completed group: it is dropped as
// stale, without the NACK NOT_READY that DATA for a group not yet posted
// draws (docs/spec.md §3.4).
func TestLateDataForReleasedFlowIsStale(t *testing.T) {
	e, c := testConn(t, Config{Planes: 1, PathsPerPlane: 1}, 4152)
	require.NoError(t, c.postRecv(0, 5, []RecvBuf{{Cap: 100, Cookie: 1}}))
	c.ctrlQ = c.ctrlQ[:0] // the RECV_READY left
	d := &wire.Data{Flow: 5, Msg: 0, Index: 0, Offset: 0, MsgLen: 100, Payload: make([]byte, 100)}
	require.True(t, c.place(1000, d).OK)
	require.NoError(t, e.ReleaseFlow(1000, c.id, 5))
	require.Zero(t, len(c.flows), "the released flow is freed")
	before := e.Counters()
	require.False(t, c.place(2000, d).OK)
	after := e.Counters()
	require.Equal(t, before.Dropped[DropStale]+1, after.Dropped[DropStale])
	require.Equal(t, before.Dropped[DropNotReady], after.Dropped[DropNotReady])
	require.Empty(t, c.ctrlQ, "late DATA of a released flow was NACKed")

	// DATA for a flow never posted nor released is still NOT_READY.
	d.Flow = 6
	c.place(3000, d)
	require.Equal(t, before.Dropped[DropNotReady]+1, e.Counters().Dropped[DropNotReady])
	require.Len(t, c.ctrlQ, 1)
	require.Equal(t, wire.NackNotReady, c.ctrlQ[0].nack.Reason)
}

// TestReleasedFlowInProgressRefusesNewOps: a flow released while a receive
// of it is still posted keeps its state until that receive completes, but
// its id is released at once: Send and PostRecv on it fail with ErrInvalid
// ("was released") like those on a released flow whose state is gone
// (ReleaseFlow, docs/spec.md §3.4, "Releasing a flow"). Accepting them
// would keep the flow alive and put the new operations on a flow id its
// owner gave up.
func TestReleasedFlowInProgressRefusesNewOps(t *testing.T) {
	e, c := testConn(t, Config{Planes: 1, PathsPerPlane: 1}, 4152)
	require.NoError(t, e.PostRecv(0, c.id, 5, []RecvBuf{{Cap: 100, Cookie: 1}}))
	require.NoError(t, e.ReleaseFlow(0, c.id, 5))
	f := c.flows[5]
	require.NotNil(t, f, "the receive is still posted: the flow is not freed yet")

	err := e.PostRecv(0, c.id, 5, []RecvBuf{{Cap: 100, Cookie: 2}})
	require.ErrorIs(t, err, ErrInvalid)
	require.ErrorContains(t, err, "flow 5 was released")
	err = e.Send(0, c.id, 5, 10, 0, 3)
	require.ErrorIs(t, err, ErrInvalid)
	require.ErrorContains(t, err, "flow 5 was released")
	require.Len(t, f.recvs, 1, "the refused receive was posted")
	require.Empty(t, f.sends, "the refused send was queued")

	// The receive in progress still completes, and then the flow goes.
	c.ctrlQ = c.ctrlQ[:0] // the RECV_READY left
	d := &wire.Data{Flow: 5, Msg: 0, Index: 0, Offset: 0, MsgLen: 100, Payload: make([]byte, 100)}
	require.True(t, c.place(1000, d).OK)
	require.Nil(t, c.flows[5], "the released flow was not freed once idle")
}
