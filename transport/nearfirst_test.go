package transport_test

import (
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/metaroce/metaroce/transport"
	"github.com/metaroce/metaroce/transport/transporttest"
)

// nearFar builds a receiver (node 0) that hints its inbound rate and near
// + far senders (nodes 1..near, then the far ones) connected to it; a far
// sender's packets take farExtra longer each way. The receiver acknowledges
// late unless something makes an ACK urgent (AckDelay 10 µs, AckEvery 64),
// so that a test sees which ACKs leave at once.
func nearFar(t *testing.T, near, far int, farExtra transport.Time) (*transporttest.Net, []senderConn) {
	t.Helper()
	n := transporttest.New(baseNet(7))
	isFar := func(node int) bool { return node > near }
	n.ExtraDelay = func(p *transporttest.Packet, _ transport.Time) transport.Time {
		if isFar(p.Src) || isFar(p.Dst) {
			return farExtra
		}
		return 0
	}
	cfg := baseCfg()
	cfg.InboundRate = linkRate
	cfg.Listen = true
	cfg.AckDelay, cfg.AckEvery = 10*transport.Microsecond, 64
	recv := n.AddNode(cfg)
	cfg = baseCfg()
	for i := 0; i < near+far; i++ {
		n.AddNode(cfg)
	}
	var cs []senderConn
	for i := 0; i < near+far; i++ {
		s, r, err := n.Connect(i+1, recv)
		require.NoError(t, err)
		cs = append(cs, senderConn{s, r})
	}
	// The responder's handshake sample arrives half an RTT after the
	// initiator's; let every connection settle.
	require.NoError(t, n.RunFor(4*(oneWay+farExtra)))
	return n, cs
}

// postAll posts one receive of capacity bytes, on flow 0, for every
// sender in cs at the receiver (node 0).
func postAll(t *testing.T, n *transporttest.Net, cs []senderConn, capacity uint64) {
	t.Helper()
	for _, c := range cs {
		_, err := n.PostRecv(0, c.r, 0, transporttest.RecvSpec{Cap: capacity})
		require.NoError(t, err)
	}
}

// TestHandshakeSamplesMinRTT: both ends of a fresh connection know its
// minimum RTT before any DATA: the initiator times its HELLO, the
// responder its HELLO_ACK, which the initiator acknowledges at once.
func TestHandshakeSamplesMinRTT(t *testing.T) {
	const extra = 3 * oneWay
	n, cs := nearFar(t, 1, 1, extra)
	for i, c := range cs {
		want := 2 * oneWay
		if i == 1 {
			want += 2 * extra
		}
		st, ok := n.Node(i + 1).EP.Stats(c.s)
		require.True(t, ok)
		require.InDelta(t, float64(want), float64(st.MinRTT), float64(transport.Microsecond), "initiator %d", i+1)
		st, ok = n.Node(0).EP.Stats(c.r)
		require.True(t, ok)
		require.InDelta(t, float64(want), float64(st.MinRTT), float64(transport.Microsecond), "responder, peer %d", i+1)
	}
}

// TestStartingHintNearSendersFirst: a receiver whose senders sit at two
// distances divides its starting hint among the near ones only when the
// far ones' RTT is at least 3/2 of theirs (docs/spec.md §3.5): their DATA
// cannot arrive before the near senders' first ACK corrects the share.
// Equidistant senders, or ones barely farther, share it among all.
func TestStartingHintNearSendersFirst(t *testing.T) {
	const near, far = 3, 4
	for _, tc := range []struct {
		extra   transport.Time // one way, for the far senders
		nearDiv float64        // divisor of the near senders' starting hint
		farDiv  float64        // and of the far senders'
	}{
		{0, near + far, near + far},
		{oneWay / 4, near + far, near + far}, // RTT 1.25×: counted
		{oneWay, near, near + far},           // 2×, a leaf against the spine
		{2 * oneWay, near, near + far},
	} {
		t.Run(fmt.Sprint(tc.extra), func(t *testing.T) {
			n, cs := nearFar(t, near, far, tc.extra)
			for _, i := range []int{0, near} {
				_, err := n.PostRecv(0, cs[i].r, 0, transporttest.RecvSpec{Cap: 16 << 10})
				require.NoError(t, err)
			}
			require.NoError(t, n.RunFor(2*(oneWay+tc.extra)+transport.Microsecond))
			for _, k := range []struct {
				i   int
				div float64
			}{{0, tc.nearDiv}, {near, tc.farDiv}} {
				st, ok := n.Node(k.i + 1).EP.Stats(cs[k.i].s)
				require.True(t, ok)
				want := float64(linkRate) / k.div
				require.InDelta(t, want, float64(st.RateHint), 0.01*want, "sender %d hinted %d B/s", k.i+1, st.RateHint)
			}
		})
	}
}

// TestNearStartCorrectedAtFirstData: a near sender hinted the near share
// gets the share among every posted sender in the acknowledgement of its
// first DATA, which leaves at once, not after the receiver's AckDelay: the
// far senders' DATA arrives one near RTT later. Every sender has its
// message ready, so none of them answers its RECV_READY as idle.
func TestNearStartCorrectedAtFirstData(t *testing.T) {
	const near, far = 3, 4
	n, cs := nearFar(t, near, far, oneWay)
	start := n.Now()
	for i := range cs {
		_, err := n.Send(i+1, cs[i].s, 0, make([]byte, 64<<10), 0)
		require.NoError(t, err)
	}
	postAll(t, n, cs, 64<<10)
	nearShare, all := float64(linkRate)/near, float64(linkRate)/(near+far)
	// The RECV_READY reaches the sender after one way, its DATA the
	// receiver after two, the ACK the sender after three; a delayed ACK
	// would arrive AckDelay (here srtt/4 = 2 µs) later.
	hinted := func() float64 {
		st, ok := n.Node(1).EP.Stats(cs[0].s)
		require.True(t, ok)
		return float64(st.RateHint)
	}
	for n.Now() < start+oneWay+transport.Microsecond && hinted() < 0.99*nearShare {
		require.NoError(t, n.RunFor(250*transport.Nanosecond))
	}
	require.InDelta(t, nearShare, hinted(), 0.01*nearShare, "starting hint")
	deadline := start + 3*oneWay + 1500*transport.Nanosecond
	for n.Now() < deadline {
		require.NoError(t, n.RunFor(250*transport.Nanosecond))
		if hinted() < 1.01*all {
			return
		}
	}
	t.Fatalf("near sender still hinted %.0f B/s %v after the posts (share among all: %.0f)", hinted(), deadline-start, all)
}
