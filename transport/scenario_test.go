package transport_test

import (
	"math/rand/v2"
	"testing"

	"github.com/metaroce/metaroce/transport"
	"github.com/metaroce/metaroce/transport/transporttest"
	"github.com/stretchr/testify/require"
)

// sequencedOnly applies random loss to DATA, RECV_READY, NACK and PROBE
// packets but never to ACKs, handshakes or closes: the regime in which every
// retransmission must answer a real loss (see TestScenarios).
func sequencedOnly(p *transporttest.Packet) bool { return p.Sequenced }

// scenario is one network regime the standard workload runs through.
type scenario struct {
	name string
	net  func(c *transporttest.NetConfig)
	cfg  func(c *transport.Config)
	// faults scripts failures once the connection is up.
	faults func(n *transporttest.Net, ca, cb transport.ConnID)
	// exact: the network never drops an ACK and never reorders within a
	// path, and no path fails, so every loss is detected by a SACK gap or a
	// tail timeout of a packet that really was lost: the endpoints'
	// retransmissions must equal the sequenced packets the network dropped,
	// with no spurious retransmission (docs/spec.md §3.2). This needs the
	// RTO to exceed the worst one-way queueing delay plus the RTT, or a
	// delayed packet times out although it was not lost.
	exact bool
}

// slowPathsRTO raises the RTO floor above the worst round trip of the
// reorder-between-paths scenarios (see there).
func slowPathsRTO(c *transport.Config) { c.MinRTO = 100 * transport.Microsecond }

func scenarios() []scenario {
	loss := func(p float64) func(c *transporttest.NetConfig) {
		return func(c *transporttest.NetConfig) { c.Loss, c.LossOn = p, sequencedOnly }
	}
	return []scenario{
		{name: "clean", exact: true},
		{name: "loss-0.1%", net: loss(0.001), exact: true},
		{name: "loss-1%", net: loss(0.01), exact: true},
		{name: "loss-5%", net: loss(0.05), exact: true},
		{name: "loss-10%", net: loss(0.10), exact: true},
		{name: "loss-2%-acks-too", net: func(c *transporttest.NetConfig) { c.Loss = 0.02 }},
		{name: "bursty-loss", net: func(c *transporttest.NetConfig) {
			c.Burst = transporttest.GilbertElliott{PGoodBad: 0.005, PBadGood: 0.3, LossBad: 0.8}
			c.LossOn = sequencedOnly
		}, exact: true},
		{name: "duplication", net: func(c *transporttest.NetConfig) { c.Dup = 0.05 }, exact: true},
		// With paths up to 20 µs apart (plus 3 µs of jitter) one way,
		// a round trip can take 2 × (4 + 20 + 3) = 54 µs before any
		// queueing: above the 50 µs floor of baseCfg, so the exact
		// premise (RTO above the worst RTT plus queueing) needs a
		// higher floor here. Which path draws which delay depends on
		// the order the network draws its random numbers, so with the
		// 50 µs floor any change in the packet count could time out a
		// packet on the slowest path that was never lost.
		{name: "reorder-between-paths", net: func(c *transporttest.NetConfig) {
			c.PathSpread = 20 * transport.Microsecond
			c.Jitter = 3 * transport.Microsecond
		}, cfg: slowPathsRTO, exact: true},
		{name: "reorder-between-paths-with-loss", net: func(c *transporttest.NetConfig) {
			c.PathSpread = 20 * transport.Microsecond
			c.Loss, c.LossOn = 0.02, sequencedOnly
		}, cfg: slowPathsRTO, exact: true},
		{name: "reorder-inside-path", net: func(c *transporttest.NetConfig) {
			c.Jitter = 5 * transport.Microsecond
			c.ReorderInPath = true
		}},
		{name: "blackholed-path", faults: func(n *transporttest.Net, ca, cb transport.ConnID) {
			ps, _ := n.Node(0).EP.PathStats(ca, 3)
			n.Blackhole(0, int(ps.Plane), int(ps.Entropy), n.Now()+30*transport.Microsecond)
		}},
		{name: "blackholed-plane", faults: func(n *transporttest.Net, ca, cb transport.ConnID) {
			n.Blackhole(0, 1, -1, n.Now()+30*transport.Microsecond)
		}},
		{name: "reverse-path-dies", faults: func(n *transporttest.Net, ca, cb transport.ConnID) {
			ps, _ := n.Node(1).EP.PathStats(cb, 2)
			n.Blackhole(1, int(ps.Plane), int(ps.Entropy), n.Now()+20*transport.Microsecond)
		}},
		{name: "ce-marking", net: func(c *transporttest.NetConfig) {
			c.IngressRate = 50e9 / 8
			c.MarkThreshold = 20_000
		}, exact: true},
		{name: "rate-limited-queue-drops", net: func(c *transporttest.NetConfig) {
			c.IngressRate = 10e9 / 8
			c.QueueLimit = 64 << 10
			c.MarkThreshold = 24 << 10
		}, cfg: func(c *transport.Config) {
			// Not exact: the reverse transfer's queue also drops ACKs.
			c.MinRTO = 200 * transport.Microsecond
		}},
		{name: "single-path", cfg: func(c *transport.Config) { c.Planes, c.PathsPerPlane = 1, 1 },
			net: loss(0.02), exact: true},
		{name: "four-planes", cfg: func(c *transport.Config) { c.Planes, c.PathsPerPlane = 4, 2 },
			net: loss(0.02), exact: true},
	}
}

