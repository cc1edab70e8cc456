package transport

import (
	"testing"

	"github.com/metaroce/metaroce/transport/wire"
	"github.com/stretchr/testify/require"
)

// TestIgnoredRecvReadyIsCounted: a RECV_READY the sender ignores, a second
// copy of a group it holds (in order or held early) or one for a group
// already used up, shows in Counters as DropDuplicate or DropStale
// (docs/spec.md §3.4) rather than vanishing uncounted.
func TestIgnoredRecvReadyIsCounted(t *testing.T) {
	e, c := testConn(t, Config{Planes: 1, PathsPerPlane: 1}, 4152)
	rr := func(msg uint32) *wire.RecvReady {
		r := &wire.RecvReady{Flow: 3, Msg: msg, N: 1}
		r.Entries[0] = wire.RecvEntry{Capacity: 100}
		return r
	}
	dropped := func(r DropReason) uint64 { return e.Counters().Dropped[r] }

	c.onRecvReady(0, rr(0))
	c.onRecvReady(0, rr(0)) // held already
	require.Equal(t, uint64(1), dropped(DropDuplicate))
	c.onRecvReady(0, rr(2))
	c.onRecvReady(0, rr(2)) // held early already
	require.Equal(t, uint64(2), dropped(DropDuplicate))
	require.Zero(t, dropped(DropStale))

	// A send uses group 0 up; a late copy of its announcement is stale.
	require.NoError(t, e.Send(0, c.id, 3, 10, 0, 1))
	require.Equal(t, uint32(1), c.flows[3].readyNext, "the send matched group 0")
	c.onRecvReady(0, rr(0))
	require.Equal(t, uint64(1), dropped(DropStale))
	require.Equal(t, uint64(2), dropped(DropDuplicate))
}
