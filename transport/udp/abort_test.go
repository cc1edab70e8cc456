package udp

import (
	"testing"

	"github.com/metaroce/metaroce/transport"
	"github.com/stretchr/testify/require"
)

// TestAbortFlow: one side aborts a flow with a receive posted, and another
// flow on which the peer's send waits for a receive. As AbortFlow returns
// the receive has failed with ErrFlowAborted; the peer's send fails too,
// naming the peer's abort; and the connection's other flows carry on, in
// both directions (docs/spec.md §3.4, "Aborting a flow").
func TestAbortFlow(t *testing.T) {
	p := newPair(t, Config{})
	ctx := testCtx(t)
	rr, err := p.b.Recv(7, [][]byte{make([]byte, 4096)}, []uint32{0})
	require.NoError(t, err)
	sr, err := p.a.Send(8, pattern(4096, 1), 0)
	require.NoError(t, err)

	p.b.AbortFlow(7)
	done, err := rr.Test()
	require.True(t, done, "the receive is still in flight after AbortFlow returned")
	require.ErrorIs(t, err, transport.ErrFlowAborted)
	require.ErrorContains(t, err, "aborted locally")

	p.b.AbortFlow(8)
	err = sr.Wait(ctx)
	require.ErrorIs(t, err, transport.ErrFlowAborted)
	require.ErrorContains(t, err, "peer aborted flow 8")

	transfer(t, p.a, p.b, 9, pattern(1<<20, 2))
	transfer(t, p.b, p.a, 10, pattern(1<<20, 3))
	r, err := p.b.Recv(7, [][]byte{make([]byte, 10)}, []uint32{0})
	require.NoError(t, err) // refused on the loop: the request fails
	require.ErrorIs(t, r.Wait(ctx), transport.ErrInvalid, "an aborted flow id cannot be used again")
	s, err := p.a.Send(7, nil, 0)
	require.NoError(t, err)
	require.ErrorIs(t, s.Wait(ctx), transport.ErrFlowAborted, "the peer should refuse the flow its peer aborted")
}
