package transport_test

import (
	"testing"

	"github.com/metaroce/metaroce/transport"
	"github.com/stretchr/testify/require"
)

// TestHasConn: HasConn reports a connection exactly while the endpoint
// holds it (dialing, established, closing) and Stats still answers for it,
// and not once it has ended; ids never issued, 0 included, are not held.
func TestHasConn(t *testing.T) {
	n, ca, cb := pair(t, baseNet(3), baseCfg())
	a, b := n.Node(0).EP, n.Node(1).EP
	held := func(ep *transport.Endpoint, id transport.ConnID, want bool, what string) {
		t.Helper()
		require.Equal(t, want, ep.HasConn(id), what)
		_, ok := ep.Stats(id)
		require.Equal(t, ok, ep.HasConn(id), "%s: HasConn and Stats disagree", what)
	}
	held(a, ca, true, "established, dialer")
	held(b, cb, true, "established, acceptor")
	held(a, 0, false, "id 0")
	held(a, ca+1, false, "an id never issued")

	// A node that never answers: the dial stays in the handshake.
	n.AddNode(baseCfg())
	dialing, err := a.Dial(n.Now(), 2)
	require.NoError(t, err)
	held(a, dialing, true, "dialing")

	a.Close(n.Now(), ca)
	st, ok := a.Stats(ca)
	require.True(t, ok)
	require.Equal(t, "closing", st.State)
	held(a, ca, true, "closing, before the peer's reply")
	require.NoError(t, n.RunUntil(func() bool { return !a.HasConn(ca) && !b.HasConn(cb) }, n.Now()+transport.Second))
	held(a, ca, false, "closed locally, reply received")
	held(b, cb, false, "closed by the peer")

	a.Close(n.Now(), dialing)
	held(a, dialing, false, "dial abandoned")
}
