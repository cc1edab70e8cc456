package transport_test

import (
	"testing"

	"github.com/metaroce/metaroce/transport"
	"github.com/metaroce/metaroce/transport/transporttest"
	"github.com/stretchr/testify/require"
)

// outcome returns the error of the latest EvSendDone or EvRecvDone of a
// node, and whether there was one.
func outcome(n *transporttest.Net, node int, kind transport.EventKind) (error, bool) {
	var err error
	found := false
	for _, ev := range n.Node(node).Events {
		if ev.Kind == kind {
			err, found = ev.Err, true
		}
	}
	return err, found
}

// TestDataAfterCloseIsNotAcknowledged closes the receiver at every moment
// of a 64 KiB transfer. Close fails the receive, so DATA that arrives
// after it is thrown away: it must not be acknowledged, or the sender
// reports success for data that never landed. The sender's send must end
// as the receive did: both succeed, or the send fails too (docs/spec.md
// §3.3).
func TestDataAfterCloseIsNotAcknowledged(t *testing.T) {
	var dropped uint64
	partial := 0
	for d := transport.Time(0); d < 30; d++ {
		mid, drops := closeMidTransfer(t, d, func(n *transporttest.Net, ep *transport.Endpoint, cb transport.ConnID) {
			ep.Close(n.Now(), cb)
		})
		if mid {
			partial++
		}
		dropped += drops
	}
	require.NotZero(t, partial, "no close fell in the middle of the transfer")
	require.NotZero(t, dropped, "no DATA arrived after a close")
}

// closeMidTransfer starts a 64 KiB transfer, lets it run for d µs and
// then hands the receiving endpoint to closeIt, which closes the
// connection cb (and may do more around it). Once the grace period is
// over, both operations must have ended, and the sender's send as the
// receive did: both succeed, or the send fails with ErrClosed too
// (docs/spec.md §3.3). It reports whether the close came with the
// message partly placed, and how much DATA the receiver dropped as
// arriving after the close.
func closeMidTransfer(t *testing.T, d transport.Time, closeIt func(n *transporttest.Net, ep *transport.Endpoint, cb transport.ConnID)) (partial bool, dropped uint64) {
	t.Helper()
	n, ca, cb := pair(t, baseNet(1), baseCfg())
	const size = 64 << 10
	_, err := n.PostRecv(1, cb, 0, transporttest.RecvSpec{Cap: size})
	require.NoError(t, err)
	require.NoError(t, n.RunFor(30*transport.Microsecond))
	_, err = n.Send(0, ca, 0, make([]byte, size), 0)
	require.NoError(t, err)
	require.NoError(t, n.RunFor(d*transport.Microsecond))
	p := n.Node(1).Placed
	ep := n.Node(1).EP
	closeIt(n, ep, cb)
	require.NoError(t, n.RunFor(graceWait))
	rerr, rok := outcome(n, 1, transport.EvRecvDone)
	serr, sok := outcome(n, 0, transport.EvSendDone)
	require.True(t, rok && sok, "close after %dµs: operations left pending", d)
	if rerr != nil {
		require.ErrorIs(t, serr, transport.ErrClosed, "close after %dµs: the receive failed (%v)", d, rerr)
	} else {
		require.NoError(t, serr, "close after %dµs: the receive completed", d)
	}
	return p > 0 && p < size, ep.Counters().Dropped[transport.DropClosing]
}

// TestDataBeforeCloseIsAcknowledged: the receiver has the whole message
// and closes while every acknowledgement of it is lost. The sender's
// retransmissions and probes then reach a closing side, which still
// acknowledges data that arrived before its close, so the send completes
// (docs/spec.md §3.3).
func TestDataBeforeCloseIsAcknowledged(t *testing.T) {
	n, ca, cb := pair(t, baseNet(2), baseCfg())
	const size = 16 << 10
	_, err := n.PostRecv(1, cb, 0, transporttest.RecvSpec{Cap: size})
	require.NoError(t, err)
	require.NoError(t, n.RunFor(30*transport.Microsecond))
	r := transporttest.AnyRule(n.Now())
	r.Src, r.Dst, r.Until = 1, 0, n.Now()+300*transport.Microsecond
	n.AddRule(r)
	_, err = n.Send(0, ca, 0, make([]byte, size), 0)
	require.NoError(t, err)
	require.NoError(t, n.RunUntil(func() bool { _, ok := outcome(n, 1, transport.EvRecvDone); return ok }, n.Now()+transport.Millisecond))
	rerr, _ := outcome(n, 1, transport.EvRecvDone)
	require.NoError(t, rerr)
	_, sent := outcome(n, 0, transport.EvSendDone)
	require.False(t, sent, "the ACKs were to be lost")
	n.Node(1).EP.Close(n.Now(), cb)
	require.NoError(t, n.RunUntil(func() bool { _, ok := outcome(n, 0, transport.EvSendDone); return ok }, n.Now()+50*transport.Millisecond))
	serr, _ := outcome(n, 0, transport.EvSendDone)
	require.NoError(t, serr, "data that arrived before the close was not acknowledged")
}

