package transport_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/metaroce/metaroce/transport"
	"github.com/metaroce/metaroce/transport/transporttest"
	"github.com/metaroce/metaroce/transport/wire"
)

// TestIdlePeerStopsCounting: a receiver posts receives for two peers, of
// which only one has a message to send. The idle peer answers the
// RECV_READY at once with an ACK that releases nothing (docs/spec.md
// §3.5), the receiver stops counting it among its senders, and the busy
// peer is hinted the whole inbound rate again about one RTT after the
// posts, instead of half of it for two initial RTTs. Once the idle peer
// sends after all, its DATA counts it again and the shares are halved.
func TestIdlePeerStopsCounting(t *testing.T) {
	n, cs, start := busyAndIdle(t)
	hint := func(i int) float64 {
		st, ok := n.Node(i + 1).EP.Stats(cs[i].s)
		require.True(t, ok)
		return float64(st.RateHint)
	}
	// The RECV_READY reaches the idle peer after one way and its ACK the
	// receiver after two; the receiver's next ACK (within srtt/4, 2 µs)
	// reaches the busy peer after a third. Counting the idle post for two
	// initial RTTs (20 µs) would hold the half share until about 26 µs.
	deadline := start + 3*oneWay + 4*transport.Microsecond
	for n.Now() < deadline && hint(0) < 0.999*linkRate {
		require.NoError(t, n.RunFor(250*transport.Nanosecond))
	}
	require.InDelta(t, float64(linkRate), hint(0), linkRate/2000, "busy peer's hint %v after the posts", n.Now()-start)

	// The idle peer's send goes at once into the receive it was told of;
	// its DATA makes it a sender again.
	_, err := n.Send(2, cs[1].s, 0, make([]byte, 1<<20), 0)
	require.NoError(t, err)
	half := float64(linkRate) / 2
	half -= half / 256 // two senders send DATA: the headroom applies
	from := n.Now()
	for n.Now() < from+3*oneWay+4*transport.Microsecond && (hint(0) > 1.001*half || hint(1) > 1.001*half) {
		require.NoError(t, n.RunFor(250*transport.Nanosecond))
	}
	require.InDelta(t, half, hint(0), half/2000, "busy peer's hint %v after the second send", n.Now()-from)
	require.InDelta(t, half, hint(1), half/2000, "second peer's hint")
}

// TestIdleAnswerOnlyWhenIdle: a sender answers a RECV_READY at once, in
// an ACK with FlagIdle, only when nothing of its own waits to be sent on
// the flow. One with messages queued that receives the RECV_READY of a
// later group before the earlier one's (which took a slower path) is not
// idle, only waiting for the earlier group: none of its ACKs carries the
// flag, and the receiver keeps counting it (docs/spec.md §3.5).
func TestIdleAnswerOnlyWhenIdle(t *testing.T) {
	for _, tc := range []struct {
		name   string
		queued int  // messages the sender has queued on the flow
		idle   bool // an ACK with FlagIdle answers the first RECV_READY to arrive, at once
	}{
		{"idle", 0, true},
		{"waiting for an earlier group", 2, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			n, cs := nearFar(t, 1, 0, 0)
			// A first message gives the sender the receiver's hints.
			_, err := n.Send(1, cs[0].s, 0, make([]byte, 4<<10), 0)
			require.NoError(t, err)
			postAll(t, n, cs, 4<<10)
			require.NoError(t, n.RunUntil(n.AllDone, n.Now()+transport.Millisecond))
			require.NoError(t, n.RunFor(4*oneWay))
			rrs, firstRR := 0, transport.Time(-1)
			var idleAcks []transport.Time
			n.ExtraDelay = func(p *transporttest.Packet, _ transport.Time) transport.Time {
				if p.Src == 0 && p.Op == wire.OpRecvReady {
					rrs++
					if rrs == 1 {
						return 20 * transport.Microsecond // the first group's announcement is late
					}
				}
				return 0
			}
			n.OnArrive = func(p *transporttest.Packet, now transport.Time, _ int) {
				var h wire.Header
				switch {
				case p.Dst == 1 && p.Op == wire.OpRecvReady && firstRR < 0:
					firstRR = now
				case p.Src == 1 && p.Op == wire.OpAck:
					_, err := wire.ParseHeader(&h, p.Data)
					require.NoError(t, err)
					if h.Flags&wire.FlagIdle != 0 {
						idleAcks = append(idleAcks, p.Sent)
					}
				}
			}
			for i := 0; i < tc.queued; i++ {
				_, err := n.Send(1, cs[0].s, 0, make([]byte, 64<<10), 0)
				require.NoError(t, err)
			}
			postAll(t, n, cs, 64<<10)
			postAll(t, n, cs, 64<<10)
			require.NoError(t, n.RunFor(3*oneWay))
			require.GreaterOrEqual(t, firstRR, transport.Time(0), "no RECV_READY arrived")
			if !tc.idle {
				require.Empty(t, idleAcks, "RECV_READY arrived at %v", firstRR)
				require.NoError(t, n.RunUntil(n.AllDone, n.Now()+transport.Millisecond))
				return
			}
			require.NotEmpty(t, idleAcks, "no idle answer")
			require.Less(t, idleAcks[0]-firstRR, transport.Microsecond, "RECV_READY arrived at %v, idle answer left at %v", firstRR, idleAcks[0])
		})
	}
}
