package transport_test

import (
	"testing"

	"github.com/metaroce/metaroce/transport"
	"github.com/metaroce/metaroce/transport/transporttest"
	"github.com/metaroce/metaroce/transport/wire"
	"github.com/stretchr/testify/require"
)

// TestCloseCompletesLandedGroup: a flow's second message lands whole while
// the first still misses its first segment, so the second receive waits
// behind the first. The receiver then closes. Its sender has seen the
// second message acknowledged and reports it delivered; the receive must
// report it delivered too, with its length, and not as lost with
// ErrClosed. The first message fails on both sides (docs/spec.md §3.3).
func TestCloseCompletesLandedGroup(t *testing.T) {
	ncfg := baseNet(3)
	ncfg.Loss = 1
	ncfg.LossOn = func(p *transporttest.Packet) bool {
		var d wire.Data
		if p.Op != wire.OpData || p.Src != 0 {
			return false
		}
		_, err := wire.ParseData(&d, p.Data)
		return err == nil && d.Msg == 0 && d.Offset == 0 // the first message's first segment, every copy
	}
	n, ca, cb := pair(t, ncfg, baseCfg())
	const first, second = 16 << 10, 8 << 10
	_, err := n.PostRecv(1, cb, 0, transporttest.RecvSpec{Cap: first})
	require.NoError(t, err)
	_, err = n.PostRecv(1, cb, 0, transporttest.RecvSpec{Cap: second})
	require.NoError(t, err)
	require.NoError(t, n.RunFor(30*transport.Microsecond))
	_, err = n.Send(0, ca, 0, make([]byte, first), 0)
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
	require.NoError(t, n.RunFor(50*transport.Millisecond))
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
