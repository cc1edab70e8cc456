package udpnet

import (
	"net/netip"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/metaroce/metaroce/net-plugin/internal/backend"
	"github.com/metaroce/metaroce/net-plugin/internal/backend/backendtest"
)

// newBackend returns a loopback backend closed at the end of the test; two
// of them stand for two processes.
func newBackend(t testing.TB, seed uint64) *Backend {
	t.Helper()
	b, err := New(Config{IfNames: "=lo", Timeout: 5 * time.Second, PortsPerPlane: 4, Seed: seed})
	require.NoError(t, err)
	t.Cleanup(func() { _ = b.Close() })
	return b
}

// connect listens on rb and connects from sb.
func connect(t testing.TB, sb, rb *Backend) (*sendConn, *recvConn) {
	t.Helper()
	l, err := rb.Listen(0)
	require.NoError(t, err)
	defer l.Close()
	d, err := sb.Dial(0, l.Handle())
	require.NoError(t, err)
	var sc backend.SendConn
	var rc backend.RecvConn
	backendtest.PollUntil(t, "connect", func() bool {
		if sc == nil {
			sc, err = d.Step()
			require.NoError(t, err)
		}
		if rc == nil {
			rc, err = l.Accept()
			require.NoError(t, err)
		}
		return sc != nil && rc != nil
	})
	t.Cleanup(func() { _ = sc.Close(); _ = rc.Close() })
	return sc.(*sendConn), rc.(*recvConn)
}

func TestTransferGroupedTags(t *testing.T) {
	sc, rc := connect(t, newBackend(t, 1), newBackend(t, 2))
	backendtest.GroupedTransfer(t, sc, rc, 2)
}

// TestConnectionShared checks that every comm between two endpoints, in
// both directions, rides one MetaRoCE connection on its own flow, and that
// the connection closes with its last comm.
func TestConnectionShared(t *testing.T) {
	a, b := newBackend(t, 3), newBackend(t, 4)
	type pair struct {
		sc *sendConn
		rc *recvConn
	}
	var pairs []pair
	for i := range 6 {
		from, to := a, b
		if i%2 == 1 {
			from, to = b, a
		}
		sc, rc := connect(t, from, to)
		pairs = append(pairs, pair{sc, rc})
	}
	flows := map[uint32]bool{}
	for _, p := range pairs {
		flows[p.sc.flow] = true
		require.Equal(t, p.sc.flow, p.rc.flow)
	}
	// a's side of every pair is the same peer object, and so is b's.
	for i, p := range pairs {
		ap, bp := p.sc.p, p.rc.p
		if i%2 == 1 {
			ap, bp = bp, ap
		}
		require.Same(t, pairs[0].sc.p, ap, "pair %d", i)
		require.Same(t, pairs[0].rc.p, bp, "pair %d", i)
	}
	// Messages stay on their own flow.
	for i, p := range pairs {
		buf := make([]byte, 8)
		r, err := p.rc.Irecv([][]byte{buf}, []int32{int32(i)})
		require.NoError(t, err)
		s, err := p.sc.Isend([]byte("flow "+strconv.Itoa(i)+"!"), int32(i))
		require.NoError(t, err)
		backendtest.Wait(t, s, nil)
		backendtest.Wait(t, r, nil)
		require.Equal(t, "flow "+strconv.Itoa(i)+"!", string(buf[:len("flow 0!")]))
	}
	ap := pairs[0].sc.p
	a.devs[0].mu.Lock()
	require.Equal(t, len(pairs), ap.refs)
	a.devs[0].mu.Unlock()
	for _, p := range pairs {
		require.NoError(t, p.sc.Close())
		require.NoError(t, p.rc.Close())
	}
	a.devs[0].mu.Lock()
	require.Zero(t, ap.refs)
	require.True(t, ap.dead)
	require.Empty(t, a.devs[0].peers)
	a.devs[0].mu.Unlock()
	// A new comm after the last one closed dials a fresh connection.
	sc, _ := connect(t, a, b)
	require.NotSame(t, ap, sc.p)
}

