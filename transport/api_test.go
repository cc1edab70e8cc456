package transport_test

import (
	"errors"
	"math/rand/v2"
	"testing"

	"github.com/metaroce/metaroce/transport"
	"github.com/metaroce/metaroce/transport/transporttest"
	"github.com/stretchr/testify/require"
)

// TestGroupedReceiveTags: a send takes the buffer of the oldest receive group
// whose tag equals its own, whatever the order of the sends
// (docs/spec.md §3.4).
func TestGroupedReceiveTags(t *testing.T) {
	n, ca, cb := pair(t, baseNet(3), baseCfg())
	rng := rand.New(rand.NewPCG(3, 3))
	_, err := n.PostRecv(1, cb, 0,
		transporttest.RecvSpec{Cap: 9000, Tag: 1}, transporttest.RecvSpec{Cap: 100, Tag: 2},
		transporttest.RecvSpec{Cap: 70000, Tag: 3}, transporttest.RecvSpec{Cap: 0, Tag: 4})
	require.NoError(t, err)
	_, err = n.PostRecv(1, cb, 0, transporttest.RecvSpec{Cap: 5000, Tag: 1}, transporttest.RecvSpec{Cap: 5000, Tag: 2})
	require.NoError(t, err)
	for _, s := range []struct {
		tag uint32
		n   int
	}{{3, 65536}, {1, 8193}, {4, 0}, {2, 99}, {2, 4097}, {1, 1}} {
		_, err := n.Send(0, ca, 0, fill(rng, s.n), s.tag)
		require.NoError(t, err)
	}
	require.NoError(t, n.RunUntil(n.AllDone, n.Now()+100*transport.Millisecond))
	require.NoError(t, n.Check(transporttest.CheckOptions{Complete: true}))
}

// TestTagMismatch: a send whose tag matches no buffer of the oldest group
// fails, and so does the buffer it was given; both errors say why, and the
// flow carries on.
func TestTagMismatch(t *testing.T) {
	n, ca, cb := pair(t, baseNet(4), baseCfg())
	rc, err := n.PostRecv(1, cb, 0, transporttest.RecvSpec{Cap: 100, Tag: 1}, transporttest.RecvSpec{Cap: 100, Tag: 2})
	require.NoError(t, err)
	_, err = n.PostRecv(1, cb, 0, transporttest.RecvSpec{Cap: 100, Tag: 1})
	require.NoError(t, err)
	_, err = n.Send(0, ca, 0, []byte("first"), 1)
	require.NoError(t, err)
	_, err = n.Send(0, ca, 0, []byte("stray"), 7)
	require.NoError(t, err)
	_, err = n.Send(0, ca, 0, []byte("after"), 1)
	require.NoError(t, err)
	require.NoError(t, n.RunUntil(n.AllDone, n.Now()+100*transport.Millisecond))
	require.NoError(t, n.Check(transporttest.CheckOptions{Complete: true}))
	rb := n.Node(1).RecvBuf(rc[1])
	require.ErrorIs(t, rb.Err, transport.ErrTagMismatch)
	require.Contains(t, rb.Err.Error(), "tag 7")
}

// TestMessageTooLarge: a message longer than the buffer posted for it fails
// on both sides with ErrMessageTooLarge and both sizes in the text; later
// messages on the same flow are unaffected.
func TestMessageTooLarge(t *testing.T) {
	for _, sz := range []int{1001, 4097, 300_000} {
		n, ca, cb := pair(t, baseNet(5), baseCfg())
		rc, err := n.PostRecv(1, cb, 2, transporttest.RecvSpec{Cap: 1000, Tag: 0})
		require.NoError(t, err)
		_, err = n.PostRecv(1, cb, 2, transporttest.RecvSpec{Cap: 1000, Tag: 0})
		require.NoError(t, err)
		_, err = n.Send(0, ca, 2, make([]byte, sz), 0)
		require.NoError(t, err)
		_, err = n.Send(0, ca, 2, []byte("fits"), 0)
		require.NoError(t, err)
		require.NoError(t, n.RunUntil(n.AllDone, n.Now()+100*transport.Millisecond))
		require.NoError(t, n.Check(transporttest.CheckOptions{Complete: true}))
		rb := n.Node(1).RecvBuf(rc[0])
		require.ErrorIs(t, rb.Err, transport.ErrMessageTooLarge)
		var sendErr error
		for _, ev := range n.Node(0).Events {
			if ev.Kind == transport.EvSendDone && ev.Err != nil {
				sendErr = ev.Err
			}
		}
		require.ErrorIs(t, sendErr, transport.ErrMessageTooLarge)
		require.Contains(t, sendErr.Error(), "receiver posted 1000")
		var ce *transport.ConnError
		require.True(t, errors.As(sendErr, &ce))
		require.Equal(t, transport.RemoteID(1), ce.Remote)
	}
}

