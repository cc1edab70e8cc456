package udpnet

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/metaroce/metaroce/net-plugin/internal/backend"
	"github.com/metaroce/metaroce/net-plugin/internal/backend/backendtest"
)

// gate returns a hook that reports on entered and then waits for proceed,
// and the two channels.
func gate() (hook func(), entered, proceed chan struct{}) {
	entered, proceed = make(chan struct{}), make(chan struct{})
	return func() { entered <- struct{}{}; <-proceed }, entered, proceed
}

// stepUntilDone polls the dialer dl until its connect ends.
func stepUntilDone(t *testing.T, dl backend.Dialer) (sc backend.SendConn, err error) {
	t.Helper()
	backendtest.PollUntil(t, "connect", func() bool {
		sc, err = dl.Step()
		return sc != nil || err != nil
	})
	return sc, err
}

// TestConnectGivenUpBeforeAcceptIsWithdrawn: a connect whose deadline
// passes after its announcement left and before the listener's accept
// came back has failed at the dialer; the listener, which took the flow
// in meanwhile, drops the comm it queued as soon as the dialer tells it
// (and releases its reference on the connection), instead of holding it
// until the listener closes or handing it to an accept whose peer has
// nothing on the other end.
func TestConnectGivenUpBeforeAcceptIsWithdrawn(t *testing.T) {
	a, b := newBackend(t, 43), newBackend(t, 44)
	keep, keepRC := connect(t, a, b) // keeps the shared connection alive
	ld := b.devs[0]
	hook, entered, proceed := gate()
	ld.mu.Lock()
	ld.beforeAnnounce = hook
	ld.mu.Unlock()
	bl, err := b.Listen(0)
	require.NoError(t, err)
	t.Cleanup(func() { _ = bl.Close() })
	l := bl.(*listener)
	bd, err := a.Dial(0, l.Handle())
	require.NoError(t, err)

	<-entered // the announcement is at the listener, not yet looked at
	bd.(*dialer).cancel()
	sc, err := stepUntilDone(t, bd)
	require.Nil(t, sc)
	require.ErrorContains(t, err, "no answer within")
	close(proceed) // the listener takes the flow in and answers accept

	bp := keepRC.p
	backendtest.PollUntil(t, "withdrawal", func() bool {
		ld.mu.Lock()
		defer ld.mu.Unlock()
		return l.from[bp] && len(l.ready) == 0 && bp.refs == 1
	})
	rc, err := l.Accept()
	require.NoError(t, err)
	require.Nil(t, rc, "the listener hands out the comm of a connect that gave up")
	ad := a.devs[0]
	ad.mu.Lock()
	require.Equal(t, 1, keep.p.refs, "the failed connect kept its reference")
	ad.mu.Unlock()
}

// TestConnectEndingWithAcceptInHandCompletes: a connect whose deadline
// passes when the listener's accept has already reached it (the listener
// holds the comm for NCCL's accept) completes, as the listener sees it,
// instead of failing at the dialer while the listener hands out a comm
// with nothing on the other end. Whichever of the two the dialer's wait
// sees first, the outcome is the same; the rounds give both their turn.
func TestConnectEndingWithAcceptInHandCompletes(t *testing.T) {
	a, b := newBackend(t, 45), newBackend(t, 46)
	connect(t, a, b) // keeps the shared connection alive
	ad := a.devs[0]
	for round := range 16 {
		hook, entered, proceed := gate()
		ad.mu.Lock()
		ad.awaitingAnswer = hook
		ad.mu.Unlock()
		l, err := b.Listen(0)
		require.NoError(t, err)
		bd, err := a.Dial(0, l.Handle())
		require.NoError(t, err)

		<-entered // announced; the answer is not looked at yet
		backendtest.PollUntil(t, "accept", func() bool {
			ad.mu.Lock()
			defer ad.mu.Unlock()
			return len(ad.waiters) == 0 // the accept was handed over
		})
		bd.(*dialer).cancel()
		close(proceed)
		sc, err := stepUntilDone(t, bd)
		require.NoError(t, err, "round %d", round)
		var rc backend.RecvConn
		backendtest.PollUntil(t, "accept", func() bool {
			rc, err = l.Accept()
			require.NoError(t, err)
			return rc != nil
		})
		require.NoError(t, l.Close())

		requireMessageCrosses(t, sc, rc, 3)
		require.NoError(t, sc.Close())
		require.NoError(t, rc.Close())
	}
}

// TestConnectionEndDropsQueuedComms: when a connection ends (here the
// dialer's process closes its endpoint), the comms that listeners queued
// for it, waiting for NCCL's accept, are dropped in the same step, with
// their references on the connection, instead of being held until the
// next Accept or until the listener closes; Accept then hands out none.
func TestConnectionEndDropsQueuedComms(t *testing.T) {
	a, b := newBackend(t, 47), newBackend(t, 48)
	bl, err := b.Listen(0)
	require.NoError(t, err)
	t.Cleanup(func() { _ = bl.Close() })
	l := bl.(*listener)
	sc, err := dialOnce(t, a, l.Handle())
	require.NoError(t, err)
	require.NotNil(t, sc)

	ld := b.devs[0]
	ld.mu.Lock()
	require.Len(t, l.ready, 1, "the connect completed, so the listener queued its comm")
	bp := l.ready[0].p
	ld.mu.Unlock()

	require.NoError(t, a.Close()) // the dialer's side goes away
	backendtest.PollUntil(t, "connection end", func() bool {
		ld.mu.Lock()
		defer ld.mu.Unlock()
		return bp.dead
	})
	ld.mu.Lock()
	queued := len(l.ready)
	ld.mu.Unlock()
	require.Zero(t, queued, "the listener still holds a comm of the ended connection")
	backendtest.PollUntil(t, "reference released", func() bool {
		ld.mu.Lock()
		defer ld.mu.Unlock()
		return bp.refs == 0
	})
	rc, err := l.Accept()
	require.NoError(t, err)
	require.Nil(t, rc, "Accept handed out a comm whose connection had ended")
}

