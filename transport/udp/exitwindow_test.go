package udp

import (
	"bytes"
	"fmt"
	"net/netip"
	"runtime"
	"testing"

	"github.com/metaroce/metaroce/transport"
	"github.com/stretchr/testify/require"
)

// waitReturnedOrBlocked returns once returned is ready or a goroutine whose
// stack holds call ("(*Conn).Close", say) is blocked receiving from a
// channel: the call has either come back or is waiting for something the
// test holds up. It reads the goroutines' states, not the clock.
func waitReturnedOrBlocked(t *testing.T, returned <-chan bool, call string) {
	t.Helper()
	ctx := testCtx(t)
	frame := []byte("udp." + call + "(")
	buf := make([]byte, 1<<20)
	for ; ; runtime.Gosched() {
		if len(returned) > 0 {
			return
		}
		require.NoError(t, ctx.Err(), "%s neither returned nor blocked", call)
		n := runtime.Stack(buf, true)
		for _, g := range bytes.Split(buf[:n], []byte("\n\n")) {
			head, _, _ := bytes.Cut(g, []byte("\n"))
			if bytes.Contains(head, []byte("[chan receive")) && bytes.Contains(g, frame) {
				return
			}
		}
	}
}

// holdExit stops p's endpoint a with its event loop's exit held inside
// the window where it refuses commands and has not yet failed the
// requests: on a turn of the loop (its last) it runs first, if not nil,
// then queues a send whose notify, which the exit runs first, blocks
// until resume is closed, and marks the endpoint stopping. It returns
// once the exit holds there, a later Send refused.
func holdExit(t *testing.T, p *pair, first func()) (resume chan struct{}) {
	t.Helper()
	inExit, resume := make(chan struct{}), make(chan struct{})
	var queueErr error
	onLoop(t, p.ea, func() {
		if first != nil {
			first()
		}
		_, queueErr = p.a.SendNotify(2, make([]byte, 100), 0, func() {
			close(inExit)
			<-resume
		})
		p.ea.stopping, p.ea.stopDeadline = true, 0
	})
	require.NoError(t, queueErr)
	<-inExit
	_, err := p.a.Send(3, nil, 0)
	require.ErrorIs(t, err, ErrEndpointClosed, "the exit refuses commands by now")
	return resume
}

// TestCallsDuringLoopExitWaitForIt: an AbortFlow or a Conn.Close that
// meets the event loop's exit after it has started refusing commands
// returns only once the exit has failed the requests, as both promise
// (AbortFlow: its flow's requests are done; Close: the connection is gone
// and its requests failed). Both used to return at once on the refusal,
// while the exit had still to fail the requests, which the datapath could
// still touch. A queued send's notify holds the exit in that window.
func TestCallsDuringLoopExitWaitForIt(t *testing.T) {
	for _, tc := range []struct {
		name string
		do   func(c *Conn) error
	}{
		{"AbortFlow", func(c *Conn) error { c.AbortFlow(1); return nil }},
		{"Close", func(c *Conn) error { return c.Close() }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			call := "(*Conn)." + tc.name
			p := newPair(t, Config{Seed: 91, Addrs: lo, Core: transport.Config{HandshakeRetry: 10 * transport.Millisecond}})
			e := p.ea
			recv, err := p.a.Recv(1, [][]byte{make([]byte, 100)}, []uint32{0})
			require.NoError(t, err)
			onLoop(t, e, func() {}) // a turn has posted it

			// The held send is failed first, before the posted receive.
			resume := holdExit(t, p, nil)
			done, _ := recv.Test()
			require.False(t, done, "the exit has not failed the posted receive yet")

			returned := make(chan bool, 1) // whether recv was done by then
			var callErr error
			go func() {
				callErr = tc.do(p.a)
				done, _ := recv.Test()
				returned <- done
			}()
			waitReturnedOrBlocked(t, returned, call)
			close(resume)
			require.True(t, <-returned, "%s returned before the exit failed the posted receive", call)
			require.NoError(t, callErr)
			_, err = recv.Test()
			requireEndpointClosedFor(t, err, p.a, "posted receive")
			<-e.done
		})
	}
}

// dropMalformed hands e's core, on a turn of its loop, one datagram it
// cannot parse, so that its counters hold something to report.
func dropMalformed(t *testing.T, e *Endpoint) {
	t.Helper()
	onLoop(t, e, func() { e.handle(e.now(), netip.MustParseAddrPort("127.0.0.1:9"), 0, 0, []byte{0xff}) })
}

// TestEndpointStatsDuringLoopExit: an Endpoint.Stats that meets the event
// loop's exit reports the core's counters as the exit left them, with no
// connection, as Conn.Stats reports a connection's final counters. One
// that comes after the exit has started refusing commands waits for it to
// end (it used to return at once on the refusal, without the core's
// counters); one queued before, which the exit itself answers, reports the
// same. A queued send's notify holds the exit inside the window.
func TestEndpointStatsDuringLoopExit(t *testing.T) {
	for _, refused := range []bool{true, false} {
		t.Run(fmt.Sprintf("refused=%v", refused), func(t *testing.T) {
			p := newPair(t, Config{Seed: 93, Addrs: lo, Core: transport.Config{HandshakeRetry: 10 * transport.Millisecond}})
			e := p.ea
			dropMalformed(t, e)
			live := e.Stats()
			require.Equal(t, uint64(1), live.Core.Dropped[transport.DropMalformed])
			require.Equal(t, 1, live.Conns)

			returned := make(chan bool, 1)
			var st EndpointStats
			stats := func() { st = e.Stats(); returned <- true }
			var queued func()
			if !refused {
				// Queued behind the holding turn, the loop's last, as
				// the held send is: the exit answers it.
				queued = func() {
					n := e.nCmds.Load()
					go stats()
					for e.nCmds.Load() == n {
						runtime.Gosched()
					}
				}
			}
			resume := holdExit(t, p, queued)
			if refused {
				go stats()
				waitReturnedOrBlocked(t, returned, "(*Endpoint).Stats")
			}
			close(resume)
			<-returned
			require.Equal(t, uint64(1), st.Core.Dropped[transport.DropMalformed], "the core's counters as the exit left them")
			require.Zero(t, st.Conns, "the exit ended the connection")
			<-e.done
			require.Equal(t, st, e.Stats(), "the same once the exit has ended")
		})
	}
}
