package transport_test

import (
	"testing"

	"github.com/metaroce/metaroce/transport"
	"github.com/metaroce/metaroce/transport/transporttest"
	"github.com/metaroce/metaroce/transport/wire"
	"github.com/stretchr/testify/require"
)

// TestAllPathsProbingReprobeWhenPeerHeard: every route of the data sender
// (node 0) dies at once, as when they all hashed onto one failed link. Its
// ACKs take those routes too, so the receiver (node 1), whose only
// sequenced packets are RECV_READYs, hears no acknowledgement either: its
// paths time out, move and probe, and the peer, not having moved yet,
// answers the probes on its dead routes. The receiver is left with every
// path probing. Once the sender moved to live routes its DATA arrives
// again, so when the receiver's probes time out the peer has been heard
// since they left: the receiver must probe again at once rather than after
// ProbeInterval, since until a probe is answered no RECV_READY can leave
// and the sender runs out of announced receives. It once waited the whole
// ProbeInterval (five RTO floors) with the flow stalled.
func TestAllPathsProbingReprobeWhenPeerHeard(t *testing.T) {
	cfg := baseCfg()
	cfg.Planes = 1
	cfg.MinRTO = 100 * transport.Microsecond // ProbeInterval 500 µs
	// While blackout is set, every ACK node 0 sends is lost, whatever
	// its route: its answers to the receiver's first probes are lost, as
	// they were in the simulator, where they left on the sender's dead
	// routes (it had not moved off them yet) and then on a fresh route
	// that was dead too.
	blackout := false
	ncfg := baseNet(3)
	ncfg.Loss = 1
	ncfg.LossOn = func(p *transporttest.Packet) bool { return blackout && p.Src == 0 && p.Op == wire.OpAck }
	n, ca, cb := pair(t, ncfg, cfg)
	const size, window, msgs = 16 << 10, 16, 400
	for i := 0; i < msgs; i++ {
		_, err := n.Send(0, ca, 0, make([]byte, size), 0)
		require.NoError(t, err)
	}
	var cookies []uint64
	post := func() {
		c, err := n.PostRecv(1, cb, 0, transporttest.RecvSpec{Cap: size})
		require.NoError(t, err)
		cookies = append(cookies, c...)
	}
	for i := 0; i < window; i++ {
		post()
	}
	paths := cfg.Planes * cfg.PathsPerPlane
	allProbing, sawAll := func() bool {
		for i := 0; i < paths; i++ {
			if ps, _ := n.Node(1).EP.PathStats(cb, i); ps.Active {
				return false
			}
		}
		return true
	}, false
	var healAt transport.Time
	done := 0
	// step runs until the next message completes and posts another
	// receive, keeping window receives posted.
	step := func(limit transport.Time) {
		c := cookies[done]
		require.NoError(t, n.RunUntil(func() bool {
			if blackout && allProbing() {
				// Every path of the receiver is probing, each
				// with a probe out: the answers are lost.
				if !sawAll {
					sawAll, healAt = true, n.Now()+2*oneWay
				}
				blackout = n.Now() < healAt
			}
			return n.Node(1).RecvBuf(c).Done
		}, limit))
		done++
		if len(cookies) < msgs {
			post()
		}
	}
	for done < msgs/4 {
		step(n.Now() + cfg.MinRTO)
	}
	require.False(t, sawAll)
	down := n.Now()
	for i := 0; i < paths; i++ {
		ps, ok := n.Node(0).EP.PathStats(ca, i)
		require.True(t, ok)
		n.Blackhole(0, int(ps.Plane), int(ps.Entropy), down)
	}
	blackout = true
	// The longest wait for a message after the failure.
	var gap transport.Time
	last := down
	for done < msgs {
		step(down + 20*cfg.MinRTO)
		gap, last = max(gap, n.Now()-last), n.Now()
	}
	require.True(t, sawAll, "the receiver kept an active path: the test shows nothing")
	st, _ := n.Node(1).EP.Stats(cb)
	t.Logf("longest wait for a message after the failure %v; receiver: %d timeouts, %d moves", gap, st.Timeouts, st.PathChanges)
	// The sender moves off its dead routes about one RTO floor after
	// the failure; the receiver's probes time out within another and
	// are answered an RTT after they leave again. ProbeInterval alone
	// is five floors.
	require.Less(t, gap, 2*cfg.MinRTO)
	require.NoError(t, n.RunUntil(n.AllDone, n.Now()+5*cfg.MinRTO))
	require.NoError(t, n.Check(transporttest.CheckOptions{Complete: true}))
}
