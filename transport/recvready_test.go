package transport

import (
	"errors"
	"strings"
	"testing"

	"github.com/metaroce/metaroce/transport/wire"
	"github.com/stretchr/testify/require"
)

func recvReady(flow, msg uint32) *wire.RecvReady {
	rr := &wire.RecvReady{Flow: flow, Msg: msg, N: 1}
	rr.Entries[0] = wire.RecvEntry{Capacity: 1 << 20}
	return rr
}

// TestRecvReadyInAnyOrderWithinWindow: announcements arriving in reverse
// order, up to MaxPendingRecvs − 1 groups ahead of the next to match, are
// held (each in constant time, none sorted into a slice) and matched in
// order once the missing first one arrives (docs/spec.md §3.4).
func TestRecvReadyInAnyOrderWithinWindow(t *testing.T) {
	const window = 4096
	_, c := testConn(t, Config{Planes: 1, PathsPerPlane: 1, MaxPendingRecvs: window}, 4152)
	for m := uint32(window - 1); m >= 1; m-- {
		c.onRecvReady(0, recvReady(3, m))
		c.onRecvReady(0, recvReady(3, m)) // a spurious retransmission
	}
	require.Equal(t, stateEstablished, c.state)
	f := c.flows[3]
	require.Empty(t, f.ready)
	require.Len(t, f.early, window-1)
	c.onRecvReady(0, recvReady(3, 0))
	require.Len(t, f.ready, window)
	require.Empty(t, f.early)
	require.NoError(t, CheckFootprint(c.ep))
	for i := 0; i < window; i++ {
		require.NoError(t, c.send(0, 3, 10, 0, uint64(i)))
	}
	for i, s := range f.sends {
		require.True(t, s.matched)
		require.Equal(t, uint32(i), s.msg, "send %d matched group %d", i, s.msg)
	}
	require.Empty(t, f.ready)
	require.Equal(t, uint32(window), f.readyNext)
	c.onRecvReady(0, recvReady(3, 5)) // used up: ignored
	require.Empty(t, f.ready)
	require.Empty(t, f.early)
}

// TestRecvReadyBeyondWindowFailsConnection: a group announced
// MaxPendingRecvs or more ahead of the next to match is more than the
// peer can have posted; it is counted and fails the connection with an
// ErrLimit error naming the bound (docs/spec.md §3.4), instead of being
// held (a peer could make us hold and sort groups up to 2^31 ahead).
func TestRecvReadyBeyondWindowFailsConnection(t *testing.T) {
	for _, ahead := range []uint32{64, 1 << 30} {
		e, c := testConn(t, Config{Planes: 1, PathsPerPlane: 1, MaxPendingRecvs: 64}, 4152)
		c.onRecvReady(0, recvReady(1, 63))
		require.Equal(t, stateEstablished, c.state, "63 ahead is within the window")
		c.onRecvReady(0, recvReady(1, ahead))
		require.Equal(t, stateClosed, c.state)
		require.Equal(t, uint64(1), e.Counters().Dropped[DropPeerLimit])
		err, ok := lastClosed(e)
		require.True(t, ok)
		require.True(t, errors.Is(err, ErrLimit), "%v", err)
		require.True(t, strings.Contains(err.Error(), "MaxPendingRecvs (64)"), "%v", err)
		require.Len(t, e.ctrl, 1, "the peer is told")
		require.True(t, e.ctrl[0].isClose)
		require.Equal(t, wire.CloseError, e.ctrl[0].close.Reason)
		require.Zero(t, e.NumConns())
	}
}
