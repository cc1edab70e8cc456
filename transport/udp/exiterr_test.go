package udp

import (
	"testing"

	"github.com/metaroce/metaroce/transport"
	"github.com/stretchr/testify/require"
)

// requireEndpointClosedFor requires that err is ErrEndpointClosed inside a
// PeerError naming peer.
func requireEndpointClosedFor(t *testing.T, err error, peer *Conn, what string) {
	t.Helper()
	require.ErrorIs(t, err, ErrEndpointClosed, what)
	var pe *PeerError
	require.ErrorAs(t, err, &pe, "%s: the error names no peer: %v", what, err)
	require.Equal(t, peer.RemoteAddrs(), pe.Peer, what)
	require.ErrorContains(t, err, peer.RemoteAddrs()[0].String(), what)
}

// TestLoopExitErrorsNamePeer: what the event loop's exit fails names the
// peer it was for, like every other failure, and still matches
// ErrEndpointClosed: a send, a receive and a dial queued behind the loop's
// last turn (as when a shutdown's deadline passes while callers queue
// more), and the calls of a connection that the exit has not marked gone
// yet. The queued ones and the calls used to fail with the bare
// ErrEndpointClosed, which left a user with many connections to guess
// which one it was.
func TestLoopExitErrorsNamePeer(t *testing.T) {
	p := newPair(t, Config{Seed: 61, Addrs: lo, Core: transport.Config{HandshakeRetry: 10 * transport.Millisecond}})
	e := p.ea
	var send, recv *Request
	dial := newConn(e, p.eb.Addrs())
	dial.dialed = make(chan error, 1)
	blob, err := EncodeAddrs(nil, dial.remote)
	require.NoError(t, err)
	var errs [3]error // of the calls made on the loop, checked here
	onLoop(t, e, func() {
		// The loop runs this turn and holds the drive lock: what is
		// queued now waits for the next turn, which never comes.
		send, errs[0] = p.a.Send(1, make([]byte, 100), 0)
		recv, errs[1] = p.a.Recv(1, [][]byte{make([]byte, 100)}, []uint32{0})
		errs[2] = e.enqueue(command{kind: cmdDial, conn: dial, blob: blob})
		// The loop stops after this turn, as at a passed shutdown deadline.
		e.stopping, e.stopDeadline = true, 0
	})
	<-e.done
	for _, err := range errs {
		require.NoError(t, err)
	}

	<-send.Done()
	_, err = send.Test()
	requireEndpointClosedFor(t, err, p.a, "queued send")
	<-recv.Done()
	_, err = recv.Test()
	requireEndpointClosedFor(t, err, p.a, "queued receive")
	requireEndpointClosedFor(t, <-dial.dialed, dial, "queued dial")
	requireEndpointClosedFor(t, dial.closedErr(), dial, "the queued dial's connection")
	requireEndpointClosedFor(t, p.a.closedErr(), p.a, "connection")

	// A connection that a caller found open just before the exit marked
	// it gone: its calls meet the stopped command queue.
	late := newConn(e, p.a.RemoteAddrs())
	_, err = late.Send(1, make([]byte, 100), 0)
	requireEndpointClosedFor(t, err, late, "send after the exit")
	_, err = late.Recv(1, [][]byte{make([]byte, 100)}, []uint32{0})
	requireEndpointClosedFor(t, err, late, "receive after the exit")
	requireEndpointClosedFor(t, late.ReleaseFlow(1), late, "flow release after the exit")
}

// TestLoopExitAnswersQueuedAbort: a flow abort queued behind the event
// loop's last turn is answered by the loop's exit, after the requests it
// waits for have failed, as every other queued command is. The exit used
// to skip an abort's callback: the caller learnt that its requests were
// done only from the endpoint's end, and a caller waiting on the callback
// alone (as AbortFlow's contract allows) waited for ever.
func TestLoopExitAnswersQueuedAbort(t *testing.T) {
	p := newPair(t, Config{Seed: 63, Addrs: lo, Core: transport.Config{HandshakeRetry: 10 * transport.Millisecond}})
	e := p.ea
	// A receive the core holds: the abort's answer promises it is done.
	recv, err := p.a.Recv(1, [][]byte{make([]byte, 100)}, []uint32{0})
	require.NoError(t, err)
	onLoop(t, e, func() {}) // a turn has posted it
	var queued error
	answered := make(chan bool, 1) // whether recv had finished by then
	onLoop(t, e, func() {
		queued = e.enqueue(command{kind: cmdAbort, conn: p.a, flow: 1, fn: func() {
			done, _ := recv.Test()
			answered <- done
		}})
		e.stopping, e.stopDeadline = true, 0
	})
	<-e.done
	require.NoError(t, queued)
	select {
	case done := <-answered:
		require.True(t, done, "the abort was answered before its flow's receive failed")
	default:
		t.Fatal("the loop exited without answering the queued abort")
	}
	_, err = recv.Test()
	requireEndpointClosedFor(t, err, p.a, "posted receive")
}
