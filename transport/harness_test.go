package transport_test

import (
	"math/rand/v2"
	"testing"

	"github.com/metaroce/metaroce/transport"
	"github.com/metaroce/metaroce/transport/transporttest"
	"github.com/stretchr/testify/require"
)

// Realistic defaults for the scenarios: 100 Gb/s links, 4 KiB payloads,
// 2 planes × 4 paths, about 10 µs base RTT.
const (
	linkRate = 100e9 / 8 // bytes/s
	oneWay   = 4 * transport.Microsecond
)

func baseNet(seed uint64) transporttest.NetConfig {
	return transporttest.NetConfig{Seed: seed, BaseDelay: oneWay, LinkRate: linkRate}
}

func baseCfg() transport.Config {
	return transport.Config{
		Planes:        2,
		PathsPerPlane: 4,
		MinRTO:        50 * transport.Microsecond,
		InitialRTT:    10 * transport.Microsecond,
		AckDelay:      2 * transport.Microsecond,
		IdleTimeout:   20 * transport.Millisecond,
	}
}

// pair builds a network with a dialer (node 0) and a listener (node 1),
// connected, with the core's memory bounds checked throughout.
func pair(t testing.TB, ncfg transporttest.NetConfig, cfg transport.Config) (n *transporttest.Net, ca, cb transport.ConnID) {
	t.Helper()
	n = transporttest.New(ncfg)
	n.MemCheck = func(_ int, ep *transport.Endpoint) error { return transport.CheckFootprint(ep) }
	n.AddNode(cfg)
	cfg.Listen = true
	n.AddNode(cfg)
	ca, cb, err := n.Connect(0, 1)
	require.NoError(t, err)
	return n, ca, cb
}

// fill returns n bytes of seeded noise.
func fill(rng *rand.Rand, n int) []byte {
	b := make([]byte, n)
	for i := range b {
		b[i] = byte(rng.Uint32())
	}
	return b
}
