package udp

import (
	"runtime"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestDialInFlightAtCloseFailsEndpointClosed: a Dial whose handshake is
// still running when the endpoint is closed fails with ErrEndpointClosed,
// naming the peer, as a Dial after Close does: a caller tells its own
// shutdown from a peer that failed or closed by that error. It used to
// fail with the bare transport.ErrClosed the core's Shutdown gave it,
// which reads as the peer or a Conn.Close having closed it.
func TestDialInFlightAtCloseFailsEndpointClosed(t *testing.T) {
	e, err := Listen(Config{Seed: 43})
	require.NoError(t, err)
	defer e.Close()
	remote := unansweredAddr(t, e)
	// Dial's own steps, so that its result is read from the loop's
	// answer and not from its wait on the endpoint's end.
	blob, err := EncodeAddrs(nil, remote)
	require.NoError(t, err)
	c := newConn(e, remote)
	c.dialed = make(chan error, 1)
	require.NoError(t, e.enqueue(command{kind: cmdDial, conn: c, blob: blob}))
	for n := 0; n == 0; runtime.Gosched() { // the handshake has started
		onLoop(t, e, func() { n = e.core.NumConns() })
	}
	require.NoError(t, e.Close())
	err = <-c.dialed
	require.ErrorIs(t, err, ErrEndpointClosed)
	require.ErrorContains(t, err, remote[0].String())
}
