package udp

import (
	"testing"

	"github.com/metaroce/metaroce/transport"
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

// TestEndpointStatsAfterClose: a closed endpoint's Stats reports the
// core's counters as the loop left them, and no connection, rather than
// the core's counters zeroed: a user who asks after Close what the core
// dropped gets the answer.
func TestEndpointStatsAfterClose(t *testing.T) {
	p := newPairNoCleanup(t, Config{})
	defer p.eb.Close()
	dropMalformed(t, p.ea)
	live := p.ea.Stats()
	require.Equal(t, uint64(1), live.Core.Dropped[transport.DropMalformed])
	require.Equal(t, 1, live.Conns)

	require.NoError(t, p.ea.Close())
	st := p.ea.Stats()
	require.Equal(t, uint64(1), st.Core.Dropped[transport.DropMalformed], "the core's counters as the loop left them")
	require.Zero(t, st.Conns, "Close ended the connection")
	require.GreaterOrEqual(t, st.TxDatagrams, live.TxDatagrams)
}
