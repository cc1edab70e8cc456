package transport_test

import (
	"math/rand/v2"
	"testing"

	"github.com/metaroce/metaroce/transport"
	"github.com/stretchr/testify/require"
)

// TestCloseWhileDialingFailsOps: sends and receives queued on a connection
// whose handshake has not completed fail with ErrClosed when the connection
// is closed (or the endpoint shut down) before it does, as Close promises;
// none of them reports success for data that never moved.
func TestCloseWhileDialingFailsOps(t *testing.T) {
	for _, shutdown := range []bool{false, true} {
		ep := transport.NewEndpoint(baseCfg(), rand.New(rand.NewPCG(7, 7)))
		id, err := ep.Dial(0, 1)
		require.NoError(t, err)
		require.NoError(t, ep.Send(0, id, 3, 100, 0, 11))
		require.NoError(t, ep.PostRecv(0, id, 3, []transport.RecvBuf{{Cap: 100, Cookie: 22}}))
		if shutdown {
			ep.Shutdown(transport.Microsecond)
		} else {
			ep.Close(transport.Microsecond, id)
		}
		var send, recv, closed int
		for ev, ok := ep.PollEvent(); ok; ev, ok = ep.PollEvent() {
			switch ev.Kind {
			case transport.EvSendDone:
				send++
				require.ErrorIs(t, ev.Err, transport.ErrClosed, "send %d", ev.Cookie)
				require.Contains(t, ev.Err.Error(), "connection")
			case transport.EvRecvDone:
				recv++
				require.ErrorIs(t, ev.Err, transport.ErrClosed, "receive %d", ev.Cookie)
			case transport.EvClosed:
				closed++
				require.Equal(t, id, ev.Conn)
			}
		}
		require.Equal(t, []int{1, 1, 1}, []int{send, recv, closed}, "shutdown %v", shutdown)
		require.False(t, ep.HasConn(id))
	}
}
