package transport_test

import (
	"fmt"
	"testing"

	"github.com/metaroce/metaroce/transport"
	"github.com/metaroce/metaroce/transport/transporttest"
	"github.com/metaroce/metaroce/transport/wire"
	"github.com/stretchr/testify/require"
)

// Aborts that race with the peer's traffic, a lost NACK or a close: none
// may make either side report data delivered that was thrown away
// (docs/spec.md §3.4, "Aborting a flow").

// isAbortNack reports whether p is a NACK FLOW_ABORTED.
func isAbortNack(p *transporttest.Packet) bool {
	var nk wire.Nack
	if p.Op != wire.OpNack {
		return false
	}
	_, err := wire.ParseNack(&nk, p.Data)
	return err == nil && nk.Reason == wire.NackFlowAborted
}

// loseAbortNacks has the network lose the first k NACK FLOW_ABORTED that
// node src sends; *lost counts them.
func loseAbortNacks(ncfg *transporttest.NetConfig, src, k int, lost *int) {
	prev := ncfg.LossOn
	ncfg.Loss = 1
	ncfg.LossOn = func(p *transporttest.Packet) bool {
		if p.Src == src && isAbortNack(p) && *lost < k {
			*lost++
			return true
		}
		return prev != nil && prev(p)
	}
}

// TestSendAfterAbortFails: the receiver aborts a flow whose RECV_READY
// the sender already holds, and its NACK is lost twice. A send the sender
// matches to that announcement meanwhile must fail: its DATA was thrown
// away, and acknowledging it as a stale copy would complete the send.
func TestSendAfterAbortFails(t *testing.T) {
	ncfg := baseNet(22)
	lost := 0
	loseAbortNacks(&ncfg, 1, 2, &lost)
	n, ca, cb := pair(t, ncfg, baseCfg())
	_, err := n.PostRecv(1, cb, 1, transporttest.RecvSpec{Cap: 4096})
	require.NoError(t, err)
	require.NoError(t, n.RunFor(30*transport.Microsecond)) // the RECV_READY arrives
	require.NoError(t, n.Node(1).EP.AbortFlow(n.Now(), cb, 1))
	_, err = n.Send(0, ca, 1, make([]byte, 4096), 0)
	require.NoError(t, err)
	require.NoError(t, n.RunFor(5*transport.Millisecond))
	require.Equal(t, 2, lost)
	sev := flowEvents(n, 0, transport.EvSendDone, 1)
	require.Len(t, sev, 1)
	require.ErrorIs(t, sev[0].Err, transport.ErrFlowAborted)
	require.Zero(t, n.Node(1).Placed)
	require.NotZero(t, n.Node(1).EP.Counters().Dropped[transport.DropAborted])
}

// TestAbortThenCloseFailsPeerSend: a receiver aborts a flow mid-message
// and closes the connection, at once or shortly after, with its NACK
// delivered or lost. The peer's send must fail every time: the closing
// side acknowledges late DATA only of groups that had landed.
func TestAbortThenCloseFailsPeerSend(t *testing.T) {
	for _, gap := range []transport.Time{0, 2 * transport.Microsecond} {
		for _, loseNack := range []bool{false, true} {
			t.Run(fmt.Sprintf("gap=%v/lost=%v", gap, loseNack), func(t *testing.T) {
				ncfg := baseNet(25)
				lost := 0
				if loseNack {
					loseAbortNacks(&ncfg, 1, 100, &lost)
				}
				n, ca, cb := pair(t, ncfg, baseCfg())
				const size = 256 << 10
				_, err := n.PostRecv(1, cb, 1, transporttest.RecvSpec{Cap: size})
				require.NoError(t, err)
				require.NoError(t, n.RunFor(30*transport.Microsecond))
				_, err = n.Send(0, ca, 1, make([]byte, size), 0)
				require.NoError(t, err)
				require.NoError(t, n.RunUntil(func() bool { return n.Node(1).Placed > 16<<10 }, n.Now()+transport.Millisecond))
				require.NoError(t, n.Node(1).EP.AbortFlow(n.Now(), cb, 1))
				require.NoError(t, n.RunFor(gap))
				n.Node(1).EP.Close(n.Now(), cb)
				require.NoError(t, n.RunFor(graceWait))
				sev := flowEvents(n, 0, transport.EvSendDone, 1)
				require.Len(t, sev, 1)
				require.Error(t, sev[0].Err, "placed %d of %d bytes", n.Node(1).Placed, size)
			})
		}
	}
}

