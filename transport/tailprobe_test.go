package transport_test

import (
	"testing"

	"github.com/metaroce/metaroce/transport"
	"github.com/metaroce/metaroce/transport/transporttest"
	"github.com/metaroce/metaroce/transport/wire"
	"github.com/stretchr/testify/require"
)

// tailCfg is baseCfg with the 1 ms default timer floor, so that a tail
// loss left to the tail-loss timer stands out against one repaired within
// a few RTTs, and a tail-probe floor of about the base RTT, as a driver
// that knows its fabric sets it.
func tailCfg() transport.Config {
	cfg := baseCfg()
	cfg.MinRTO = transport.Millisecond
	cfg.TailProbeFloor = 2 * oneWay
	return cfg
}

// tailNet connects two nodes whose network drops exactly the packets drop
// selects (drop sees every packet once, in the order they are sent), and
// runs a warm-up message so that every path has an RTT sample.
func tailNet(t *testing.T, drop func(p *transporttest.Packet) bool) (*transporttest.Net, transport.ConnID, transport.ConnID) {
	t.Helper()
	armed := false
	ncfg := baseNet(1)
	ncfg.Loss = 1
	ncfg.LossOn = func(p *transporttest.Packet) bool { return armed && drop(p) }
	n, ca, cb := pair(t, ncfg, tailCfg())
	const warm = 64 << 10
	_, err := n.PostRecv(1, cb, 0, transporttest.RecvSpec{Cap: warm})
	require.NoError(t, err)
	_, err = n.Send(0, ca, 0, make([]byte, warm), 0)
	require.NoError(t, err)
	require.NoError(t, n.RunUntil(n.AllDone, n.Now()+transport.Millisecond))
	require.NoError(t, n.RunFor(100*transport.Microsecond)) // the last ACKs settle
	armed = true
	return n, ca, cb
}

// sendTimed posts a receive, sends size bytes from node 0 and returns how
// long the network ran until both completed.
func sendTimed(t *testing.T, n *transporttest.Net, ca, cb transport.ConnID, size int) transport.Time {
	t.Helper()
	_, err := n.PostRecv(1, cb, 0, transporttest.RecvSpec{Cap: uint64(size)})
	require.NoError(t, err)
	require.NoError(t, n.RunFor(20*transport.Microsecond)) // the RECV_READY arrives
	t0 := n.Now()
	_, err = n.Send(0, ca, 0, make([]byte, size), 0)
	require.NoError(t, err)
	require.NoError(t, n.RunUntil(n.AllDone, t0+10*transport.Millisecond))
	took := n.Now() - t0
	require.NoError(t, n.RunFor(transport.Millisecond))
	require.NoError(t, n.Check(transporttest.CheckOptions{Complete: true}))
	return took
}

// firstSent returns a LossOn-style selector that matches the first packet
// for which match holds, and nothing after it.
func firstSent(match func(p *transporttest.Packet) bool) func(p *transporttest.Packet) bool {
	done := false
	return func(p *transporttest.Packet) bool {
		if done || !match(p) {
			return false
		}
		done = true
		return true
	}
}

// lastSegment matches the first transmission of a message's last DATA
// segment: the only one that asks for an immediate ACK without being a
// retransmission.
func lastSegment(p *transporttest.Packet) bool {
	var h wire.Header
	if p.Op != wire.OpData || p.Src != 0 {
		return false
	}
	if _, err := wire.ParseHeader(&h, p.Data); err != nil {
		return false
	}
	return h.Flags&wire.FlagAckReq != 0 && h.Flags&wire.FlagRetransmit == 0
}