func TestOversizeFailsBothSides(t *testing.T) {
	sc, rc := connect(t, newBackend(t, 5), newBackend(t, 6))
	r, err := rc.Irecv([][]byte{make([]byte, 10)}, []int32{0})
	require.NoError(t, err)
	s, err := sc.Isend(make([]byte, 11), 0)
	require.NoError(t, err)
	for name, q := range map[string]backend.Request{"receive": r, "send": s} {
		backendtest.PollUntil(t, name, func() bool {
			_, err := q.Test(nil)
			if err != nil {
				require.ErrorIs(t, err, backend.ErrInvalidUsage, name)
				require.ErrorContains(t, err, "truncated")
				require.ErrorContains(t, err, "127.0.0.1:")
			}
			return err != nil
		})
	}
	// The connection survives: the next message goes through.
	buf := make([]byte, 4)
	r, err = rc.Irecv([][]byte{buf}, []int32{1})
	require.NoError(t, err)
	s, err = sc.Isend([]byte("next"), 1)
	require.NoError(t, err)
	backendtest.Wait(t, s, nil)
	backendtest.Wait(t, r, nil)
	require.Equal(t, "next", string(buf))
}

func TestPeerShutdownFailsPendingReceive(t *testing.T) {
	a := newBackend(t, 7)
	_, rc := connect(t, a, newBackend(t, 8))
	r, err := rc.Irecv([][]byte{make([]byte, 10)}, []int32{1})
	require.NoError(t, err)
	require.NoError(t, a.Close())
	backendtest.PollUntil(t, "failed receive", func() bool {
		_, err := r.Test(nil)
		if err != nil {
			require.ErrorContains(t, err, "peer 127.0.0.1:")
		}
		return err != nil
	})
}

func TestStaleHandleRefused(t *testing.T) {
	a, b := newBackend(t, 9), newBackend(t, 10)
	connect(t, a, b) // the connection exists, so only the flow is stale
	l, err := b.Listen(0)
	require.NoError(t, err)
	h := append([]byte(nil), l.Handle()...)
	require.NoError(t, l.Close())
	d, err := a.Dial(0, h)
	require.NoError(t, err)
	backendtest.PollUntil(t, "refusal", func() bool {
		sc, err := d.Step()
		require.Nil(t, sc)
		if err != nil {
			require.ErrorIs(t, err, backend.ErrRemote)
			require.ErrorContains(t, err, "refused flow")
		}
		return err != nil
	})
}

func TestSlotsExhaustedMeansRetry(t *testing.T) {
	sc, rc := connect(t, newBackend(t, 11), newBackend(t, 12))
	for i := range MaxRecvRequests {
		r, err := rc.Irecv([][]byte{make([]byte, 1)}, []int32{0})
		require.NoError(t, err)
		require.NotNil(t, r, "receive %d refused", i)
	}
	r, err := rc.Irecv([][]byte{nil}, []int32{0})
	require.NoError(t, err)
	require.Nil(t, r)
	_, err = rc.Irecv(make([][]byte, backend.MaxRecvs+1), make([]int32, backend.MaxRecvs+1))
	require.ErrorIs(t, err, backend.ErrInternal)
	for i := range MaxSendRequests {
		r, err := sc.Isend([]byte{1}, 0)
		require.NoError(t, err)
		require.NotNil(t, r, "send %d refused", i)
	}
	r, err = sc.Isend(nil, 0)
	require.NoError(t, err)
	require.Nil(t, r)
}

// TestCloseWithRequestsInFlight closes a comm with a receive in flight (as
// an NCCL abort does) while another comm shares its connection. As Close
// returns the receive is over; the peer's send on the closed comm fails
// with an error that says so; and the other comm, on the same connection,
// carries on.
func TestCloseWithRequestsInFlight(t *testing.T) {
	a, b := newBackend(t, 13), newBackend(t, 14)
	sc, rc := connect(t, a, b)
	other, otherRecv := connect(t, a, b)
	require.Same(t, rc.p, otherRecv.p, "the two comms should share one connection")
	r, err := rc.Irecv([][]byte{make([]byte, 10)}, []int32{1})
	require.NoError(t, err)
	q := r.(*recvReq).r
	require.NoError(t, rc.Close())
	select {
	case <-q.Done():
	default:
		t.Fatal("receive still in flight after Close")
	}
	require.False(t, rc.p.dead, "closing one comm closed the shared connection")

	s, err := sc.Isend([]byte("late"), 1)
	require.NoError(t, err)
	backendtest.PollUntil(t, "failed send", func() bool {
		_, err := s.Test(nil)
		if err != nil {
			require.ErrorIs(t, err, backend.ErrRemote)
			require.ErrorContains(t, err, "requests in flight")
			require.ErrorContains(t, err, "peer aborted flow")
		}
		return err != nil
	})

	buf := make([]byte, 4)
	r, err = otherRecv.Irecv([][]byte{buf}, []int32{2})
	require.NoError(t, err)
	s, err = other.Isend([]byte("next"), 2)
	require.NoError(t, err)
	backendtest.Wait(t, s, nil)
	backendtest.Wait(t, r, nil)
	require.Equal(t, "next", string(buf))
}

