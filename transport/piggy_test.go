package transport_test

import (
	"testing"

	"github.com/metaroce/metaroce/transport"
	"github.com/metaroce/metaroce/transport/transporttest"
	"github.com/metaroce/metaroce/transport/wire"
	"github.com/stretchr/testify/require"
)

// TestPiggybackPingPong runs small request/response rounds, each receive
// posted just before its message, and checks that acknowledgements ride on
// the sequenced packets (docs/spec.md §3.1): both sides carry and apply
// piggybacked records, fewer ACK datagrams than sequenced packets leave, and
// everything still completes exactly once.
func TestPiggybackPingPong(t *testing.T) {
	n, ca, cb := pair(t, baseNet(3), baseCfg())
	ops := map[wire.Opcode]int{}
	piggy := 0
	n.OnArrive = func(p *transporttest.Packet, _ transport.Time, _ int) {
		ops[p.Op]++
		var pg wire.Piggyback
		if p.Sequenced && wire.ParsePiggy(&pg, p.Data) == nil && pg.HasPiggy {
			piggy++
		}
	}
	const rounds = 50
	msg := make([]byte, 64)
	for i := 0; i < rounds; i++ {
		_, err := n.PostRecv(1, cb, 1, transporttest.RecvSpec{Cap: 64})
		require.NoError(t, err)
		_, err = n.PostRecv(0, ca, 2, transporttest.RecvSpec{Cap: 64})
		require.NoError(t, err)
		_, err = n.Send(0, ca, 1, msg, 0)
		require.NoError(t, err)
		require.NoError(t, n.RunUntil(func() bool { return n.AllDoneAt(1) }, n.Now()+transport.Second))
		_, err = n.Send(1, cb, 2, msg, 0)
		require.NoError(t, err)
		require.NoError(t, n.RunUntil(n.AllDone, n.Now()+transport.Second))
	}
	require.NoError(t, n.RunFor(2*transport.Millisecond))
	require.NoError(t, n.Check(transporttest.CheckOptions{Complete: true}))
	sa, _ := n.Node(0).EP.Stats(ca)
	sb, _ := n.Node(1).EP.Stats(cb)
	t.Logf("per round: %v; piggybacked %d; a %+v; b %+v", perRound(ops, rounds), piggy, sa, sb)
	require.Positive(t, sa.AcksPiggybacked, "the dialer piggybacked nothing")
	require.Positive(t, sb.AcksPiggybacked, "the listener piggybacked nothing")
	require.Equal(t, sa.AcksPiggybacked, sb.PiggyAcksRecv, "piggybacks sent by a, applied by b (no loss)")
	require.Equal(t, sb.AcksPiggybacked, sa.PiggyAcksRecv, "piggybacks sent by b, applied by a (no loss)")
	seq := ops[wire.OpData] + ops[wire.OpRecvReady]
	require.Equal(t, 4*rounds, seq, "2 DATA and 2 RECV_READY per round, nothing repeated")
	// The urgent ACK of each message leaves before the reply is posted;
	// everything else rides on the next packet: at most 2 ACKs a round
	// where separate acknowledgements of every RECV_READY made 4.
	require.LessOrEqual(t, ops[wire.OpAck], 2*rounds, "ACK datagrams")
	require.Zero(t, sa.Retransmits+sb.Retransmits)
}

// perRound divides the packet counts by the number of rounds.
func perRound(ops map[wire.Opcode]int, rounds int) map[string]float64 {
	out := map[string]float64{}
	for op, k := range ops {
		out[op.String()] = float64(k) / float64(rounds)
	}
	return out
}