// TestStrayAcceptLeavesLiveCommWorking: an accept that no connect here
// waits for or gave up on (a duplicate, or one from a faulty or hostile
// peer), naming the listener flow of a live send comm, is ignored instead
// of aborting that comm's flow: a message still crosses the comm.
func TestStrayAcceptLeavesLiveCommWorking(t *testing.T) {
	a, b := newBackend(t, 49), newBackend(t, 50)
	sc, rc := connect(t, a, b)
	a.devs[0].handleCtrl(sc.p, ctrlMsg{Kind: ctrlAccept, Flow: sc.connected, Nonce: 1})

	requireMessageCrosses(t, sc, rc, 5)
}

// TestStrayAcceptBeyondListenFlowsLeavesControlFlow: an accept naming
// listener flow 2^31, which no listener takes and whose data flow would
// wrap to the control flow on the side that dialed the connection, is
// ignored there instead of aborting the control flow: the connection
// stays alive and carries the next connect.
func TestStrayAcceptBeyondListenFlowsLeavesControlFlow(t *testing.T) {
	a, b := newBackend(t, 51), newBackend(t, 52)
	sc, _ := connect(t, a, b)
	ap := sc.p
	require.True(t, ap.dialed, "the test needs the side that dialed the connection")
	a.devs[0].handleCtrl(ap, ctrlMsg{Kind: ctrlAccept, Flow: 1 << 31, Nonce: 1})

	next, _ := connect(t, a, b)
	require.Same(t, ap, next.p, "the next connect needed a new connection")
	ad := a.devs[0]
	ad.mu.Lock()
	defer ad.mu.Unlock()
	require.False(t, ap.dead, "the connection ended")
}

// TestAbandonedRecords: a peer remembers at most maxAbandoned given-up
// connects, forgetting the oldest first; an answer uses up the record of
// its flow only when its nonce is the one announced, so that a stray
// answer with another nonce leaves the record for the real one.
func TestAbandonedRecords(t *testing.T) {
	p := &peer{}
	for f := range uint32(maxAbandoned + 1) {
		p.abandonLocked(f+1, uint64(f)+100)
	}
	require.Len(t, p.abandoned, maxAbandoned)
	require.False(t, p.takeAbandonedLocked(1, 100), "the oldest record outlived the bound")
	require.False(t, p.takeAbandonedLocked(2, 7), "a stray nonce matched")
	require.True(t, p.takeAbandonedLocked(2, 101))
	require.False(t, p.takeAbandonedLocked(2, 101), "a record answered twice")
	p.abandonLocked(3, 5) // a later give-up on flow 3 replaces the earlier record
	require.False(t, p.takeAbandonedLocked(3, 102))
	require.True(t, p.takeAbandonedLocked(3, 5))
}

// TestDeclineChecksFlow: even an accept that matches a record of a
// given-up connect is withdrawn only for a listener flow in range and
// with no live comm of this side on it: a record naming a live comm's
// flow, or flow 2^31 (whose data flow wraps to the control flow on the
// side that dialed), leaves the comm and the connection working.
func TestDeclineChecksFlow(t *testing.T) {
	a, b := newBackend(t, 53), newBackend(t, 54)
	sc, rc := connect(t, a, b)
	ap, ad := sc.p, a.devs[0]
	require.True(t, ap.dialed, "the test needs the side that dialed the connection")
	ad.mu.Lock()
	ap.abandonLocked(sc.connected, 9)
	ap.abandonLocked(1<<31, 9)
	ad.mu.Unlock()
	ad.handleCtrl(ap, ctrlMsg{Kind: ctrlAccept, Flow: sc.connected, Nonce: 9})
	ad.handleCtrl(ap, ctrlMsg{Kind: ctrlAccept, Flow: 1 << 31, Nonce: 9})

	requireMessageCrosses(t, sc, rc, 5)
	next, _ := connect(t, a, b)
	require.Same(t, ap, next.p, "the next connect needed a new connection")
	ad.mu.Lock()
	defer ad.mu.Unlock()
	require.False(t, ap.dead, "the connection ended")
	require.Empty(t, ap.abandoned, "the answers left their records")
}

// requireMessageCrosses sends a two-byte message with tag from sc to rc and
// requires it to arrive whole: the comms work.
func requireMessageCrosses(t *testing.T, sc backend.SendConn, rc backend.RecvConn, tag int32) {
	t.Helper()
	buf := make([]byte, 2)
	r, err := rc.Irecv([][]byte{buf}, []int32{tag})
	require.NoError(t, err)
	s, err := sc.Isend([]byte("ok"), tag)
	require.NoError(t, err)
	backendtest.Wait(t, s, nil)
	backendtest.Wait(t, r, nil)
	require.Equal(t, "ok", string(buf))
}