func TestDialBadInput(t *testing.T) {
	b := newBackend(t, 15)
	_, err := b.Dial(0, make([]byte, backend.HandleSize))
	require.ErrorIs(t, err, backend.ErrInvalidArgument)
	_, err = b.Dial(5, nil)
	require.ErrorIs(t, err, backend.ErrInternal)
	two := listenHandle{Flow: 1, Nonce: 1, Addrs: []netip.AddrPort{netip.MustParseAddrPort("127.0.0.1:9"), netip.MustParseAddrPort("127.0.0.2:9")}}
	hb, err := two.Append(nil)
	require.NoError(t, err)
	_, err = b.Dial(0, hb)
	require.ErrorIs(t, err, backend.ErrInvalidUsage)
	require.ErrorContains(t, err, "METAROCE_IFNAMES")
}

func TestDeviceProperties(t *testing.T) {
	b := newBackend(t, 16)
	devs := b.Devices()
	require.Len(t, devs, 1)
	require.Equal(t, "metaroce_lo", devs[0].Name)
	require.Equal(t, DefaultPlaneSpeedMbps, devs[0].SpeedMbps)
	require.Equal(t, 1, devs[0].Planes)
	require.Equal(t, "udp", b.Name())
}

// TestManyCommsOverOneConnection opens and closes comm pairs, in both
// directions, many more times than the connection may hold flows at once:
// every closed comm releases its flow, and both sides' listeners, which
// number their flows alike, never collide on the shared connection.
// Without the release the ninth comm on a side fails.
func TestManyCommsOverOneConnection(t *testing.T) {
	old := maxFlowsPerConn
	maxFlowsPerConn = 8
	t.Cleanup(func() { maxFlowsPerConn = old })
	a, b := newBackend(t, 21), newBackend(t, 22)
	// A pair that stays open keeps the shared connection alive (the last
	// comm to close a peer would otherwise close the connection too).
	connect(t, a, b)
	for i := 0; i < 40; i++ {
		sb, rb := a, b
		if i%2 == 1 {
			sb, rb = b, a
		}
		sc, rc := connect(t, sb, rb)
		buf := make([]byte, 64)
		r, err := rc.Irecv([][]byte{buf}, []int32{int32(i)})
		require.NoError(t, err)
		require.NotNil(t, r)
		msg := []byte("comm " + strconv.Itoa(i))
		s, err := sc.Isend(msg, int32(i))
		require.NoError(t, err)
		require.NotNil(t, s)
		var sizes [backend.MaxRecvs]int
		backendtest.Wait(t, s, nil)
		backendtest.Wait(t, r, sizes[:])
		require.Equal(t, msg, buf[:sizes[0]], "comm %d", i)
		require.NoError(t, sc.Close())
		require.NoError(t, rc.Close())
	}
}

// TestZeroByteMessage: NCCL posts 0-byte receives for empty transfers.
func TestZeroByteMessage(t *testing.T) {
	sc, rc := connect(t, newBackend(t, 1), newBackend(t, 2))
	backendtest.ZeroByteMessage(t, sc, rc)
}

// TestAbort: see backendtest.AbortStopsBufferUse.
func TestAbort(t *testing.T) {
	for _, receiver := range []bool{true, false} {
		sc, rc := connect(t, newBackend(t, 1), newBackend(t, 2))
		backendtest.AbortStopsBufferUse(t, sc, rc, receiver)
	}
}

