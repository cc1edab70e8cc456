package transport_test

import (
	"math"
	"math/rand/v2"
	"testing"

	"github.com/metaroce/metaroce/transport"
	"github.com/metaroce/metaroce/transport/transporttest"
	"github.com/metaroce/metaroce/transport/wire"
	"github.com/stretchr/testify/require"
)

// TestPacingFollowsRisingRate: a message sent while the pacing rate is
// tiny, or one no signed arithmetic can hold, completes within what the
// rate it then gets allows. The peer holding the connection's token sends
// a 1 kbit/s hint (an ACK of its own making) just before the send, so the
// first DATA leaves at 125 B/s and is charged a long gap (33 s before
// maxPaceGap); the acknowledgement of that DATA brings the receiver's real
// hint, or none, leaving the line rate. The gap used to stay in force: the
// connection stalled for 33 s before the larger rate applied. A line rate
// of 2⁶⁴−1 (someone's "unlimited") turned negative in the pacer's signed
// arithmetic and parked the third packet for about 17 hours; 2⁶³, what a
// NaN becomes when converted, must not do anything of the sort either.
// A receiver whose genuine hint is the least one (1 kbit/s) gets its
// packets at most about a second apart, not 33 s.
func TestPacingFollowsRisingRate(t *testing.T) {
	cases := []struct {
		name     string
		inbound  uint64         // both nodes' InboundRate (the receiver's hints)
		lineRate uint64         // both nodes' cc LineRate
		forged   []uint32       // hints (kbit/s) the peer sends right before the send
		size     int            // message bytes
		within   transport.Time // from the send to the delivery, at most
	}{
		{"tiny hint, then the receiver's share", linkRate, 0, []uint32{1}, 64 << 10, transport.Millisecond},
		{"tiny hint, then no hint under a line rate", 0, linkRate, []uint32{1}, 64 << 10, transport.Millisecond},
		{"zero, then tiny hint, then the receiver's share", linkRate, 0, []uint32{0, 1}, 64 << 10, transport.Millisecond},
		{"line rate 2^64-1", 0, math.MaxUint64, nil, 64 << 10, transport.Millisecond},
		{"line rate 2^63", 0, 1 << 63, nil, 64 << 10, transport.Millisecond},
		{"largest hint", 0, linkRate, []uint32{math.MaxUint32}, 64 << 10, transport.Millisecond},
		// Three 4 KiB segments: two gaps of at most 9/8 s each.
		{"the receiver's least hint", 1, 0, nil, 3 * 4096, 3 * transport.Second},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			cfg := baseCfg()
			cfg.InboundRate = tc.inbound
			cfg.CC.LineRate = tc.lineRate
			n, ca, cb := pair(t, baseNet(7), cfg)
			var tok uint64 // the token node 0 expects in packets to it
			n.OnArrive = func(p *transporttest.Packet, _ transport.Time, _ int) {
				var h wire.Header
				if _, err := wire.ParseHeader(&h, p.Data); err == nil && p.Dst == 0 && h.Token != 0 {
					tok = h.Token
				}
			}
			data := fill(rand.New(rand.NewPCG(7, 7)), tc.size)
			var start transport.Time // when the message was sent
			if len(tc.forged) == 0 {
				// Sent first, its data becomes ready with the RECV_READY
				// that carries the receiver's hint, which is then fresh.
				_, err := n.Send(0, ca, 1, data, 0)
				require.NoError(t, err)
				start = n.Now()
			}
			_, err := n.PostRecv(1, cb, 1, transporttest.RecvSpec{Cap: uint64(tc.size)})
			require.NoError(t, err)
			require.NoError(t, n.RunFor(50*transport.Microsecond)) // the RECV_READY arrives
			if len(tc.forged) > 0 {
				require.NotZero(t, tok)
				for _, hint := range tc.forged {
					a := wire.Ack{N: 1, RateHint: hint}
					a.Op, a.DstConn, a.Token = wire.OpAck, uint32(ca), tok
					a.Records[0].Path = 1000 // no such path: the record changes nothing
					before := n.Node(0).EP.Counters()
					n.Inject(0, 1, 0, transport.ECT0, a.Append(nil))
					require.Equal(t, before, n.Node(0).EP.Counters(), "the forged ACK was dropped")
				}
				_, err := n.Send(0, ca, 1, data, 0)
				require.NoError(t, err)
				start = n.Now()
			}
			require.NoError(t, n.RunUntil(n.AllDone, start+tc.within), "message of %d bytes not delivered within %v", tc.size, tc.within)
			require.NoError(t, n.Check(transporttest.CheckOptions{Complete: true}))
			t.Logf("delivered in %v", n.Now()-start)
		})
	}
}
