package udp

import (
	"runtime"
	"testing"

	"github.com/stretchr/testify/require"
)

// waitNoConns returns once e holds no Conn: every connection it had has
// ended and its Conn is marked gone.
func waitNoConns(t *testing.T, e *Endpoint) {
	t.Helper()
	for n := -1; n != 0; runtime.Gosched() {
		onLoop(t, e, func() { n = len(e.conns) })
	}
}

// TestAcceptSkipsClosedConnections: a connection whose peer closed it
// while it waited for Accept is not handed out; Accept returns the next
// live one. It used to return the dead connection, whose every call
// failed at once.
func TestAcceptSkipsClosedConnections(t *testing.T) {
	ea, err := Listen(Config{Seed: 71, Addrs: lo})
	require.NoError(t, err)
	defer ea.Close()
	eb, err := Listen(Config{Seed: 72, Addrs: lo})
	require.NoError(t, err)
	defer eb.Close()
	ctx := testCtx(t)

	dead, err := ea.Dial(ctx, eb.Addrs())
	require.NoError(t, err)
	require.NoError(t, dead.Close())
	waitNoConns(t, eb)
	live, err := ea.Dial(ctx, eb.Addrs())
	require.NoError(t, err)

	c, err := eb.Accept(ctx)
	require.NoError(t, err)
	require.NoError(t, c.closedErr(), "Accept returned a connection its peer had closed")
	transfer(t, live, c, 1, pattern(1000, 1))
}

// TestClosedConnectionsFreeAcceptSlots: accepted connections that closed
// before anyone accepted them leave the accept queue, so a full queue of
// dead connections refuses no live dialer. They used to keep their slots
// until an Accept took them: an endpoint that accepted late refused every
// dial once acceptQueueLen peers had come and gone.
func TestClosedConnectionsFreeAcceptSlots(t *testing.T) {
	ea, err := Listen(Config{Seed: 73, Addrs: lo})
	require.NoError(t, err)
	defer ea.Close()
	eb, err := Listen(Config{Seed: 74, Addrs: lo})
	require.NoError(t, err)
	defer eb.Close()
	ctx := testCtx(t)

	for range acceptQueueLen {
		c, err := ea.Dial(ctx, eb.Addrs())
		require.NoError(t, err)
		require.NoError(t, c.Close())
	}
	waitNoConns(t, eb)
	live, err := ea.Dial(ctx, eb.Addrs())
	require.NoError(t, err, "a queue of closed connections refused a live dialer")

	c, err := eb.Accept(ctx)
	require.NoError(t, err)
	require.NoError(t, c.closedErr())
	transfer(t, live, c, 1, pattern(1000, 2))
}

// TestConcurrentAccepts: several Accepts waiting at once each take one of
// the connections that arrive, none twice and none left waiting.
func TestConcurrentAccepts(t *testing.T) {
	const n = 8
	ea, err := Listen(Config{Seed: 75, Addrs: lo})
	require.NoError(t, err)
	defer ea.Close()
	eb, err := Listen(Config{Seed: 76, Addrs: lo})
	require.NoError(t, err)
	defer eb.Close()
	ctx := testCtx(t)

	got := make(chan *Conn, n)
	for range n {
		go func() {
			c, err := eb.Accept(ctx)
			if err != nil {
				c = nil
			}
			got <- c
		}()
	}
	for range n {
		_, err := ea.Dial(ctx, eb.Addrs())
		require.NoError(t, err)
	}
	seen := make(map[*Conn]bool)
	for range n {
		c := <-got
		require.NotNil(t, c, "an Accept failed")
		require.False(t, seen[c], "two Accepts returned the same connection")
		seen[c] = true
	}
}