// TestPeerCommCloseFailsPendingRequests: a comm closed with nothing in
// flight on its own side still ends the requests its peer has posted on
// the flow, while the connection, shared with another comm, stays up. A
// receive posted before the sender's comm closes, and one posted after,
// fail; so does a send to a receiving comm that was closed. Before, the
// close only released the flow, and the peer's requests waited for ever.
func TestPeerCommCloseFailsPendingRequests(t *testing.T) {
	a, b := newBackend(t, 17), newBackend(t, 18)
	sc, rc := connect(t, a, b)
	other, otherRecv := connect(t, a, b)
	require.Same(t, rc.p, otherRecv.p, "the two comms should share one connection")

	failed := func(what string, r backend.Request) {
		backendtest.PollUntil(t, what, func() bool {
			done, err := r.Test(nil)
			require.False(t, done, "%s completed", what)
			if err != nil {
				require.ErrorIs(t, err, backend.ErrRemote)
				// Nothing was in flight at the side that closed:
				// the error must not say otherwise.
				require.ErrorContains(t, err, "closed its end of the comm, which aborts the flow whether or not requests were in flight there")
			}
			return err != nil
		})
	}

	early, err := rc.Irecv([][]byte{make([]byte, 8)}, []int32{1})
	require.NoError(t, err)
	require.NoError(t, sc.Close())
	failed("receive posted before the sender closed", early)
	late, err := rc.Irecv([][]byte{make([]byte, 8)}, []int32{1})
	if err == nil {
		failed("receive posted after the sender closed", late)
	} else {
		require.ErrorIs(t, err, backend.ErrRemote)
	}

	require.NoError(t, otherRecv.Close())
	s, err := other.Isend([]byte("late"), 2)
	if err == nil {
		failed("send to a closed receiving comm", s)
	} else {
		require.ErrorIs(t, err, backend.ErrRemote)
	}
	require.False(t, rc.p.dead, "closing the comms closed the shared connection")
}

// TestConnectRecordsStayBounded: a connection that outlives many comms
// (a job that creates and destroys sub-communicators) keeps a record only
// of the send comms open on it, not of every connect it ever carried.
func TestConnectRecordsStayBounded(t *testing.T) {
	a, b := newBackend(t, 31), newBackend(t, 32)
	keep, _ := connect(t, a, b) // keeps the shared connection alive
	for range 20 {
		sc, rc := connect(t, a, b)
		require.Same(t, keep.p, sc.p, "the comms should share one connection")
		require.NoError(t, sc.Close())
		require.NoError(t, rc.Close())
	}
	d := a.devs[0]
	d.mu.Lock()
	defer d.mu.Unlock()
	require.Len(t, keep.p.flows, 1, "the connection records connects of closed comms")
}

// dialOnce dials handle from sb and polls the connect to its end.
func dialOnce(t *testing.T, sb *Backend, handle []byte) (backend.SendConn, error) {
	t.Helper()
	d, err := sb.Dial(0, handle)
	require.NoError(t, err)
	var sc backend.SendConn
	backendtest.PollUntil(t, "connect", func() bool {
		sc, err = d.Step()
		return sc != nil || err != nil
	})
	return sc, err
}

// TestUsedHandleRefused: a listen handle takes one connect. A second
// connect with it over the same connection is refused while the first
// comm is open (here, as invalid usage), and after that comm closed too,
// with its listener still open or closed (by the listener, as a stale
// handle): closing a comm forgets its connect, but not the listener's
// record of which connections it accepted.
func TestUsedHandleRefused(t *testing.T) {
	a, b := newBackend(t, 33), newBackend(t, 34)
	keep, _ := connect(t, a, b) // keeps the shared connection alive
	l, err := b.Listen(0)
	require.NoError(t, err)
	h := append([]byte(nil), l.Handle()...)
	sc, err := dialOnce(t, a, h)
	require.NoError(t, err)
	var rc backend.RecvConn
	backendtest.PollUntil(t, "accept", func() bool {
		rc, err = l.Accept()
		require.NoError(t, err)
		return rc != nil
	})
	require.Same(t, keep.p, sc.(*sendConn).p)

	_, err = dialOnce(t, a, h)
	require.ErrorIs(t, err, backend.ErrInvalidUsage, "second connect while the first comm is open")
	require.ErrorContains(t, err, "each listen handle takes one connect")

	require.NoError(t, sc.Close())
	require.NoError(t, rc.Close())
	_, err = dialOnce(t, a, h)
	require.ErrorIs(t, err, backend.ErrRemote, "connect with a used handle, its listener open")
	require.ErrorContains(t, err, "refused flow")
	again, err := l.Accept()
	require.NoError(t, err)
	require.Nil(t, again, "the listener queued a refused connect")

	require.NoError(t, l.Close())
	_, err = dialOnce(t, a, h)
	require.ErrorIs(t, err, backend.ErrRemote, "connect with a used handle, its listener closed")
	require.ErrorContains(t, err, "refused flow")
}