// TestTailProbeRepairsLastSegment: the last segment of a message is lost,
// and nothing is sent after it. Its path probes after about two RTTs; the
// probe's acknowledgement shows the gap, and the segment is sent again at
// once: the message completes in a few RTTs, with one retransmission,
// no timeout and no path move. Without the probe the segment waited for
// the 1 ms timer floor and the timeout moved its path.
func TestTailProbeRepairsLastSegment(t *testing.T) {
	n, ca, cb := tailNet(t, firstSent(lastSegment))
	before := connStats(t, n, ca)
	took := sendTimed(t, n, ca, cb, 3*4096)
	st := connStats(t, n, ca)
	t.Logf("completed in %v; tail probes %d, retransmits %d, timeouts %d", took, st.TailProbes-before.TailProbes,
		st.Retransmits-before.Retransmits, st.Timeouts-before.Timeouts)
	require.EqualValues(t, 1, n.Stats.SeqDropped)
	require.Less(t, took, 100*transport.Microsecond, "the lost tail waited for the timer")
	require.EqualValues(t, 1, st.TailProbes-before.TailProbes)
	require.EqualValues(t, 1, st.Retransmits-before.Retransmits)
	require.Equal(t, before.Timeouts, st.Timeouts)
	require.Equal(t, before.PathChanges, st.PathChanges)
	require.Zero(t, st.Spurious)
	require.Zero(t, n.Stats.Redelivered)
}

// TestTailProbeRecoversLostAck: the segment arrives but its ACK is lost.
// The probe's acknowledgement covers the segment too, so the send
// completes a few RTTs late with no retransmission at all; without the
// probe the tail-loss timer fired after 1 ms and resent a segment that had
// arrived (a spurious timeout).
func TestTailProbeRecoversLostAck(t *testing.T) {
	n, ca, cb := tailNet(t, firstSent(func(p *transporttest.Packet) bool { return p.Op == wire.OpAck && p.Src == 1 }))
	before := connStats(t, n, ca)
	took := sendTimed(t, n, ca, cb, 1000)
	st := connStats(t, n, ca)
	require.EqualValues(t, 1, n.Stats.AckDropped)
	require.Less(t, took, 100*transport.Microsecond, "the send waited for the timer")
	require.EqualValues(t, 1, st.TailProbes-before.TailProbes)
	require.Equal(t, before.Retransmits, st.Retransmits)
	require.Equal(t, before.Timeouts, st.Timeouts)
	require.Zero(t, st.Spurious)
}

// TestTailProbeOncePerSilence: the last segment and then the probe sent
// for it are both lost. The path does not probe again: its tail-loss
// timer repairs the segment, as it did before probes existed.
func TestTailProbeOncePerSilence(t *testing.T) {
	seg := firstSent(lastSegment)
	probe := firstSent(func(p *transporttest.Packet) bool { return p.Op == wire.OpProbe && p.Src == 0 })
	n, ca, cb := tailNet(t, func(p *transporttest.Packet) bool { return seg(p) || probe(p) })
	before := connStats(t, n, ca)
	took := sendTimed(t, n, ca, cb, 3*4096)
	st := connStats(t, n, ca)
	require.EqualValues(t, 1, n.Stats.SeqDropped)
	require.EqualValues(t, 2, n.Stats.Dropped)
	require.GreaterOrEqual(t, took, transport.Millisecond)
	require.EqualValues(t, 1, st.TailProbes-before.TailProbes)
	require.EqualValues(t, 1, st.Timeouts-before.Timeouts)
	require.EqualValues(t, 1, st.Retransmits-before.Retransmits)
}

// TestTailProbeSilentWhenAcksKeepUp: on a clean network every
// acknowledgement comes within the probe timeout, so a stream of messages
// of every size draws no probe.
func TestTailProbeSilentWhenAcksKeepUp(t *testing.T) {
	n, ca, cb := tailNet(t, func(*transporttest.Packet) bool { return false })
	before := connStats(t, n, ca)
	for _, size := range []int{1, 4096, 3*4096 + 5, 100_000, 1 << 20} {
		sendTimed(t, n, ca, cb, size)
	}
	st := connStats(t, n, ca)
	require.Equal(t, before.TailProbes, st.TailProbes)
}
