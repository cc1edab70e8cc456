package transport_test

import (
	"testing"

	"github.com/metaroce/metaroce/transport"
	"github.com/metaroce/metaroce/transport/transporttest"
	"github.com/stretchr/testify/require"
)

// TestNoExpiredDeadlineWhileLinkBusy: a driver whose link is busy runs the
// endpoint's timers but does not poll until the link frees. A held-back ACK
// or a pacing time that expires meanwhile must not stay in NextTimeout: the
// driver would run HandleTimeout again at every event until the link
// freed, once per connection so held (the fabric simulator's all-to-all
// spent most of its time there). The test bed polls only while its egress
// link is free, so after every step no endpoint may ask for a timer at or
// before now.
func TestNoExpiredDeadlineWhileLinkBusy(t *testing.T) {
	n, ca, cb := pair(t, baseNet(3), baseCfg())
	const size = 4 << 20
	_, err := n.PostRecv(1, cb, 0, transporttest.RecvSpec{Cap: size})
	require.NoError(t, err)
	_, err = n.Send(0, ca, 0, make([]byte, size), 0)
	require.NoError(t, err)
	stuck, steps := 0, 0
	done := func() bool {
		steps++
		for i := 0; i < n.Nodes(); i++ {
			if n.Node(i).EP.NextTimeout() <= n.Now() {
				stuck++
			}
		}
		return n.AllDone()
	}
	require.NoError(t, n.RunUntil(done, n.Now()+10*transport.Millisecond))
	require.NoError(t, n.Check(transporttest.CheckOptions{Complete: true}))
	require.Zero(t, stuck, "deadlines at or before now after %d steps", steps)
}