// TestLocalAbortIsNotRemote: a request failed by its own comm's Abort
// (deregMr of memory in use: NCCL's teardown of an aborted comm) reports
// an internal error that says the abort was here, as a request posted after
// it does and as the tcp backend reports; the peer's request on the flow
// fails as a remote error.
func TestLocalAbortIsNotRemote(t *testing.T) {
	sc, rc := connect(t, newBackend(t, 35), newBackend(t, 36))
	r, err := rc.Irecv([][]byte{make([]byte, 10)}, []int32{1})
	require.NoError(t, err)
	rc.Abort()
	_, err = r.Test(nil)
	require.ErrorIs(t, err, backend.ErrInternal, "the receive of the aborted comm")
	require.NotErrorIs(t, err, backend.ErrRemote)
	require.ErrorContains(t, err, "aborted here")

	s, err := sc.Isend([]byte("late"), 1)
	require.NoError(t, err)
	backendtest.PollUntil(t, "failed send", func() bool {
		_, err = s.Test(nil)
		return err != nil
	})
	require.ErrorIs(t, err, backend.ErrRemote, "the peer's send")
	require.ErrorContains(t, err, "peer aborted flow")
}

// TestListenerClosedBeforeAccept: a listener closed with a connect that
// its side took in (the dialer's connect completed) but NCCL never
// accepted, as on an aborted setup, fails that comm's sends at the dialer
// instead of leaving them waiting for a receive that will never be posted,
// also while other comms keep the shared connection open.
func TestListenerClosedBeforeAccept(t *testing.T) {
	a, b := newBackend(t, 37), newBackend(t, 38)
	connect(t, a, b) // keeps the shared connection alive
	l, err := b.Listen(0)
	require.NoError(t, err)
	sc, err := dialOnce(t, a, l.Handle())
	require.NoError(t, err)
	t.Cleanup(func() { _ = sc.Close() })
	require.NoError(t, l.Close())
	s, err := sc.Isend([]byte("never received"), 1)
	if err == nil {
		require.NotNil(t, s)
		backendtest.PollUntil(t, "failed send", func() bool {
			_, err = s.Test(nil)
			return err != nil
		})
	}
	require.ErrorIs(t, err, backend.ErrRemote)
	require.ErrorContains(t, err, "peer aborted flow")
}

// TestListenFlowsExhausted: the last flow id a listener can take still
// carries a comm (its data flow fits the datapath's 32 bits), and the
// listen after it fails with an error that says why and what to do,
// instead of wrapping onto flows that the control flow or earlier comms
// used (the datapath refuses a released flow id's reuse on a connection).
func TestListenFlowsExhausted(t *testing.T) {
	a, b := newBackend(t, 41), newBackend(t, 42)
	d := b.devs[0]
	d.mu.Lock()
	d.nextFlow = maxListenFlow - 1
	d.mu.Unlock()

	sc, rc := connect(t, a, b) // listens on flow maxListenFlow
	require.Equal(t, sc.flow, rc.flow)
	require.Equal(t, rc.p.dataFlow(maxListenFlow, true), rc.flow)
	require.GreaterOrEqual(t, rc.flow, uint32(2*maxListenFlow), "the data flow wrapped")
	buf := make([]byte, 4)
	r, err := rc.Irecv([][]byte{buf}, []int32{7})
	require.NoError(t, err)
	s, err := sc.Isend([]byte("last"), 7)
	require.NoError(t, err)
	backendtest.Wait(t, s, nil)
	backendtest.Wait(t, r, nil)
	require.Equal(t, "last", string(buf))

	for range 2 { // and it stays refused
		l, err := b.Listen(0)
		require.True(t, l == nil, "Listen failed with a non-nil Listener %#v", l)
		require.ErrorIs(t, err, backend.ErrInternal)
		require.ErrorContains(t, err, "every flow id")
		require.ErrorContains(t, err, "restart the process")
	}
}

// TestListenErrorReturnsNilListener: a Listen that fails (here on a
// closed backend) returns a nil Listener, not a non-nil interface holding
// a nil *listener, which a caller checking l != nil would go on to use.
func TestListenErrorReturnsNilListener(t *testing.T) {
	b := newBackend(t, 49)
	require.NoError(t, b.Close())
	l, err := b.Listen(0)
	require.ErrorIs(t, err, backend.ErrClosed)
	require.True(t, l == nil, "Listen failed with a non-nil Listener %#v", l)
}
