package transport_test

import (
	"fmt"
	"testing"

	"github.com/metaroce/metaroce/transport"
	"github.com/metaroce/metaroce/transport/transporttest"
	"github.com/stretchr/testify/require"
)

// TestMessagesOfAFlowGoInOrder: with several receives posted, the messages
// of one flow are sent one after another, so the first completes after
// about its own share of the time, not together with the last (an earlier
// round-robin over all matched messages completed nothing until the end).
func TestMessagesOfAFlowGoInOrder(t *testing.T) {
	n, ca, cb := pair(t, baseNet(1), baseCfg())
	const msgs, size = 8, 256 << 10
	for i := 0; i < msgs; i++ {
		_, err := n.PostRecv(1, cb, 0, transporttest.RecvSpec{Cap: size})
		require.NoError(t, err)
	}
	require.NoError(t, n.RunFor(50*transport.Microsecond)) // RECV_READYs arrive
	start := n.Now()
	for i := 0; i < msgs; i++ {
		_, err := n.Send(0, ca, 0, make([]byte, size), 0)
		require.NoError(t, err)
	}
	var done []transport.Time
	seen := 0
	require.NoError(t, n.RunUntil(func() bool {
		for _, ev := range n.Node(1).Events[seen:] {
			if ev.Kind == transport.EvRecvDone {
				done = append(done, n.Now())
			}
		}
		seen = len(n.Node(1).Events)
		return len(done) == msgs
	}, 100*transport.Millisecond))
	first, last := done[0]-start, done[msgs-1]-start
	require.Less(t, int64(first), int64(last)/3, "first of %d messages done at %v, last at %v", msgs, first, last)
}

// senderConn is one sender's connection to the receiver, seen from each end.
type senderConn struct{ s, r transport.ConnID }

// hintedIncast builds a receiver (node 0) that hints its inbound rate, and
// senders nodes 1..senders connected to it.
func hintedIncast(t *testing.T, seed uint64, senders int) (*transporttest.Net, int, []senderConn) {
	t.Helper()
	n := transporttest.New(baseNet(seed))
	cfg := baseCfg()
	cfg.InboundRate = linkRate
	cfg.Listen = true
	recv := n.AddNode(cfg)
	cfg.Listen = false
	for i := 0; i < senders; i++ {
		n.AddNode(cfg)
	}
	var cs []senderConn
	for i := 0; i < senders; i++ {
		s, r, err := n.Connect(i+1, recv)
		require.NoError(t, err)
		cs = append(cs, senderConn{s, r})
	}
	return n, recv, cs
}

// TestRateHintsCountEveryIncastSender: N senders whose receives are posted
// at one instant are each hinted about InboundRate/N. A cached count that
// was never refreshed once hinted the whole inbound rate to every sender.
func TestRateHintsCountEveryIncastSender(t *testing.T) {
	const senders = 4
	n, recv, cs := hintedIncast(t, 2, senders)
	const size = 4 << 20
	for i, c := range cs {
		_, err := n.PostRecv(recv, c.r, 0, transporttest.RecvSpec{Cap: size})
		require.NoError(t, err)
		_, err = n.Send(i+1, c.s, 0, make([]byte, size), 0)
		require.NoError(t, err)
		// Posts a little apart, as a driver makes them: each one's hint
		// ACK leaves before the next post.
		require.NoError(t, n.RunFor(transport.Microsecond))
	}
	require.NoError(t, n.RunFor(200*transport.Microsecond))
	for i, c := range cs {
		st, ok := n.Node(i + 1).EP.Stats(c.s)
		require.True(t, ok)
		share := float64(linkRate) / senders
		require.InDelta(t, share, float64(st.RateHint), 0.05*share, "sender %d hinted %d B/s", i, st.RateHint)
	}
}

