package transport_test

import (
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/metaroce/metaroce/transport"
	"github.com/metaroce/metaroce/transport/transporttest"
)

// TestHintHeadroom: while two or more connections send DATA, the receiver
// hints each a share 1/256 short of its n-th of the inbound rate, so that
// the jittered senders' sum drifts below the port rate instead of
// wandering around it (docs/spec.md §3.5); a lone sender, which cannot
// outrun its own line, is hinted the whole rate, also while other
// connections have receives posted but send nothing.
func TestHintHeadroom(t *testing.T) {
	for _, tc := range []struct{ posted, senders int }{{1, 1}, {2, 1}, {2, 2}, {4, 4}} {
		t.Run(fmt.Sprintf("%d of %d", tc.senders, tc.posted), func(t *testing.T) {
			senders := tc.senders
			n, cs := nearFar(t, tc.posted, 0, 0)
			for _, c := range cs {
				_, err := n.PostRecv(0, c.r, 0, transporttest.RecvSpec{Cap: 4 << 20})
				require.NoError(t, err)
			}
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
