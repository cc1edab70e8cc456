package transport_test

import (
	"testing"

	"github.com/metaroce/metaroce/transport"
	"github.com/metaroce/metaroce/transport/transporttest"
	"github.com/stretchr/testify/require"
)

// TestDeadPlaneProbedAtProbeInterval: while a whole plane is down (every
// route, both ways) and the other plane carries a steady stream of
// messages, each of the dead plane's paths tries a few fresh routes at
// once and then probes once per ProbeInterval. Probing at the pace of
// the live plane's progress, as the overtaken-probe rule did with no
// bound, sent hundreds of probes per path for every ProbeInterval. When
// the plane comes back, its paths are revived within a ProbeInterval or
// two, and every message arrives.
func TestDeadPlaneProbedAtProbeInterval(t *testing.T) {
	cfg := baseCfg()
	cfg.MinRTO = transport.Millisecond // ProbeInterval 5 ms
	probeInterval := 5 * cfg.MinRTO
	n, ca, cb := pair(t, baseNet(3), cfg)
	const size = 8 << 10
	const every = 10 * transport.Microsecond
	msg := make([]byte, size)
	stream := func(d transport.Time) {
		for end := n.Now() + d; n.Now() < end; {
			_, err := n.PostRecv(1, cb, 0, transporttest.RecvSpec{Cap: size})
			require.NoError(t, err)
			_, err = n.Send(0, ca, 0, msg, 0)
			require.NoError(t, err)
			require.NoError(t, n.RunFor(every))
		}
	}
	stream(200 * transport.Microsecond)
	const dead = 1
	down := 6 * probeInterval
	from := n.Now()
	for src := 0; src < 2; src++ {
		r := transporttest.AnyRule(from)
		r.Src, r.Plane, r.Until = src, dead, from+down
		n.AddRule(r)
	}
	probes := func() (sum uint64, paths int, revived uint64) {
		for i := 0; i < cfg.Planes*cfg.PathsPerPlane; i++ {
			p, ok := n.Node(0).EP.PathStats(ca, i)
			require.True(t, ok)
			if int(p.Plane) == dead {
				sum += p.Probes
				revived += p.Revived
				paths++
			}
		}
		return
	}
	before, paths, _ := probes()
	stream(down)
	during, _, revivedDown := probes()
	sent := during - before
	// The quick probes, then one per ProbeInterval, and two to spare.
	bound := uint64(paths) * uint64(4+1+int(down/probeInterval)+2)
	t.Logf("%d probes on the dead plane's %d paths in %v (bound %d)", sent, paths, down, bound)
	require.LessOrEqual(t, sent, bound, "the dead plane was probed too often")
	require.NotZero(t, sent, "the dead plane was never probed: the test shows nothing")
	stream(2*probeInterval + 200*transport.Microsecond)
	_, _, revived := probes()
	require.GreaterOrEqual(t, revived-revivedDown, uint64(paths), "the plane's paths were not all revived after it came back")
	require.NoError(t, n.RunUntil(n.AllDone, n.Now()+100*transport.Millisecond))
}