// TestControlOnlyACKsTimeTheRTT: a receiver that sends only RECV_READYs
// measures its RTT from its own send records; the echoed DATA timestamp
// of a path that never carried DATA once gave "RTTs" of hundreds of µs.
func TestControlOnlyACKsTimeTheRTT(t *testing.T) {
	n, ca, cb := pair(t, baseNet(3), baseCfg())
	// Start late: a timestamp echo of 0 then reads as milliseconds.
	require.NoError(t, n.RunFor(3*transport.Millisecond))
	for i := 0; i < 16; i++ {
		_, err := n.PostRecv(1, cb, 0, transporttest.RecvSpec{Cap: 64 << 10})
		require.NoError(t, err)
		_, err = n.Send(0, ca, 0, make([]byte, 64<<10), 0)
		require.NoError(t, err)
	}
	require.NoError(t, n.RunUntil(n.AllDone, 100*transport.Millisecond))
	st, ok := n.Node(1).EP.Stats(cb)
	require.True(t, ok)
	require.Greater(t, st.RTT, transport.Time(0))
	require.Less(t, st.RTT, 4*2*oneWay, "receiver smoothed RTT %v", st.RTT)
}

// TestBlackholedRouteFoundInRTTs: once packets sent after a path's oldest
// one are acknowledged on other paths, the oldest is overdue after a few
// of the path's RTTs, not after the MinRTO floor; the path moves to a new
// route. A clean run of the same transfer times nothing out, so the rule
// does not fire on ordinary queueing.
func TestBlackholedRouteFoundInRTTs(t *testing.T) {
	for _, tc := range []struct {
		name  string
		fault bool
	}{{"clean", false}, {"blackholed", true}} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := baseCfg()
			cfg.MinRTO = 2 * transport.Millisecond // far beyond the run's first phase
			n, ca, cb := pair(t, baseNet(4), cfg)
			const size = 8 << 20
			_, err := n.PostRecv(1, cb, 0, transporttest.RecvSpec{Cap: size})
			require.NoError(t, err)
			_, err = n.Send(0, ca, 0, make([]byte, size), 0)
			require.NoError(t, err)
			require.NoError(t, n.RunFor(100*transport.Microsecond))
			ps, ok := n.Node(0).EP.PathStats(ca, 2)
			require.True(t, ok)
			at := n.Now()
			if tc.fault {
				n.Blackhole(0, int(ps.Plane), int(ps.Entropy), at)
			}
			// 20 base RTTs: a tenth of the RTO floor.
			require.NoError(t, n.RunFor(200*transport.Microsecond))
			st, _ := n.Node(0).EP.Stats(ca)
			if tc.fault {
				require.GreaterOrEqual(t, st.Timeouts, uint64(1), "black hole not found within 20 RTTs")
				require.GreaterOrEqual(t, st.PathChanges, uint64(1))
			} else {
				require.Zero(t, st.Timeouts, "timeouts without a fault")
				require.Zero(t, st.PathChanges)
			}
			require.NoError(t, n.RunUntil(n.AllDone, 100*transport.Millisecond))
		})
	}
}

// TestRateHintsFollowTheSendersThatSend: the receiver posts receives for
// every sender up front, as a pairwise all-to-all does, and the senders then
// send one after another. Each one, alone on the receiver's link once the
// previous transfer completed, is hinted about the whole inbound rate
// within a few RTTs of its first DATA; counting every connection with
// receives posted once hinted each of them InboundRate/senders for the
// whole transfer.
func TestRateHintsFollowTheSendersThatSend(t *testing.T) {
	const senders = 4
	n, recv, cs := hintedIncast(t, 5, senders)
	const size = 4 << 20
	for _, c := range cs {
		_, err := n.PostRecv(recv, c.r, 0, transporttest.RecvSpec{Cap: size})
		require.NoError(t, err)
	}
	// Let the posts age: a schedule starts its later rounds long after.
	require.NoError(t, n.RunFor(200*transport.Microsecond))
	for i, c := range cs {
		_, err := n.Send(i+1, c.s, 0, make([]byte, size), 0)
		require.NoError(t, err)
		require.NoError(t, n.RunFor(10*2*oneWay))
		st, ok := n.Node(i + 1).EP.Stats(c.s)
		require.True(t, ok)
		require.Greater(t, float64(st.RateHint), 0.9*linkRate, "sender %d, alone, hinted %d B/s", i, st.RateHint)
		require.NoError(t, n.RunUntil(func() bool {
			done := 0
			for _, ev := range n.Node(recv).Events {
				if ev.Kind == transport.EvRecvDone {
					done++
				}
			}
			return done == i+1
		}, 10*transport.Millisecond), "transfer %d", i)
	}
}

