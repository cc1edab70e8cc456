package transport_test

import (
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/metaroce/metaroce/transport"
)

// TestFarPostCountsLate: a receive posted for a far peer while a near peer
// sends counts that far peer among the senders only from minRTT(far) −
// minRTT(near) after the post (docs/spec.md §3.5): the far DATA arrives
// about minRTT(far) after the post, and a hint sent then still reaches the
// near sender in time for its slower packets to arrive with the far ones.
// Before that the near sender keeps the whole rate. Peers at equal
// distance count from the post itself.
func TestFarPostCountsLate(t *testing.T) {
	for _, extra := range []transport.Time{0, oneWay, 2 * oneWay} {
		t.Run(fmt.Sprint(extra), func(t *testing.T) {
			n, cs := nearFar(t, 1, 1, extra)
			rx := n.Node(0).EP
			_, err := n.Send(1, cs[0].s, 0, make([]byte, 8<<20), 0)
			require.NoError(t, err)
			_, err = n.Send(2, cs[1].s, 0, make([]byte, 1<<20), 0)
			require.NoError(t, err)
			postAll(t, n, cs[:1], 8<<20)
			// The near sender streams; its DATA makes it the one active
			// sender.
			require.NoError(t, n.RunFor(4*oneWay))
			require.Equal(t, 1, transport.ActiveSenders(rx, n.Now()))

			postAll(t, n, cs[1:], 1<<20)
			post := n.Now()
			lag := 2 * extra // minRTT(far) − minRTT(near)
			var counted transport.Time = -1
			for n.Now() < post+lag+2*transport.Microsecond {
				if transport.ActiveSenders(rx, n.Now()) == 2 {
					counted = n.Now() - post
					break
				}
				require.NoError(t, n.RunFor(100*transport.Nanosecond))
			}
			require.GreaterOrEqual(t, counted, transport.Time(0), "far post never counted")
			// The minimum RTTs carry serialisation and handshake jitter
			// of well under a microsecond.
			require.InDelta(t, float64(lag), float64(counted), float64(transport.Microsecond),
				"far post counted %v after it, want %v", counted, lag)
		})
	}
}
