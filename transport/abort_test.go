package transport_test

import (
	"testing"

	"github.com/metaroce/metaroce/transport"
	"github.com/metaroce/metaroce/transport/transporttest"
	"github.com/metaroce/metaroce/transport/wire"
	"github.com/stretchr/testify/require"
)

// flowData counts the DATA packets of each flow that node src sends, by
// watching every packet the network carries (it loses none itself).
type flowData struct {
	src  int
	sent map[uint32]int
}

func watchData(ncfg *transporttest.NetConfig, src int) *flowData {
	w := &flowData{src: src, sent: map[uint32]int{}}
	prev := ncfg.LossOn
	ncfg.LossOn = func(p *transporttest.Packet) bool {
		var d wire.Data
		if p.Op == wire.OpData && p.Src == w.src {
			if _, err := wire.ParseData(&d, p.Data); err == nil {
				w.sent[d.Flow]++
			}
		}
		return prev != nil && prev(p)
	}
	return w
}

// flowEvents returns node's events of kind on flow.
func flowEvents(n *transporttest.Net, node int, kind transport.EventKind, flow uint32) []transport.Event {
	var out []transport.Event
	for _, ev := range n.Node(node).Events {
		if ev.Kind == kind && ev.Flow == flow {
			out = append(out, ev)
		}
	}
	return out
}

// abortPair starts two 1 MiB transfers, on flows 1 and 2 of one
// connection, and runs until flow 1 is partly placed.
func abortPair(t *testing.T, ncfg transporttest.NetConfig) (n *transporttest.Net, ca, cb transport.ConnID) {
	t.Helper()
	n, ca, cb = pair(t, ncfg, baseCfg())
	const size = 1 << 20
	for _, fl := range []uint32{1, 2} {
		_, err := n.PostRecv(1, cb, fl, transporttest.RecvSpec{Cap: size})
		require.NoError(t, err)
	}
	require.NoError(t, n.RunFor(30*transport.Microsecond))
	for _, fl := range []uint32{1, 2} {
		_, err := n.Send(0, ca, fl, make([]byte, size), 0)
		require.NoError(t, err)
	}
	require.NoError(t, n.RunUntil(func() bool { return n.Node(1).Placed > size/4 }, n.Now()+transport.Millisecond))
	return n, ca, cb
}

// finishOthers checks that the abort left the connection and flow 2
// alone: flow 2's transfer completes, and a new flow carries a message.
func finishOthers(t *testing.T, n *transporttest.Net, ca, cb transport.ConnID) {
	t.Helper()
	require.NoError(t, n.RunFor(5*transport.Millisecond))
	for _, node := range []int{0, 1} {
		kind := transport.EvSendDone
		if node == 1 {
			kind = transport.EvRecvDone
		}
		evs := flowEvents(n, node, kind, 2)
		require.Len(t, evs, 1, "node %d: flow 2 did not finish", node)
		require.NoError(t, evs[0].Err, "node %d: flow 2 suffered from flow 1's abort", node)
	}
	_, err := n.PostRecv(1, cb, 3, transporttest.RecvSpec{Cap: 4096})
	require.NoError(t, err)
	require.NoError(t, n.RunFor(30*transport.Microsecond))
	_, err = n.Send(0, ca, 3, make([]byte, 4096), 0)
	require.NoError(t, err)
	require.NoError(t, n.RunFor(time100us))
	require.Len(t, flowEvents(n, 1, transport.EvRecvDone, 3), 1, "a new flow after the abort carries nothing")
	require.NoError(t, n.Check(transporttest.CheckOptions{AllowFailures: true}))
}

const time100us = 100 * transport.Microsecond

// TestReceiverAbortsFlow: the receiver aborts flow 1 in the middle of a
// transfer. Its receive fails at once with ErrFlowAborted and nothing is
// placed in it afterwards (the harness reports any such write); the
// sender's send fails with ErrFlowAborted once the NACK FLOW_ABORTED
// arrives, after which it sends no more of flow 1. Flow 2, on the same
// connection, completes (docs/spec.md §3.4, "Aborting a flow").
func TestReceiverAbortsFlow(t *testing.T) {
	ncfg := baseNet(5)
	w := watchData(&ncfg, 0)
	n, ca, cb := abortPair(t, ncfg)
	require.NoError(t, n.Node(1).EP.AbortFlow(n.Now(), cb, 1))
	require.NoError(t, n.RunFor(1)) // collects the events
	rev := flowEvents(n, 1, transport.EvRecvDone, 1)
	require.Len(t, rev, 1, "the receive must fail as the abort returns")
	require.ErrorIs(t, rev[0].Err, transport.ErrFlowAborted)
	require.Contains(t, rev[0].Err.Error(), "aborted locally")

	require.NoError(t, n.RunUntil(func() bool { return len(flowEvents(n, 0, transport.EvSendDone, 1)) > 0 }, n.Now()+time100us))
	sev := flowEvents(n, 0, transport.EvSendDone, 1)
	require.ErrorIs(t, sev[0].Err, transport.ErrFlowAborted)
	require.Contains(t, sev[0].Err.Error(), "peer aborted flow 1")
	sent := w.sent[1]
	finishOthers(t, n, ca, cb)
	require.Equal(t, sent, w.sent[1], "DATA of flow 1 left after its send failed")

	_, err := n.Send(0, ca, 1, make([]byte, 10), 0)
	require.ErrorIs(t, err, transport.ErrFlowAborted, "an aborted flow id cannot be used again")
	require.ErrorContains(t, err, "the peer aborted flow 1")
	_, err = n.PostRecv(1, cb, 1, transporttest.RecvSpec{Cap: 10})
	require.ErrorIs(t, err, transport.ErrInvalid)
	require.ErrorContains(t, err, "flow 1 was aborted")
}

