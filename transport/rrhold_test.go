package transport_test

import (
	"testing"

	"github.com/metaroce/metaroce/transport"
	"github.com/metaroce/metaroce/transport/transporttest"
	"github.com/metaroce/metaroce/transport/wire"
	"github.com/stretchr/testify/require"
)

// TestRecvReadyAckHeld runs ping-pong rounds with the receives posted one
// round ahead and a pause between rounds longer than a quarter of the RTT
// but shorter than AckDelay, and checks that the acknowledgement of each
// RECV_READY waits for the next round's DATA to carry it (docs/spec.md §3.1)
// instead of leaving as an ACK of its own when srtt/4 expires.
func TestRecvReadyAckHeld(t *testing.T) {
	cfg := baseCfg()
	cfg.AckDelay = 40 * transport.Microsecond
	n, ca, cb := pair(t, baseNet(5), cfg)
	ops := map[wire.Opcode]int{}
	n.OnArrive = func(p *transporttest.Packet, _ transport.Time, _ int) { ops[p.Op]++ }
	post := func() {
		_, err := n.PostRecv(1, cb, 1, transporttest.RecvSpec{Cap: 64})
		require.NoError(t, err)
		_, err = n.PostRecv(0, ca, 2, transporttest.RecvSpec{Cap: 64})
		require.NoError(t, err)
	}
	const rounds = 40
	msg := make([]byte, 64)
	post()
	for i := 0; i < rounds; i++ {
		_, err := n.Send(0, ca, 1, msg, 0)
		require.NoError(t, err)
		require.NoError(t, n.RunUntil(func() bool { return n.AllDoneAt(1) }, n.Now()+transport.Second))
		_, err = n.Send(1, cb, 2, msg, 0)
		require.NoError(t, err)
		require.NoError(t, n.RunUntil(n.AllDone, n.Now()+transport.Second))
		post()
		require.NoError(t, n.RunFor(10*transport.Microsecond))
	}
	require.NoError(t, n.RunFor(2*transport.Millisecond))
	require.NoError(t, n.Check(transporttest.CheckOptions{Complete: false}))
	t.Logf("per round: %v", perRound(ops, rounds))
	// Each message's last packet asks for an ACK, which leaves at once
	// when nothing else goes: at most 2 a round; separate acknowledgements
	// of the RECV_READYs would add 2 more.
	require.LessOrEqual(t, ops[wire.OpAck], 2*rounds+2, "ACK datagrams")
}