// TestZeroByteMessages: zero-byte messages complete, alone and between
// others, into zero-capacity and larger buffers.
func TestZeroByteMessages(t *testing.T) {
	n, ca, cb := pair(t, baseNet(6), baseCfg())
	for i, c := range []uint64{0, 10, 0, 4096} {
		_, err := n.PostRecv(1, cb, 1, transporttest.RecvSpec{Cap: c})
		require.NoError(t, err)
		sz := 0
		if i == 3 {
			sz = 4096
		}
		_, err = n.Send(0, ca, 1, make([]byte, sz), 0)
		require.NoError(t, err)
	}
	require.NoError(t, n.RunUntil(n.AllDone, n.Now()+100*transport.Millisecond))
	require.NoError(t, n.Check(transporttest.CheckOptions{Complete: true}))
}

// TestManyFlows: 64 flows, each with several messages, over a lossy network
// with reordering between paths: every flow completes in its own order.
func TestManyFlows(t *testing.T) {
	ncfg := baseNet(7)
	ncfg.Loss, ncfg.LossOn, ncfg.PathSpread = 0.01, sequencedOnly, 10*transport.Microsecond
	n, ca, cb := pair(t, ncfg, baseCfg())
	rng := rand.New(rand.NewPCG(7, 7))
	for m := 0; m < 4; m++ {
		for f := uint32(0); f < 64; f++ {
			sz := rng.IntN(20000)
			_, err := n.PostRecv(1, cb, f, transporttest.RecvSpec{Cap: 20000, Tag: f})
			require.NoError(t, err)
			_, err = n.Send(0, ca, f, fill(rng, sz), f)
			require.NoError(t, err)
		}
	}
	require.NoError(t, n.RunUntil(n.AllDone, n.Now()+time1s))
	require.NoError(t, n.RunFor(time1ms))
	require.NoError(t, n.Check(transporttest.CheckOptions{Complete: true}))
	require.Zero(t, n.Stats.Redelivered)
	require.Equal(t, n.Stats.SeqDropped, n.Totals().Retransmits)
}

const (
	time1s  = transport.Second
	time1ms = transport.Millisecond
)

// TestPeerDies: a peer that vanishes mid-transfer becomes ErrPeerDead on the
// survivor, naming the peer, within IdleTimeout of the last packet heard;
// every outstanding operation fails with it and nothing hangs.
func TestPeerDies(t *testing.T) {
	cfg := baseCfg()
	cfg.IdleTimeout = 5 * transport.Millisecond
	n, ca, cb := pair(t, baseNet(8), cfg)
	_, err := n.PostRecv(1, cb, 0, transporttest.RecvSpec{Cap: 8 << 20})
	require.NoError(t, err)
	_, err = n.Send(0, ca, 0, make([]byte, 8<<20), 0)
	require.NoError(t, err)
	_, err = n.PostRecv(0, ca, 1, transporttest.RecvSpec{Cap: 100})
	require.NoError(t, err)
	dies := n.Now() + 100*transport.Microsecond
	n.Isolate(1, dies)
	closed := func() bool { ok, _ := n.Closed(0, ca); return ok }
	require.NoError(t, n.RunUntil(closed, dies+cfg.IdleTimeout+time1ms))
	_, cerr := n.Closed(0, ca)
	require.ErrorIs(t, cerr, transport.ErrPeerDead)
	require.Contains(t, cerr.Error(), "remote id 1")
	require.LessOrEqual(t, n.Now(), dies+cfg.IdleTimeout+100*transport.Microsecond, "noticed too late")
	require.GreaterOrEqual(t, n.Now(), dies+cfg.IdleTimeout-100*transport.Microsecond, "gave up too early")
	require.True(t, n.AllDoneAt(0), "operations of the dead connection must complete with an error")
	require.NoError(t, n.Check(transporttest.CheckOptions{AllowFailures: true}))
}

// TestIdlePeerDies: with no traffic at all, keepalive probes notice a dead
// peer within IdleTimeout.
func TestIdlePeerDies(t *testing.T) {
	cfg := baseCfg()
	cfg.IdleTimeout = 3 * transport.Millisecond
	n, ca, _ := pair(t, baseNet(9), cfg)
	require.NoError(t, n.RunFor(10*transport.Millisecond)) // keepalives keep it up
	ok, _ := n.Closed(0, ca)
	require.False(t, ok, "an idle connection to a live peer must stay up")
	dies := n.Now()
	n.Isolate(1, dies)
	require.NoError(t, n.RunUntil(func() bool { ok, _ := n.Closed(0, ca); return ok }, dies+2*cfg.IdleTimeout))
	_, err := n.Closed(0, ca)
	require.ErrorIs(t, err, transport.ErrPeerDead)
}