// TestSenderAbortsFlow: the sender aborts flow 1 while some of its DATA
// is lost. From then on no DATA of flow 1 leaves, not even a
// retransmission of a lost packet (its buffer is the caller's again);
// the receiver's receive fails with ErrFlowAborted, naming the peer's
// abort; flow 2 completes.
func TestSenderAbortsFlow(t *testing.T) {
	ncfg := baseNet(6)
	ncfg.Loss, ncfg.LossOn = 0.02, sequencedOnly
	w := watchData(&ncfg, 0)
	n, ca, cb := abortPair(t, ncfg)
	require.NoError(t, n.Node(0).EP.AbortFlow(n.Now(), ca, 1))
	sent := w.sent[1]
	require.NoError(t, n.RunFor(1)) // collects the events
	sev := flowEvents(n, 0, transport.EvSendDone, 1)
	require.Len(t, sev, 1)
	require.ErrorIs(t, sev[0].Err, transport.ErrFlowAborted)

	require.NoError(t, n.RunUntil(func() bool { return len(flowEvents(n, 1, transport.EvRecvDone, 1)) > 0 }, n.Now()+transport.Millisecond))
	rev := flowEvents(n, 1, transport.EvRecvDone, 1)
	require.ErrorIs(t, rev[0].Err, transport.ErrFlowAborted)
	require.Contains(t, rev[0].Err.Error(), "peer aborted flow 1")
	finishOthers(t, n, ca, cb)
	require.Equal(t, sent, w.sent[1], "DATA of flow 1 left after the abort")
	require.NotZero(t, connStats(t, n, ca).Retransmits, "no loss was repaired: the test shows nothing")
}

// TestAbortUnusedFlow: aborting a flow that carries nothing yet still
// reaches the peer, so that the peer's later operations on it fail
// instead of waiting for ever; aborting twice is harmless.
func TestAbortUnusedFlow(t *testing.T) {
	n, ca, cb := pair(t, baseNet(7), baseCfg())
	require.NoError(t, n.Node(1).EP.AbortFlow(n.Now(), cb, 9))
	require.NoError(t, n.Node(1).EP.AbortFlow(n.Now(), cb, 9))
	require.NoError(t, n.RunFor(time100us))
	_, err := n.Send(0, ca, 9, make([]byte, 10), 0)
	require.ErrorIs(t, err, transport.ErrFlowAborted)
	require.ErrorContains(t, err, "the peer aborted flow 9")
	require.ErrorIs(t, n.Node(0).EP.AbortFlow(n.Now(), 12345, 1), transport.ErrUnknownConn)
	require.NoError(t, n.Check(transporttest.CheckOptions{}))
}

// sendDone returns node's EvSendDone events.
func sendDone(n *transporttest.Net, node int) []transport.Event {
	var out []transport.Event
	for _, ev := range n.Node(node).Events {
		if ev.Kind == transport.EvSendDone {
			out = append(out, ev)
		}
	}
	return out
}

// deliveredSize is the message of deliverWithAcksLost.
const deliveredSize = 64 << 10

// deliverWithAcksLost sends one deliveredSize message from node 0 to node
// 1 on flow 1 of a pair built on baseNet(seed), losing every ACK node 1
// sends from the send on, and returns once node 1's receive completed.
// Setting *dropAcks to false lets the ACKs through again.
func deliverWithAcksLost(t *testing.T, seed uint64) (n *transporttest.Net, cb transport.ConnID, dropAcks *bool) {
	t.Helper()
	ncfg := baseNet(seed)
	dropAcks = new(bool)
	ncfg.Loss = 1
	ncfg.LossOn = func(p *transporttest.Packet) bool {
		return *dropAcks && p.Src == 1 && p.Op == wire.OpAck
	}
	n, ca, cb := pair(t, ncfg, baseCfg())
	_, err := n.PostRecv(1, cb, 1, transporttest.RecvSpec{Cap: deliveredSize})
	require.NoError(t, err)
	require.NoError(t, n.RunFor(30*transport.Microsecond))
	*dropAcks = true
	_, err = n.Send(0, ca, 1, make([]byte, deliveredSize), 0)
	require.NoError(t, err)
	require.NoError(t, n.RunUntil(func() bool { return len(flowEvents(n, 1, transport.EvRecvDone, 1)) > 0 }, n.Now()+transport.Millisecond))
	return n, cb, dropAcks
}

