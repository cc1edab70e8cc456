package transport_test

import (
	"testing"

	"github.com/metaroce/metaroce/transport"
	"github.com/metaroce/metaroce/transport/transporttest"
	"github.com/stretchr/testify/require"
)

// TestProbesOfDeadRoutesCarryNoAcks: node 0's routes on plane 0 die (its
// packets there vanish) while it sends node 1 a message for every receive
// node 1 posts, one every 20 µs, so node 0's plane-0 paths probe fresh
// entropies, most of them as dead, again and again. Node 1's RECV_READYs
// travel routes that all work, and node 0 owes them acknowledgements,
// which it holds for up to AckDelay. A probe of a path that is not active
// must leave them to an ACK or a packet of an active path: piggybacked on
// such a probe they mostly vanish with it, and the record counts as sent.
// Over a namespace fabric with one of two planes black-holed, the
// receiving side's healthy paths then sent 600 to 6000 tail probes in 3 s
// instead of about 200, and up to 2900 needless timeouts.
func TestProbesOfDeadRoutesCarryNoAcks(t *testing.T) {
	const (
		msg   = 16 << 10
		every = 20 * transport.Microsecond
		msgs  = 500
	)
	// A software fabric's RTT (hundreds of µs), for which the core holds
	// an acknowledgement up to its full AckDelay.
	ncfg := baseNet(5)
	ncfg.BaseDelay = 100 * transport.Microsecond
	cfg := baseCfg()
	cfg.MinRTO = transport.Millisecond
	cfg.AckDelay = 20 * transport.Microsecond
	n, ca, cb := pair(t, ncfg, cfg)
	for i := 0; i < msgs+20; i++ {
		_, err := n.Send(0, ca, 0, make([]byte, msg), 0)
		require.NoError(t, err)
	}
	post := func() {
		_, err := n.PostRecv(1, cb, 0, transporttest.RecvSpec{Cap: msg})
		require.NoError(t, err)
		require.NoError(t, n.RunFor(every))
	}
	for i := 0; i < 20; i++ {
		post()
	}
	stats := func(node int, c transport.ConnID) transport.ConnStats {
		st, ok := n.Node(node).EP.Stats(c)
		require.True(t, ok)
		return st
	}
	a0, b0 := stats(0, ca), stats(1, cb)
	r := transporttest.AnyRule(n.Now())
	r.Src, r.Plane = 0, 0
	n.AddRule(r)
	for i := 0; i < msgs; i++ {
		post()
	}
	a, b := stats(0, ca), stats(1, cb)
	t.Logf("node 0 (plane 0 dead): timeouts +%d, path moves +%d, acks piggybacked +%d", a.Timeouts-a0.Timeouts, a.PathChanges-a0.PathChanges, a.AcksPiggybacked-a0.AcksPiggybacked)
	t.Logf("node 1 (every route alive): RECV_READYs and probes sent +%d, timeouts +%d (spurious +%d), tail probes +%d, path moves +%d, retransmits +%d",
		b.PacketsSent-b0.PacketsSent, b.Timeouts-b0.Timeouts, b.SpuriousTimeouts-b0.SpuriousTimeouts, b.TailProbes-b0.TailProbes,
		b.PathChanges-b0.PathChanges, b.Retransmits-b0.Retransmits)
	require.Positive(t, a.PathChanges-a0.PathChanges, "node 0's plane-0 paths should have probed other routes")
	// Node 0 sends nothing else that could carry one: full DATA
	// segments have no room, and it posts no receives.
	require.Zero(t, a.AcksPiggybacked-a0.AcksPiggybacked, "acknowledgements left on probes of paths that are not active")
	require.LessOrEqual(t, b.TailProbes-b0.TailProbes, uint64(msgs/50), "node 1's live paths probed their tails for lost acknowledgements")
	require.LessOrEqual(t, b.SpuriousTimeouts-b0.SpuriousTimeouts, uint64(2), "node 1's live paths timed out needlessly")
}
