package transport_test

import (
	"errors"
	"math/rand/v2"
	"testing"

	"github.com/metaroce/metaroce/transport"
	"github.com/metaroce/metaroce/transport/transporttest"
	"github.com/stretchr/testify/require"
)

// TestReleasedFlowsAreFreed: a connection that carries many more flows over
// its life than MaxFlowsPerConn keeps working when each side releases the
// flows it finished with, some before their last message completed; the
// connection's flow table stays small and every message arrives intact.
func TestReleasedFlowsAreFreed(t *testing.T) {
	cfg := baseCfg()
	cfg.MaxFlowsPerConn = 16
	ncfg := baseNet(11)
	ncfg.Loss, ncfg.LossOn = 0.01, sequencedOnly
	n, ca, cb := pair(t, ncfg, cfg)
	rng := rand.New(rand.NewPCG(11, 1))
	const rounds, perRound = 40, 4
	for r := 0; r < rounds; r++ {
		var flows []uint32
		for k := 0; k < perRound; k++ {
			f := uint32(r*perRound + k + 1)
			flows = append(flows, f)
			sz := rng.IntN(30000)
			_, err := n.PostRecv(1, cb, f, transporttest.RecvSpec{Cap: 30000})
			require.NoError(t, err)
			_, err = n.Send(0, ca, f, fill(rng, sz), 0)
			require.NoError(t, err)
		}
		if r%2 == 1 {
			// Released while in progress: freed once the message completes.
			for _, f := range flows {
				require.NoError(t, n.Node(0).EP.ReleaseFlow(n.Now(), ca, f))
				require.NoError(t, n.Node(1).EP.ReleaseFlow(n.Now(), cb, f))
			}
		}
		require.NoError(t, n.RunUntil(n.AllDone, n.Now()+time1s), "round %d", r)
		if r%2 == 0 {
			for _, f := range flows {
				require.NoError(t, n.Node(0).EP.ReleaseFlow(n.Now(), ca, f))
				require.NoError(t, n.Node(1).EP.ReleaseFlow(n.Now(), cb, f))
			}
		}
		require.NoError(t, n.RunFor(200*transport.Microsecond))
		require.LessOrEqual(t, transport.FlowCount(n.Node(0).EP, ca), 1, "round %d: sender flows", r)
		require.LessOrEqual(t, transport.FlowCount(n.Node(1).EP, cb), 1, "round %d: receiver flows", r)
	}
	require.NoError(t, n.Check(transporttest.CheckOptions{Complete: true}))

	// A released id cannot be used again, on either side.
	_, err := n.Send(0, ca, 1, []byte("late"), 0)
	require.True(t, errors.Is(err, transport.ErrInvalid), "send on a released flow: %v", err)
	_, err = n.PostRecv(1, cb, 1, transporttest.RecvSpec{Cap: 10})
	require.True(t, errors.Is(err, transport.ErrInvalid), "receive on a released flow: %v", err)
	require.Error(t, n.Node(0).EP.ReleaseFlow(n.Now(), 9999, 1), "unknown connection")
}

// TestUnreleasedFlowsHitTheLimit is the failure ReleaseFlow exists for:
// without it a connection refuses its 17th flow when the limit is 16.
func TestUnreleasedFlowsHitTheLimit(t *testing.T) {
	cfg := baseCfg()
	cfg.MaxFlowsPerConn = 16
	n, ca, _ := pair(t, baseNet(12), cfg)
	var err error
	for f := uint32(1); f <= 17 && err == nil; f++ {
		_, err = n.Send(0, ca, f, []byte("x"), 0)
	}
	require.True(t, errors.Is(err, transport.ErrLimit), "%v", err)
}