// TestDataBeforeCloseIsAcknowledgedAfterLongLoss: as above, but the
// closing side's first CLOSE is lost as well, and the sender's
// retransmissions are lost for longer than twice MinRTO after the CLOSE
// reaches it. The sender keeps its send open for as long as the closing
// side lingers and answers (4 × HandshakeRetry), so a later
// retransmission completes it; with a grace of twice MinRTO it failed with
// ErrClosed although its data had been delivered (docs/spec.md §3.3).
func TestDataBeforeCloseIsAcknowledgedAfterLongLoss(t *testing.T) {
	cfg := baseCfg()
	cfg.HandshakeRetry = transport.Millisecond
	cfg.IdleTimeout = transport.Second
	n, ca, cb := pair(t, baseNet(3), cfg)
	const size = 16 << 10
	_, err := n.PostRecv(1, cb, 0, transporttest.RecvSpec{Cap: size})
	require.NoError(t, err)
	require.NoError(t, n.RunFor(30*transport.Microsecond))
	acks := transporttest.AnyRule(n.Now()) // the receiver's ACKs, and its first CLOSE
	acks.Src, acks.Dst, acks.Until = 1, 0, n.Now()+300*transport.Microsecond
	n.AddRule(acks)
	_, err = n.Send(0, ca, 0, make([]byte, size), 0)
	require.NoError(t, err)
	require.NoError(t, n.RunUntil(func() bool { _, ok := outcome(n, 1, transport.EvRecvDone); return ok }, n.Now()+transport.Millisecond))
	rerr, _ := outcome(n, 1, transport.EvRecvDone)
	require.NoError(t, rerr)
	closed := n.Now()
	retx := transporttest.AnyRule(closed) // the sender's retransmissions
	retx.Src, retx.Dst, retx.Until = 0, 1, closed+2*transport.Millisecond
	n.AddRule(retx)
	n.Node(1).EP.Close(closed, cb)
	require.NoError(t, n.RunUntil(func() bool { _, ok := outcome(n, 0, transport.EvSendDone); return ok }, closed+10*transport.Millisecond))
	serr, done := outcome(n, 0, transport.EvSendDone)
	require.True(t, done, "the send never ended")
	require.NoError(t, serr, "data that arrived before the close was not acknowledged")
	require.Greater(t, n.Now(), closed+2*transport.Millisecond, "the send completed before its retransmissions could arrive")
}

// graceWait is long enough, at the default HandshakeRetry (50 ms), for a
// connection whose peer closed to give up on its outstanding operations:
// it waits up to twice HandshakeRetry for acknowledgements the closing
// side may still send (onPeerClose).
const graceWait = 150 * transport.Millisecond

// TestReleasedFlowAfterCloseIsNotAcknowledged: as
// TestDataAfterCloseIsNotAcknowledged, but the receiver also releases the
// flow, before or after its Close (a user tearing down a comm and its
// connection). The flow must not be freed while the connection closes: a
// released flow's late DATA is acknowledged as stale, because a flow is
// freed only once every receive of it completed, but Close failed the
// receive, and the sender's send completed for data that never landed
// (docs/spec.md §3.3, §3.4).
func TestReleasedFlowAfterCloseIsNotAcknowledged(t *testing.T) {
	for _, tc := range []struct {
		name          string
		releaseBefore bool
	}{
		{"release after close", false},
		{"release before close", true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dropped := uint64(0)
			for d := transport.Time(0); d < 12; d++ {
				_, drops := closeMidTransfer(t, d, func(n *transporttest.Net, ep *transport.Endpoint, cb transport.ConnID) {
					if tc.releaseBefore {
						require.NoError(t, ep.ReleaseFlow(n.Now(), cb, 0))
					}
					ep.Close(n.Now(), cb)
					if !tc.releaseBefore {
						require.NoError(t, ep.ReleaseFlow(n.Now(), cb, 0))
					}
				})
				dropped += drops
			}
			require.NotZero(t, dropped, "no DATA arrived after a close")
		})
	}
}