// TestAbortDoesNotResendRecvReady: a RECV_READY lost before its flow was
// aborted is not sent again afterwards (no packet of an aborted flow is),
// and the sender, which never saw it, gets the abort on its send.
func TestAbortDoesNotResendRecvReady(t *testing.T) {
	ncfg := baseNet(23)
	aborted, rrLost := false, false
	rrAfter, nacksLost := 0, 0
	ncfg.Loss = 1
	ncfg.LossOn = func(p *transporttest.Packet) bool {
		var r wire.RecvReady
		if p.Src == 1 && p.Op == wire.OpRecvReady {
			if _, err := wire.ParseRecvReady(&r, p.Data); err == nil && r.Flow == 1 {
				if aborted {
					rrAfter++
				}
				if !rrLost {
					rrLost = true
					return true
				}
			}
		}
		if p.Src == 1 && isAbortNack(p) && nacksLost < 2 {
			nacksLost++
			return true
		}
		return false
	}
	n, ca, cb := pair(t, ncfg, baseCfg())
	_, err := n.Send(0, ca, 1, make([]byte, 4096), 0)
	require.NoError(t, err)
	_, err = n.PostRecv(1, cb, 1, transporttest.RecvSpec{Cap: 4096})
	require.NoError(t, err)
	require.NoError(t, n.RunUntil(func() bool { return rrLost }, n.Now()+time100us))
	require.NoError(t, n.Node(1).EP.AbortFlow(n.Now(), cb, 1))
	aborted = true
	require.NoError(t, n.RunFor(5*transport.Millisecond))
	require.Zero(t, rrAfter, "RECV_READYs of the aborted flow sent after the abort")
	sev := flowEvents(n, 0, transport.EvSendDone, 1)
	require.Len(t, sev, 1)
	require.ErrorIs(t, sev[0].Err, transport.ErrFlowAborted)
}

// TestAbortWhileDialingTellsPeer: a flow aborted while the connection is
// still dialing is announced once it is up, so the peer's later receive on
// it is refused instead of waiting for ever.
func TestAbortWhileDialingTellsPeer(t *testing.T) {
	n := transporttest.New(baseNet(21))
	cfg := baseCfg()
	n.AddNode(cfg)
	cfg.Listen = true
	n.AddNode(cfg)
	ca, err := n.Node(0).EP.Dial(n.Now(), 1)
	require.NoError(t, err)
	_, err = n.Send(0, ca, 5, make([]byte, 4096), 0) // allowed while dialing
	require.NoError(t, err)
	require.NoError(t, n.Node(0).EP.AbortFlow(n.Now(), ca, 5))
	var cb transport.ConnID
	require.NoError(t, n.RunUntil(func() bool {
		for _, ev := range n.Node(1).Events {
			if ev.Kind == transport.EvAccepted {
				cb = ev.Conn
			}
		}
		return cb != 0 && len(flowEvents(n, 0, transport.EvConnected, 0)) > 0
	}, n.Now()+transport.Millisecond))
	require.NoError(t, n.RunFor(time100us))
	_, err = n.PostRecv(1, cb, 5, transporttest.RecvSpec{Cap: 4096})
	require.ErrorIs(t, err, transport.ErrFlowAborted)
}

// TestRepeatedAbortQueuesOneNack: aborting the same flow again queues no
// further NACK, so the control queue stays within the footprint bound and
// the peer hears of the abort once.
func TestRepeatedAbortQueuesOneNack(t *testing.T) {
	cfg := baseCfg()
	cfg.MaxPendingRecvs = 4
	ncfg := baseNet(24)
	sent := 0
	ncfg.LossOn = func(p *transporttest.Packet) bool {
		if p.Src == 1 && isAbortNack(p) {
			sent++
		}
		return false
	}
	n, _, cb := pair(t, ncfg, cfg)
	for range 40 {
		require.NoError(t, n.Node(1).EP.AbortFlow(n.Now(), cb, 9))
	}
	require.NoError(t, transport.CheckFootprint(n.Node(1).EP))
	require.NoError(t, n.RunFor(time100us))
	require.Equal(t, 1, sent)
}
