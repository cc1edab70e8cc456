package udp

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// TestWaitHonoursCancelledContext: Request.Wait drives the datapath for up
// to WaitSpin before it blocks, but a context that has ended must end the
// wait at once all the same, as Wait promises, however long WaitSpin is
// (and while other traffic keeps resetting it).
func TestWaitHonoursCancelledContext(t *testing.T) {
	const waitSpin = time.Minute
	p := newPair(t, Config{WaitSpin: waitSpin})
	rr, err := p.a.Recv(1, [][]byte{make([]byte, 8)}, []uint32{0})
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	got := make(chan error, 1)
	go func() { got <- rr.Wait(ctx) }()
	select {
	case err := <-got:
		require.ErrorIs(t, err, context.Canceled)
	case <-time.After(testTimeout):
		t.Fatalf("Wait with a cancelled context still spins after %v (WaitSpin %v)", testTimeout, waitSpin)
	}
	done, _ := rr.Test()
	require.False(t, done, "the receive stays outstanding")
	// The receive still completes normally afterwards.
	sr, err := p.b.Send(1, []byte("12345678"), 0)
	require.NoError(t, err)
	require.NoError(t, sr.Wait(testCtx(t)))
	require.NoError(t, rr.Wait(testCtx(t)))
}

// TestWaitContextErrorNamesPeer: a Wait that its context ends names the
// peer and the flow of the request it waited for, as the package's other
// errors name their peer, and still reports the context's error. It used
// to return the bare context error, which left a caller waiting on many
// connections to guess which one was stuck.
func TestWaitContextErrorNamesPeer(t *testing.T) {
	p := newPair(t, Config{Seed: 81, Addrs: lo})
	rr, err := p.a.Recv(3, [][]byte{make([]byte, 8)}, []uint32{0})
	require.NoError(t, err)
	sr, err := p.b.Send(4, make([]byte, 8), 0) // no receive is posted for it
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	for _, w := range []struct {
		r    *Request
		c    *Conn
		what string
	}{{rr, p.a, "receive on flow 3"}, {sr, p.b, "send on flow 4"}} {
		err := w.r.Wait(ctx)
		require.ErrorIs(t, err, context.Canceled, w.what)
		var pe *PeerError
		require.ErrorAs(t, err, &pe, "%s: the error names no peer: %v", w.what, err)
		require.Equal(t, w.c.RemoteAddrs(), pe.Peer, w.what)
		require.ErrorContains(t, err, w.c.RemoteAddrs()[0].String(), w.what)
		require.ErrorContains(t, err, w.what)
	}
}
