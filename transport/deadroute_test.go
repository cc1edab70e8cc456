package transport_test

import (
	"testing"

	"github.com/metaroce/metaroce/transport"
	"github.com/metaroce/metaroce/transport/transporttest"
	"github.com/stretchr/testify/require"
)

// slowRTO is far beyond every phase of the tests below: whatever they
// show happens by the overtaken-packet rule alone.
const slowRTO = 2 * transport.Millisecond

// trickle sends msgs messages of size bytes from node 0 to node 1 while
// node 1 keeps only window receives posted, posting the next one as each
// completes, so that its RECV_READYs leave sparsely, a few per RTT over
// all its paths. When deadRoute is set, the route of node 1's path 0 is
// black-holed (node 1 to node 0) once the connection is up. It returns
// the virtual time the messages took and node 1's connection statistics.
func trickle(t *testing.T, seed uint64, deadRoute bool, msgs, window, size int) (transport.Time, transport.ConnStats) {
	t.Helper()
	cfg := baseCfg()
	cfg.MinRTO = slowRTO
	n, ca, cb := pair(t, baseNet(seed), cfg)
	if deadRoute {
		ps, ok := n.Node(1).EP.PathStats(cb, 0)
		require.True(t, ok)
		n.Blackhole(1, int(ps.Plane), int(ps.Entropy), n.Now())
	}
	start := n.Now()
	for i := 0; i < msgs; i++ {
		_, err := n.Send(0, ca, 0, make([]byte, size), 0)
		require.NoError(t, err)
	}
	var cookies []uint64
	post := func() {
		c, err := n.PostRecv(1, cb, 0, transporttest.RecvSpec{Cap: uint64(size)})
		require.NoError(t, err)
		cookies = append(cookies, c...)
	}
	for i := 0; i < window; i++ {
		post()
	}
	for i := 0; i < msgs; i++ {
		c := cookies[i]
		require.NoError(t, n.RunUntil(func() bool { return n.Node(1).RecvBuf(c).Done }, n.Now()+slowRTO),
			"message %d not received within the RTO floor", i)
		if len(cookies) < msgs {
			post()
		}
	}
	st, ok := n.Node(1).EP.Stats(cb)
	require.True(t, ok)
	return n.Now() - start, st
}

// TestSparseControlOnDeadRouteRecovers: the receiver's RECV_READYs are
// sparse (four receives posted at a time), and the route of one of its
// paths is dead. A RECV_READY lost there is overtaken by the next ones;
// it must be sent again on another path, not into the same route, where
// nothing would overtake it again (the sender runs out of announced
// receives) and the flow would wait for the RTO floor. The second loss on
// that path with no acknowledgement in between shows the route dead: the
// path moves. The whole transfer takes at most a few RTTs longer than
// without the fault.
func TestSparseControlOnDeadRouteRecovers(t *testing.T) {
	const msgs, window, size = 64, 4, 16 << 10
	clean, cst := trickle(t, 11, false, msgs, window, size)
	require.Zero(t, cst.Timeouts)
	require.Zero(t, cst.PathChanges)
	took, st := trickle(t, 11, true, msgs, window, size)
	t.Logf("clean %v, dead route %v, lost %d, timeouts %d, moves %d", clean, took, st.Lost, st.Timeouts, st.PathChanges)
	require.GreaterOrEqual(t, st.Lost, uint64(1), "the dead route carried no RECV_READY: the test shows nothing")
	require.GreaterOrEqual(t, st.PathChanges, uint64(1), "the dead route was never left")
	// 20 base RTTs of extra time: a tenth of the RTO floor.
	require.Less(t, took, clean+20*2*oneWay, "dead route cost %v", took-clean)
}

// TestDeadReplacementRouteProbedAgain: the route of a path dies, and so
// do most of the routes it could move to. A probe on a fresh route that is
// overtaken by the other paths' progress shows that route dead as well
// (the peer answers on the other paths): the path moves again and probes
// at once instead of after ProbeInterval, until a live route answers. An
// overtaken probe once left the path probing for good.
func TestDeadReplacementRouteProbedAgain(t *testing.T) {
	cfg := baseCfg()
	cfg.MinRTO = slowRTO // ProbeInterval 10 ms
	n, ca, cb := pair(t, baseNet(5), cfg)
	const size = 32 << 20
	_, err := n.PostRecv(1, cb, 0, transporttest.RecvSpec{Cap: size})
	require.NoError(t, err)
	_, err = n.Send(0, ca, 0, make([]byte, size), 0)
	require.NoError(t, err)
	require.NoError(t, n.RunFor(100*transport.Microsecond))
	const victim = 2
	ps, ok := n.Node(0).EP.PathStats(ca, victim)
	require.True(t, ok)
	// Keep alive the routes the other paths of the plane use and two
	// spares; black-hole the rest of the plane's pool.
	live := map[int]bool{}
	for i := 0; i < cfg.Planes*cfg.PathsPerPlane; i++ {
		if p, _ := n.Node(0).EP.PathStats(ca, i); i != victim && p.Plane == ps.Plane {
			live[int(p.Entropy)] = true
		}
	}
	spares := 0
	for e := 0; e < 64 && spares < 2; e++ {
		if !live[e] && e != int(ps.Entropy) {
			live[e] = true
			spares++
		}
	}
	at := n.Now()
	for e := 0; e < 64; e++ {
		if !live[e] {
			n.Blackhole(0, int(ps.Plane), e, at)
		}
	}
	require.NoError(t, n.RunUntil(func() bool {
		p, _ := n.Node(0).EP.PathStats(ca, victim)
		return p.Revived > ps.Revived
	}, at+slowRTO), "path %d not revived within the RTO floor", victim)
	p, _ := n.Node(0).EP.PathStats(ca, victim)
	t.Logf("revived after %v, %d moves", n.Now()-at, p.PathChanges-ps.PathChanges)
	require.True(t, live[int(p.Entropy)], "revived on a dead route %d", p.Entropy)
	require.GreaterOrEqual(t, p.PathChanges-ps.PathChanges, uint64(2), "the first fresh route was live: the test shows nothing")
	require.NoError(t, n.RunUntil(n.AllDone, n.Now()+100*transport.Millisecond))
}
