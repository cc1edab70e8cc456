package udp

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// TestStatsAfterPeerClosed: when the peer closes, the surviving side's
// Stats and PathStats still report what the connection did, with State
// "closed", instead of zeros.
func TestStatsAfterPeerClosed(t *testing.T) {
	p := newPair(t, Config{})
	ctx := testCtx(t)
	buf := make([]byte, 200000)
	r, err := p.b.Recv(1, [][]byte{buf}, []uint32{0})
	require.NoError(t, err)
	s, err := p.a.Send(1, make([]byte, len(buf)), 0)
	require.NoError(t, err)
	require.NoError(t, s.Wait(ctx))
	require.NoError(t, r.Wait(ctx))
	sent := p.a.Stats().PacketsSent
	require.Positive(t, sent)

	require.NoError(t, p.b.Close())
	select {
	case <-p.a.closed:
	case <-time.After(10 * time.Second):
		t.Fatal("the survivor did not see the peer close")
	}
	st := p.a.Stats()
	require.Equal(t, "closed", st.State)
	require.GreaterOrEqual(t, st.PacketsSent, sent)
	require.NotEmpty(t, p.a.PathStats())
}
