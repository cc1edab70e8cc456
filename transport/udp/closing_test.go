package udp

import (
	"context"
	"fmt"
	"runtime"
	"testing"

	"github.com/metaroce/metaroce/transport"
	"github.com/stretchr/testify/require"
)

// onLoop runs fn on e's datapath, under the drive lock, and waits for it.
func onLoop(t *testing.T, e *Endpoint, fn func()) {
	t.Helper()
	done := make(chan struct{})
	require.NoError(t, e.enqueue(command{kind: cmdFunc, fn: func() { fn(); close(done) }}))
	<-done
}

// TestNoConnectionsOpenWhileClosing: an endpoint whose Close waits for a
// peer that does not answer its CLOSE neither accepts nor dials
// connections meanwhile. Both used to succeed: the core's Shutdown had
// already run, so the new connection was never closed, the endpoint
// dropped it at its deadline without a word, and the peer whose Dial had
// succeeded learned of it only from its idle timeout.
func TestNoConnectionsOpenWhileClosing(t *testing.T) {
	for _, secret := range [][]byte{nil, []byte("0123456789abcdef0123456789abcdef")} {
		t.Run(fmt.Sprintf("secret=%v", secret != nil), func(t *testing.T) {
			noConnectionsOpenWhileClosing(t, Config{Seed: 21, Addrs: lo, Secret: secret})
		})
	}
}

func noConnectionsOpenWhileClosing(t *testing.T, cfg Config) {
	ea, err := Listen(cfg)
	require.NoError(t, err)
	defer ea.Close()
	cfg.Seed++
	ec, err := Listen(cfg)
	require.NoError(t, err)
	defer ec.Close()
	cfg.Seed++
	// A long CLOSE linger keeps eb closing for the whole test.
	cfg.Core.HandshakeRetry = 500 * transport.Millisecond
	eb, err := Listen(cfg)
	require.NoError(t, err)
	join(t, eb, ec)
	onLoop(t, ec, func() { ec.cfg.DropProb = 1 }) // ec never answers eb's CLOSE
	closed := make(chan error, 1)
	go func() { closed <- eb.Close() }()
	for stopping := false; !stopping; runtime.Gosched() {
		onLoop(t, eb, func() { stopping = eb.stopping })
	}

	ctx := testCtx(t)
	c, err := ea.Dial(ctx, eb.Addrs())
	require.ErrorIs(t, err, ErrRefused, "a closing endpoint accepted a connection")
	require.Nil(t, c)
	require.ErrorContains(t, err, eb.Addrs()[0].String())

	c, err = eb.Dial(ctx, ea.Addrs())
	require.ErrorIs(t, err, ErrEndpointClosed, "a closing endpoint dialed a connection")
	require.Nil(t, c)
	require.ErrorContains(t, err, ea.Addrs()[0].String())

	// A Dial queued before the check in Dial still meets the refusal on
	// the loop.
	c = newConn(eb, ea.Addrs())
	c.dialed = make(chan error, 1)
	blob, err := EncodeAddrs(nil, ea.Addrs())
	require.NoError(t, err)
	require.NoError(t, eb.enqueue(command{kind: cmdDial, conn: c, blob: blob}))
	require.ErrorIs(t, <-c.dialed, ErrEndpointClosed)

	onLoop(t, ec, func() { ec.cfg.DropProb = 0 }) // let eb's Close finish
	require.NoError(t, <-closed)
}

// TestAcceptAfterClose: once Close has been called, Accept fails with
// ErrEndpointClosed even while connections accepted before it still wait
// in the queue. It used to hand them out at random, as if open.
func TestAcceptAfterClose(t *testing.T) {
	ea, err := Listen(Config{Seed: 31})
	require.NoError(t, err)
	defer ea.Close()
	eb, err := Listen(Config{Seed: 32})
	require.NoError(t, err)
	ctx := testCtx(t)
	for range 3 {
		_, err := ea.Dial(ctx, eb.Addrs())
		require.NoError(t, err)
	}
	require.NoError(t, eb.Close())
	for range 64 {
		c, err := eb.Accept(ctx)
		require.ErrorIs(t, err, ErrEndpointClosed)
		require.Nil(t, c)
	}
}

// TestDialContextErrorNamesPeer: a Dial that its context ends names the
// peer it was dialing, like every other Dial error, and still reports the
// context's error.
func TestDialContextErrorNamesPeer(t *testing.T) {
	e, err := Listen(Config{Seed: 41})
	require.NoError(t, err)
	defer e.Close()
	remote := unansweredAddr(t, e)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	c, err := e.Dial(ctx, remote)
	require.Nil(t, c)
	require.ErrorIs(t, err, context.Canceled)
	var pe *PeerError
	require.ErrorAs(t, err, &pe)
	require.Equal(t, remote, pe.Peer)
	require.ErrorContains(t, err, remote[0].String())
}

// TestConfigReportsCoreDefaults: Endpoint.Config reports the effective
// configuration, the core's defaults included; it used to report the
// core's fields the caller left zero as zero.
func TestConfigReportsCoreDefaults(t *testing.T) {
	e, err := Listen(Config{Seed: 51})
	require.NoError(t, err)
	defer e.Close()
	got := e.Config().Core
	want := e.core.Config()
	require.NotZero(t, got.HandshakeRetry)
	require.NotZero(t, got.HandshakeTimeout)
	require.NotZero(t, got.IdleTimeout)
	require.NotZero(t, got.MaxConns)
	require.Equal(t, want.HandshakeRetry, got.HandshakeRetry)
	require.Equal(t, want.HandshakeTimeout, got.HandshakeTimeout)
	require.Equal(t, want.MaxRTO, got.MaxRTO)
	require.Equal(t, want.MaxConns, got.MaxConns)
	require.Equal(t, want.CC, got.CC)
}

// TestCloseDuringLargeSendTellsPeer: a connection closed, from either side,
// right after a large send was queued on it (its DATA leaving, a
// goroutine waiting on it) sends its CLOSE: the peer's connection ends
// with ErrPeerClosed, long before the idle timeout that a lost CLOSE
// would leave it to.
func TestCloseDuringLargeSendTellsPeer(t *testing.T) {
	for _, closer := range []string{"sender", "receiver"} {
		t.Run(closer, func(t *testing.T) {
			p := newPair(t, Config{Core: transport.Config{IdleTimeout: transport.Time(10 * testTimeout)}})
			ctx := testCtx(t)
			msg := pattern(16<<20, 1)
			rr, err := p.b.Recv(1, [][]byte{make([]byte, len(msg))}, []uint32{0})
			require.NoError(t, err)
			sr, err := p.a.Send(1, msg, 0)
			require.NoError(t, err)
			waited := make(chan error, 1)
			go func() { waited <- sr.Wait(ctx) }()
			c, peer := p.a, p.b
			if closer == "receiver" {
				c, peer = p.b, p.a
			}
			require.NoError(t, c.Close())
			// Both requests end, failed by the close (or, on a host
			// slow to run this goroutine, done before it).
			for _, err := range []error{<-waited, rr.Wait(ctx)} {
				if err != nil {
					require.ErrorIs(t, err, transport.ErrClosed)
				}
			}
			select {
			case <-peer.closed:
			case <-ctx.Done():
				t.Fatal("the peer's connection did not end")
			}
			err = peer.closedErr()
			require.ErrorIs(t, err, transport.ErrPeerClosed, "the peer did not learn of the close from its CLOSE")
			require.ErrorContains(t, err, peer.RemoteAddrs()[0].String())
		})
	}
}
