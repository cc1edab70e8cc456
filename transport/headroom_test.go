package transport_test

import (
	"fmt"
	"math"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/metaroce/metaroce/transport"
	"github.com/metaroce/metaroce/transport/transporttest"
)

// TestHintHeadroom: while two or more connections send DATA, the receiver
// hints each a share 1/256 short of its n-th of the inbound rate, so that
// the jittered senders' sum drifts below the port rate instead of
// wandering around it (docs/spec.md §3.5); a lone sender, which cannot
// outrun its own line, is hinted the whole rate.
func TestHintHeadroom(t *testing.T) {
	for _, tc := range []struct{ posted, senders int }{{1, 1}, {2, 1}, {2, 2}, {4, 4}} {
		t.Run(fmt.Sprintf("%d of %d", tc.senders, tc.posted), func(t *testing.T) {
			senders := tc.senders
			n, cs := nearFar(t, tc.posted, 0, 0)
			postAll(t, n, cs, 4<<20)
			cs = cs[:senders]
			for i, c := range cs {
				_, err := n.Send(i+1, c.s, 0, make([]byte, 4<<20), 0)
				require.NoError(t, err)
			}
			// Long enough for every sender's DATA to count as active
			// and for hints sent after that to arrive; far from the
			// end of the transfers.
			require.NoError(t, n.RunFor(100*transport.Microsecond))
			want := float64(linkRate) / float64(senders)
			if senders > 1 {
				want -= want / 256
			}
			for i, c := range cs {
				st, ok := n.Node(i + 1).EP.Stats(c.s)
				require.True(t, ok)
				require.InDelta(t, want, float64(st.RateHint), want/2000, "sender %d of %d hinted %d B/s", i+1, senders, st.RateHint)
			}
		})
	}
}

// busyAndIdle posts a 4 MiB receive at the receiver for each of two
// senders, of which the first sends 4 MiB and the second nothing, and
// returns the time of the posts.
func busyAndIdle(t *testing.T) (*transporttest.Net, []senderConn, transport.Time) {
	t.Helper()
	n, cs := nearFar(t, 2, 0, 0)
	start := n.Now()
	postAll(t, n, cs, 4<<20)
	_, err := n.Send(1, cs[0].s, 0, make([]byte, 4<<20), 0)
	require.NoError(t, err)
	return n, cs, start
}

// TestHintHeadroomIdlePeer: a connection whose receive was posted but
// whose peer sends nothing counts as active after the post, until the
// peer answers the RECV_READY as idle, and halves the lone sender's share
// meanwhile, but it sends no DATA, so that share keeps no headroom: every
// hint the sender gets is half or all of the inbound rate.
func TestHintHeadroomIdlePeer(t *testing.T) {
	n, cs, start := busyAndIdle(t)
	seen := map[uint64]bool{}
	for n.Now() < start+4*oneWay+4*transport.Microsecond {
		require.NoError(t, n.RunFor(250*transport.Nanosecond))
		st, ok := n.Node(1).EP.Stats(cs[0].s)
		require.True(t, ok)
		if h := st.RateHint; h != 0 && !seen[h] {
			seen[h] = true
			half := float64(linkRate) / 2
			ok := math.Abs(float64(h)-half) < half/2000 || math.Abs(float64(h)-linkRate) < linkRate/2000
			require.True(t, ok, "lone sender hinted %d B/s %v after the posts", h, n.Now()-start)
		}
	}
	require.NotEmpty(t, seen)
}