// TestStartingHintHonoursConcurrentSenders: a sender that has not sent yet
// is hinted the inbound rate divided by the connections that may start at
// once (docs/spec.md §3.5): every established connection by default, at
// most Config.ConcurrentSenders when the application bounds them; halved
// when their first packets queue for longer than an eighth of InitialRTT
// (here 15.6 KB: two senders' 8 KB are not halved, four senders' are)
// and what they announce outlasts two InitialRTTs at the inbound rate
// (here 250 KB: eight senders of 64 KiB are halved, of 16 KiB not).
func TestStartingHintHonoursConcurrentSenders(t *testing.T) {
	const senders = 8
	for _, tc := range []struct {
		concurrent int
		posted     uint64
		divisor    float64
	}{
		{0, 64 << 10, 2 * senders}, {2, 64 << 10, 2}, {4, 64 << 10, 2 * 4}, {1, 64 << 10, 1},
		{senders * 2, 64 << 10, 2 * senders},
		{0, 16 << 10, senders}, {4, 16 << 10, 4}, {4, 60 << 10, 4}, // 60 and 64 KiB: either side of 250 KB
	} {
		t.Run(fmt.Sprint(tc.concurrent, "/", tc.posted), func(t *testing.T) {
			checkStartingHint(t, senders, tc.concurrent, -1, tc.posted, tc.divisor)
		})
	}
}

// TestSetConcurrentSenders: the application may change its bound on
// concurrent senders at run time (a collective's ring hears from one peer,
// its all-to-all from several); receives posted afterwards get starting
// hints divided by the new bound (docs/spec.md §3.5). A ring's receiver,
// with two connections and receives posted on one, hints its sender the
// whole inbound rate instead of a quarter of it.
func TestSetConcurrentSenders(t *testing.T) {
	const senders = 8
	for _, tc := range []struct {
		set     int // -1: keep the configured 4
		divisor float64
	}{{-1, 2 * 4}, {1, 1}, {2, 2}, {0, 2 * senders}} {
		t.Run(fmt.Sprint(tc.set), func(t *testing.T) {
			checkStartingHint(t, senders, 4, tc.set, 64<<10, tc.divisor)
		})
	}
}

// checkStartingHint connects senders nodes to a receiver configured with
// ConcurrentSenders = concurrent (then changed to set at run time unless set
// is negative), posts one receive of posted bytes for the first sender, and
// checks that the hint it gets is the inbound rate over divisor.
func checkStartingHint(t *testing.T, senders, concurrent, set int, posted uint64, divisor float64) {
	t.Helper()
	n := transporttest.New(baseNet(5))
	cfg := baseCfg()
	cfg.InboundRate = linkRate
	cfg.Listen = true
	cfg.ConcurrentSenders = concurrent
	recv := n.AddNode(cfg)
	cfg.Listen, cfg.ConcurrentSenders = false, 0
	for i := 0; i < senders; i++ {
		n.AddNode(cfg)
	}
	var first senderConn
	for i := 0; i < senders; i++ {
		s, r, err := n.Connect(i+1, recv)
		require.NoError(t, err)
		if i == 0 {
			first = senderConn{s, r}
		}
	}
	if set >= 0 {
		n.Node(recv).EP.SetConcurrentSenders(set)
	}
	_, err := n.PostRecv(recv, first.r, 0, transporttest.RecvSpec{Cap: posted})
	require.NoError(t, err)
	require.NoError(t, n.RunFor(2*oneWay+transport.Microsecond))
	st, ok := n.Node(1).EP.Stats(first.s)
	require.True(t, ok)
	want := float64(linkRate) / divisor
	require.InDelta(t, want, float64(st.RateHint), 0.01*want, "hinted %d B/s", st.RateHint)
}