// abortDelivered checks that deliverWithAcksLost's receive completed and
// its send did not, has node 1 abort flow 1 (releasing it first when
// release is set), lets the ACKs through again 20 µs later, and returns
// the sender's one send completion, which must carry no error: the
// receiver reported the message delivered.
func abortDelivered(t *testing.T, n *transporttest.Net, cb transport.ConnID, dropAcks *bool, release bool) []transport.Event {
	t.Helper()
	require.NoError(t, flowEvents(n, 1, transport.EvRecvDone, 1)[0].Err, "the message landed whole")
	require.Empty(t, sendDone(n, 0), "the send completed although the ACKs were lost: the test shows nothing")
	if release {
		require.NoError(t, n.Node(1).EP.ReleaseFlow(n.Now(), cb, 1))
	}
	require.NoError(t, n.Node(1).EP.AbortFlow(n.Now(), cb, 1))
	require.NoError(t, n.RunFor(20*transport.Microsecond))
	*dropAcks = false
	require.NoError(t, n.RunFor(5*transport.Millisecond))
	sends := sendDone(n, 0)
	require.Len(t, sends, 1)
	require.NoError(t, sends[0].Err, "the receiver reported the message delivered")
	return sends
}

// TestAbortAfterDeliveryCompletesPeerSend: the receiver gets a whole
// message (EvRecvDone, no error) but its ACKs are lost, and it then aborts
// the flow. Its NACK FLOW_ABORTED says that group 0 was delivered (msg 1,
// docs/spec.md §2.7), so the sender completes its send successfully
// instead of failing it with ErrFlowAborted: both sides report the
// message delivered (§3.4, "Aborting a flow"). Before the NACK carried
// this, the sender failed every send not yet fully acknowledged.
func TestAbortAfterDeliveryCompletesPeerSend(t *testing.T) {
	n, cb, dropAcks := deliverWithAcksLost(t, 5)
	sends := abortDelivered(t, n, cb, dropAcks, false)
	require.EqualValues(t, deliveredSize, sends[0].Len)
	require.NoError(t, n.Check(transporttest.CheckOptions{AllowFailures: true}))
}

// TestAbortCompletesPeerSendOfLandedGroup: the second message of a flow
// lands whole behind the first, which misses a segment, and every ACK of
// the receiver is lost; the receiver aborts. The abort reports the second
// receive delivered, and the NACK FLOW_ABORTED names its group in the
// bitmap beyond msg (docs/spec.md §2.7): the sender completes the second
// send and fails only the first, so both sides agree on both messages
// (§3.4).
func TestAbortCompletesPeerSendOfLandedGroup(t *testing.T) {
	ncfg := baseNet(8)
	dropAcks := false
	ncfg.Loss = 1
	ncfg.LossOn = func(p *transporttest.Packet) bool {
		return dropAcks && p.Src == 1 && p.Op == wire.OpAck || firstSegmentOfFirstMessage(p)
	}
	n, ca, cb := pair(t, ncfg, baseCfg())
	postTwo(t, n, cb, 1)
	dropAcks = true
	for _, size := range []int{first, second} {
		_, err := n.Send(0, ca, 1, make([]byte, size), 0)
		require.NoError(t, err)
	}
	require.NoError(t, n.RunUntil(func() bool { return int(n.Node(1).Placed) == first-4096+second }, n.Now()+transport.Millisecond))
	require.Empty(t, sendDone(n, 0), "a send completed although the ACKs were lost: the test shows nothing")
	require.NoError(t, n.Node(1).EP.AbortFlow(n.Now(), cb, 1))
	require.NoError(t, n.RunFor(20*transport.Microsecond))
	dropAcks = false
	require.NoError(t, n.RunFor(5*transport.Millisecond))

	recvs := flowEvents(n, 1, transport.EvRecvDone, 1)
	sends := sendDone(n, 0)
	require.Len(t, recvs, 2)
	require.Len(t, sends, 2)
	require.ErrorIs(t, recvs[0].Err, transport.ErrFlowAborted)
	require.ErrorIs(t, sends[0].Err, transport.ErrFlowAborted)
	require.NoError(t, recvs[1].Err, "the second message landed whole before the abort")
	require.NoError(t, sends[1].Err, "the receiver reported the second message delivered")
	require.NoError(t, n.Check(transporttest.CheckOptions{AllowFailures: true}))
}

// TestAbortReleasedFlowCompletesPeerSend: the receiver gets a whole
// message, its ACKs are lost, and it releases the flow, which is freed at
// once (nothing of it is in progress here), then aborts it. The tombstone
// of the release keeps how many groups completed, so the NACK
// FLOW_ABORTED still says the message was delivered and late copies of
// its DATA are still acknowledged: the sender's send completes
// (docs/spec.md §3.4).
func TestAbortReleasedFlowCompletesPeerSend(t *testing.T) {
	n, cb, dropAcks := deliverWithAcksLost(t, 9)
	abortDelivered(t, n, cb, dropAcks, true)
}
