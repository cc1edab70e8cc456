package transport_test

import (
	"testing"

	"github.com/metaroce/metaroce/transport"
	"github.com/metaroce/metaroce/transport/transporttest"
	"github.com/metaroce/metaroce/transport/wire"
	"github.com/stretchr/testify/require"
)

// first and second are the sizes of the two messages of the landed-group
// tests: the second lands whole behind the first, whose first segment is
// lost (firstSegmentOfFirstMessage).
const first, second = 16 << 10, 8 << 10

// firstSegmentOfFirstMessage is a LossOn that loses every copy of the
// first segment of message 0 that node 0 sends.
func firstSegmentOfFirstMessage(p *transporttest.Packet) bool {
	var d wire.Data
	if p.Op != wire.OpData || p.Src != 0 {
		return false
	}
	_, err := wire.ParseData(&d, p.Data)
	return err == nil && d.Msg == 0 && d.Offset == 0
}

// postTwo posts node 1's receives of first and then second bytes on flow
// of connection cb, and gives the RECV_READYs time to reach the sender.
func postTwo(t *testing.T, n *transporttest.Net, cb transport.ConnID, flow uint32) {
	t.Helper()
	for _, size := range []uint64{first, second} {
		_, err := n.PostRecv(1, cb, flow, transporttest.RecvSpec{Cap: size})
		require.NoError(t, err)
	}
	require.NoError(t, n.RunFor(30*transport.Microsecond))
}

// TestCloseCompletesLandedGroup: a flow's second message lands whole while
// the first still misses its first segment, so the second receive waits
// behind the first. The receiver then closes. Its sender has seen the
// second message acknowledged and reports it delivered; the receive must
// report it delivered too, with its length, and not as lost with
// ErrClosed. The first message fails on both sides (docs/spec.md §3.3).
func TestCloseCompletesLandedGroup(t *testing.T) {
	ncfg := baseNet(3)
	ncfg.Loss = 1
	ncfg.LossOn = firstSegmentOfFirstMessage
	n, ca, cb := pair(t, ncfg, baseCfg())
	postTwo(t, n, cb, 0)
	_, err := n.Send(0, ca, 0, make([]byte, first), 0)
	require.NoError(t, err)
	_, err = n.Send(0, ca, 0, make([]byte, second), 0)
	require.NoError(t, err)

	sends := func() (done []transport.Event) {
		for _, ev := range n.Node(0).Events {
			if ev.Kind == transport.EvSendDone {
				done = append(done, ev)
			}
		}
		return done
	}
	require.NoError(t, n.RunFor(200*transport.Microsecond))
	require.Equal(t, first-4096+second, int(n.Node(1).Placed), "all but the first segment should have landed")
	_, rdone := outcome(n, 1, transport.EvRecvDone)
	require.False(t, rdone, "no receive may complete while the first message misses a segment")

	n.Node(1).EP.Close(n.Now(), cb)
	require.NoError(t, n.RunFor(graceWait))
	var recvs []transport.Event
	for _, ev := range n.Node(1).Events {
		if ev.Kind == transport.EvRecvDone {
			recvs = append(recvs, ev)
		}
	}
	require.Len(t, recvs, 2)
	require.ErrorIs(t, recvs[0].Err, transport.ErrClosed, "the first message never arrived whole")
	require.NoError(t, recvs[1].Err, "the second message landed whole and was acknowledged")
	require.EqualValues(t, second, recvs[1].Len)
	s := sends()
	require.Len(t, s, 2)
	require.Error(t, s[0].Err, "the first message's send cannot have succeeded")
	require.NoError(t, s[1].Err)
}

// TestCloseAcknowledgesLateCopyOfLandedGroup: as in
// TestCloseCompletesLandedGroup, the second message lands whole behind the
// first, which misses a segment, and the receiver closes; but here every
// packet of the receiver is lost until after the close, so the sender has
// no ACK for the second message. Close reports that receive delivered, so
// the copy of its DATA that the sender retransmits while the receiver
// closes must be acknowledged as a stale duplicate, not dropped with
// DropClosing like DATA of a group the close failed: the sender's send
// then completes too and both sides agree that the message was delivered
// (docs/spec.md §3.3, §3.4). The first message fails on both sides.
func TestCloseAcknowledgesLateCopyOfLandedGroup(t *testing.T) {
	ncfg := baseNet(3)
	ncfg.Loss = 1
	ncfg.LossOn = firstSegmentOfFirstMessage
	n, ca, cb := pair(t, ncfg, baseCfg())
	postTwo(t, n, cb, 0)
	// Every packet of the receiver is lost for 400 µs from now: the
	// sender learns nothing of what landed before the close.
	r := transporttest.AnyRule(n.Now())
	r.Src, r.Dst, r.Until = 1, 0, n.Now()+400*transport.Microsecond
	n.AddRule(r)
	_, err := n.Send(0, ca, 0, make([]byte, first), 0)
	require.NoError(t, err)
	_, err = n.Send(0, ca, 0, make([]byte, second), 0)
	require.NoError(t, err)
	require.NoError(t, n.RunFor(100*transport.Microsecond))
	require.Equal(t, first-4096+second, int(n.Node(1).Placed), "all but the first segment should have landed")
	_, sdone := outcome(n, 0, transport.EvSendDone)
	require.False(t, sdone, "a send completed although every ACK was lost")
	stale := n.Node(1).EP.Counters().Dropped[transport.DropStale]

	n.Node(1).EP.Close(n.Now(), cb)
	require.NoError(t, n.RunFor(300*transport.Millisecond))

	var recvs, sends []transport.Event
	for _, ev := range n.Node(1).Events {
		if ev.Kind == transport.EvRecvDone {
			recvs = append(recvs, ev)
		}
	}
	for _, ev := range n.Node(0).Events {
		if ev.Kind == transport.EvSendDone {
			sends = append(sends, ev)
		}
	}
	require.Len(t, recvs, 2)
	require.Len(t, sends, 2)
	require.ErrorIs(t, recvs[0].Err, transport.ErrClosed, "the first message never arrived whole")
	require.ErrorIs(t, sends[0].Err, transport.ErrClosed)
	require.NoError(t, recvs[1].Err, "the second message landed whole before the close")
	require.EqualValues(t, second, recvs[1].Len)
	require.NoError(t, sends[1].Err, "the receiver reported message 1 delivered; its send must complete")
	require.Greater(t, n.Node(1).EP.Counters().Dropped[transport.DropStale], stale,
		"no late copy of the landed group arrived after the close: the test shows nothing")
}
