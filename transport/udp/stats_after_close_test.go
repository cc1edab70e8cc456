package udp

import (
	"testing"

	"github.com/stretchr/testify/require"
)

// TestStatsAfterEndpointClose: a connection that Endpoint.Close tore down
// reports its counters as they were when it ended, as one that ended on its
// own does (Conn.Stats, Conn.PathStats), rather than zeros: a user who asks
// after closing how much was sent and retransmitted gets the answer.
func TestStatsAfterEndpointClose(t *testing.T) {
	p := newPairNoCleanup(t, Config{})
	defer p.eb.Close()
	ctx := testCtx(t)
	msg := pattern(1<<20, 3)
	rr, err := p.b.Recv(1, [][]byte{make([]byte, len(msg))}, []uint32{0})
	require.NoError(t, err)
	sr, err := p.a.Send(1, msg, 0)
	require.NoError(t, err)
	require.NoError(t, sr.Wait(ctx))
	require.NoError(t, rr.Wait(ctx))
	live := p.a.Stats()
	require.NotZero(t, live.PacketsSent)

	require.NoError(t, p.ea.Close())
	st := p.a.Stats()
	require.Equal(t, "closed", st.State)
	require.GreaterOrEqual(t, st.PacketsSent, live.PacketsSent, "the counters as the connection ended")
	paths := p.a.PathStats()
	require.NotEmpty(t, paths, "the paths' counters as the connection ended")
	var sent uint64
	for _, ps := range paths {
		sent += ps.PacketsSent
	}
	require.NotZero(t, sent)
}