// runWorkload posts the standard mix on several flows in both directions:
// zero-byte, sub-segment, segment-boundary and multi-megabyte messages, some
// sends posted before their receives. It runs the network until everything
// completed and checks the invariants.
func runWorkload(t *testing.T, n *transporttest.Net, ca, cb transport.ConnID, seed uint64) {
	t.Helper()
	rng := rand.New(rand.NewPCG(seed, 7))
	sizes := []int{0, 1, 4095, 4096, 4097, 65536, 100_000, 1 << 20, 0, 3 * 4096}
	for i, sz := range sizes {
		flow := uint32(i % 3)
		data := fill(rng, sz)
		if i%2 == 0 { // send first: it waits for RECV_READY
			_, err := n.Send(0, ca, flow, data, 5)
			require.NoError(t, err)
			_, err = n.PostRecv(1, cb, flow, transporttest.RecvSpec{Cap: uint64(sz + 100*(i%3)), Tag: 5})
			require.NoError(t, err)
		} else {
			_, err := n.PostRecv(1, cb, flow, transporttest.RecvSpec{Cap: uint64(sz), Tag: 5})
			require.NoError(t, err)
			_, err = n.Send(0, ca, flow, data, 5)
			require.NoError(t, err)
		}
	}
	// The other direction carries data at the same time.
	for i := 0; i < 3; i++ {
		data := fill(rng, 200_000+i)
		_, err := n.PostRecv(0, ca, 9, transporttest.RecvSpec{Cap: 300_000, Tag: 1})
		require.NoError(t, err)
		_, err = n.Send(1, cb, 9, data, 1)
		require.NoError(t, err)
	}
	require.NoError(t, n.RunUntil(n.AllDone, n.Now()+2*transport.Second), "stats %+v totals %+v", n.Stats, n.Totals())
	require.NoError(t, n.RunFor(2*transport.Millisecond)) // let the last ACKs settle
	require.NoError(t, n.Check(transporttest.CheckOptions{Complete: true}))
}

func TestScenarios(t *testing.T) {
	for _, sc := range scenarios() {
		t.Run(sc.name, func(t *testing.T) {
			for seed := uint64(1); seed <= 3; seed++ {
				ncfg := baseNet(seed)
				if sc.net != nil {
					sc.net(&ncfg)
				}
				cfg := baseCfg()
				if sc.cfg != nil {
					sc.cfg(&cfg)
				}
				n, ca, cb := pair(t, ncfg, cfg)
				if sc.faults != nil {
					sc.faults(n, ca, cb)
				}
				runWorkload(t, n, ca, cb, seed)
				tot := n.Totals()
				t.Logf("seed %d: %v, net %+v, totals %+v", seed, n.Now(), n.Stats, tot)
				if sc.exact {
					require.Zero(t, tot.Spurious, "seed %d: spurious retransmissions", seed)
					require.Zero(t, n.Stats.Redelivered, "seed %d: content delivered twice", seed)
					require.Equal(t, n.Stats.SeqDropped, tot.Retransmits, "seed %d: retransmissions ≠ sequenced packets dropped", seed)
				}
			}
		})
	}
}
