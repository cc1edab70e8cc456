package udp

import (
	"errors"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/metaroce/metaroce/transport"
)

// TestReleaseFlow: a flow released on both sides after its last message
// refuses further use with transport.ErrInvalid, while other flows of the
// connection go on.
func TestReleaseFlow(t *testing.T) {
	p := newPair(t, Config{})
	ctx := testCtx(t)
	buf := make([]byte, 1000)
	for flow := uint32(3); flow <= 4; flow++ {
		r, err := p.b.Recv(flow, [][]byte{buf}, []uint32{0})
		require.NoError(t, err)
		s, err := p.a.Send(flow, make([]byte, 1000), 0)
		require.NoError(t, err)
		require.NoError(t, s.Wait(ctx))
		require.NoError(t, r.Wait(ctx))
	}
	require.NoError(t, p.a.ReleaseFlow(3))
	require.NoError(t, p.b.ReleaseFlow(3))
	s, err := p.a.Send(3, []byte("late"), 0)
	if err == nil {
		err = s.Wait(ctx)
	}
	require.True(t, errors.Is(err, transport.ErrInvalid), "send on a released flow: %v", err)
	r, err := p.b.Recv(4, [][]byte{buf}, []uint32{0})
	require.NoError(t, err)
	s, err = p.a.Send(4, []byte("still here"), 0)
	require.NoError(t, err)
	require.NoError(t, s.Wait(ctx))
	require.NoError(t, r.Wait(ctx))
	require.Equal(t, "still here", string(buf[:r.Sizes()[0]]))
}