// TestHandshakeTimeout: a Dial to an endpoint that does not listen fails
// with ErrHandshakeTimeout after HandshakeTimeout, with a remedy in the text.
func TestHandshakeTimeout(t *testing.T) {
	n := transporttest.New(baseNet(10))
	cfg := baseCfg()
	cfg.HandshakeTimeout = 20 * transport.Millisecond
	n.AddNode(cfg)
	n.AddNode(cfg) // not listening
	id, err := n.Node(0).EP.Dial(n.Now(), 1)
	require.NoError(t, err)
	require.NoError(t, n.RunUntil(func() bool { ok, _ := n.Closed(0, id); return ok }, time1s))
	_, cerr := n.Closed(0, id)
	require.ErrorIs(t, cerr, transport.ErrHandshakeTimeout)
	require.Contains(t, cerr.Error(), "listening")
	require.InDelta(t, float64(cfg.HandshakeTimeout), float64(n.Now()), float64(transport.Millisecond))
	require.NotZero(t, n.Node(1).EP.Counters().Dropped[transport.DropNotListening])
	require.Zero(t, n.Node(0).EP.NumConns())
}

// TestHandshakeLoss: HELLOs and HELLO_ACKs lost at 50% still connect.
func TestHandshakeLoss(t *testing.T) {
	ncfg := baseNet(11)
	ncfg.Loss = 0.5
	_, ca, cb := pair(t, ncfg, baseCfg())
	require.NotZero(t, ca)
	require.NotZero(t, cb)
}

// TestClose: closing in the middle of a transfer fails the outstanding
// operations on both sides with ErrClosed, then both connections are gone.
func TestClose(t *testing.T) {
	n, ca, cb := pair(t, baseNet(12), baseCfg())
	_, err := n.PostRecv(1, cb, 0, transporttest.RecvSpec{Cap: 4 << 20})
	require.NoError(t, err)
	_, err = n.Send(0, ca, 0, make([]byte, 4<<20), 0)
	require.NoError(t, err)
	require.NoError(t, n.RunFor(50*transport.Microsecond))
	n.Node(0).EP.Close(n.Now(), ca)
	both := func() bool {
		a, _ := n.Closed(0, ca)
		b, _ := n.Closed(1, cb)
		return a && b
	}
	require.NoError(t, n.RunUntil(both, n.Now()+time1s))
	_, errA := n.Closed(0, ca)
	_, errB := n.Closed(1, cb)
	require.NoError(t, errA, "the closing side ends cleanly")
	require.ErrorIs(t, errB, transport.ErrClosed)
	require.True(t, n.AllDoneAt(0))
	require.True(t, n.AllDoneAt(1))
	require.NoError(t, n.Check(transporttest.CheckOptions{AllowFailures: true}))
	require.Zero(t, n.Node(0).EP.NumConns())
	require.Zero(t, n.Node(1).EP.NumConns())
	require.ErrorIs(t, n.Node(0).EP.Send(n.Now(), ca, 0, 1, 0, 99), transport.ErrUnknownConn)
}

// TestOneWayFailureTold: when only node 0's direction fails, node 1 hears
// nothing and gives the connection up after IdleTimeout, and tells node 0
// with a CLOSE (reason idle timeout) on every path, which still reach it:
// node 0's operations fail with ErrPeerDead, saying why, about
// IdleTimeout after the failure. Without the CLOSE node 0 kept hearing
// node 1's packets until node 1 gave up, and failed only IdleTimeout after
// that: twice IdleTimeout.
func TestOneWayFailureTold(t *testing.T) {
	cfg := baseCfg()
	cfg.IdleTimeout = 5 * transport.Millisecond
	n, ca, cb := pair(t, baseNet(11), cfg)
	_, err := n.PostRecv(1, cb, 0, transporttest.RecvSpec{Cap: 8 << 20})
	require.NoError(t, err)
	_, err = n.Send(0, ca, 0, make([]byte, 8<<20), 0)
	require.NoError(t, err)
	_, err = n.PostRecv(0, ca, 1, transporttest.RecvSpec{Cap: 100})
	require.NoError(t, err)
	fails := n.Now() + 100*transport.Microsecond
	r := transporttest.AnyRule(fails)
	r.Src = 0
	n.AddRule(r)
	closed := func() bool { ok, _ := n.Closed(0, ca); return ok }
	require.NoError(t, n.RunUntil(closed, fails+2*cfg.IdleTimeout+time1ms))
	_, errB := n.Closed(1, cb)
	require.ErrorIs(t, errB, transport.ErrPeerDead, "node 1, which heard nothing")
	_, errA := n.Closed(0, ca)
	require.ErrorIs(t, errA, transport.ErrPeerDead)
	require.NotErrorIs(t, errA, transport.ErrClosed, "a failed path, not a peer that closed")
	require.Contains(t, errA.Error(), "gave the connection up")
	require.LessOrEqual(t, n.Now(), fails+cfg.IdleTimeout+time1ms, "node 0 told late")
	require.True(t, n.AllDoneAt(0), "node 0's operations must complete with an error")
}
