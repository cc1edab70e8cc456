package transport_test

import (
	"testing"

	"github.com/metaroce/metaroce/transport"
	"github.com/metaroce/metaroce/transport/transporttest"
	"github.com/metaroce/metaroce/transport/wire"
	"github.com/stretchr/testify/require"
)

// steadyPair drives a long transfer into steady state with the harness and
// returns the endpoints, so that the allocation tests can then move packets
// between them by hand (the harness itself allocates).
func steadyPair(t *testing.T) (a, b *transport.Endpoint, now transport.Time) {
	cfg := baseCfg()
	cfg.InboundRate = linkRate
	n, ca, cb := pair(t, baseNet(20), cfg)
	const size = 1 << 30 // never completes during the test
	_, err := n.PostRecv(1, cb, 0, transporttest.RecvSpec{Cap: 4096})
	require.NoError(t, err)
	// Post the big receive straight on the endpoint: the harness would
	// allocate a 1 GiB buffer for it, and nothing is copied here.
	require.NoError(t, n.Node(1).EP.PostRecv(n.Now(), cb, 1, []transport.RecvBuf{{Cap: size, Cookie: 1 << 40}}))
	require.NoError(t, n.Node(0).EP.Send(n.Now(), ca, 1, size, 0, 1<<40))
	require.NoError(t, n.RunFor(200*transport.Microsecond))
	return n.Node(0).EP, n.Node(1).EP, n.Now()
}

// TestSteadyStateAllocs: in steady state the core allocates nothing per
// packet on the send path (PollTransmit of DATA) and the receive path
// (HandleDatagram of DATA and of ACK), each measured on its own.
func TestSteadyStateAllocs(t *testing.T) {
	a, b, now := steadyPair(t)
	txBuf := make([]byte, 1<<16)
	ackBuf := make([]byte, 1<<16)
	payload := make([]byte, 4096)
	var pkt []byte
	var ack []byte
	var kinds [16]int
	// Each round: one DATA from a (if windows allow), into b; b's ACK, if
	// any, back into a; the clock moves by one packet time at 100 Gb/s.
	sendData := func() {
		now += 330
		for {
			tx, ok := a.PollTransmit(now, txBuf)
			if !ok {
				pkt = pkt[:0]
				return
			}
			pkt = append(append(pkt[:0], txBuf[:tx.N]...), payload[:tx.Payload.Len]...)
			op := wire.PeekOpcode(pkt)
			kinds[op]++
			if op == wire.OpData {
				return
			}
			b.HandleDatagram(now, transport.Datagram{From: 0, Data: pkt})
		}
	}
	recvData := func() {
		if len(pkt) > 0 {
			b.HandleDatagram(now, transport.Datagram{From: 0, Data: pkt})
		}
		ack = ack[:0]
		if tx, ok := b.PollTransmit(now, ackBuf); ok {
			ack = append(ack, ackBuf[:tx.N]...)
		}
	}
	recvAck := func() {
		if len(ack) > 0 {
			a.HandleDatagram(now, transport.Datagram{From: 1, Data: ack})
			kinds[wire.PeekOpcode(ack)]++
		}
		if a.NextTimeout() <= now {
			a.HandleTimeout(now)
		}
		if b.NextTimeout() <= now {
			b.HandleTimeout(now)
		}
	}
	pkt = make([]byte, 0, 1<<16)
	ack = make([]byte, 0, 1<<16)
	for i := 0; i < 2000; i++ { // warm up the slices
		sendData()
		recvData()
		recvAck()
	}
	// Each step is measured on its own, in the order the packets move.
	var sendA, recvD, recvA float64
	for i := 0; i < 500; i++ {
		sendA += testing.AllocsPerRun(1, sendData)
		recvD += testing.AllocsPerRun(1, recvData)
		recvA += testing.AllocsPerRun(1, recvAck)
	}
	require.Greater(t, kinds[wire.OpData], 1000, "the loop must move DATA")
	require.Greater(t, kinds[wire.OpAck], 200, "the loop must move ACKs")
	require.Zero(t, sendA, "PollTransmit of DATA allocates")
	require.Zero(t, recvD, "HandleDatagram of DATA (and the ACK PollTransmit) allocates")
	require.Zero(t, recvA, "HandleDatagram of ACK allocates")
}
