package udp

import (
	"context"
	"net"
	"net/netip"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// testTimeout bounds every wait in the tests.
const testTimeout = 20 * time.Second

func testCtx(t testing.TB) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
	t.Cleanup(cancel)
	return ctx
}

// pair is two connected endpoints: a dialed (client) and b accepted (server).
type pair struct {
	ea, eb *Endpoint
	a, b   *Conn
}

// newPair listens twice with cfg (seeds differ), dials from the first to the
// second and accepts.
func newPair(t testing.TB, cfg Config) *pair {
	t.Helper()
	if cfg.Seed == 0 {
		cfg.Seed = 1
	}
	ea, err := Listen(cfg)
	require.NoError(t, err)
	t.Cleanup(func() { ea.Close() })
	cfg.Seed++
	eb, err := Listen(cfg)
	require.NoError(t, err)
	t.Cleanup(func() { eb.Close() })
	return join(t, ea, eb)
}

// join dials eb from ea and accepts on eb.
func join(t testing.TB, ea, eb *Endpoint) *pair {
	t.Helper()
	ctx := testCtx(t)
	type res struct {
		c   *Conn
		err error
	}
	acc := make(chan res, 1)
	go func() {
		c, err := eb.Accept(ctx)
		acc <- res{c, err}
	}()
	a, err := ea.Dial(ctx, eb.Addrs())
	require.NoError(t, err)
	r := <-acc
	require.NoError(t, r.err)
	require.NotNil(t, r.c)
	return &pair{ea: ea, eb: eb, a: a, b: r.c}
}

// pattern returns n deterministic bytes that differ per seed.
func pattern(n int, seed byte) []byte {
	b := make([]byte, n)
	x := uint32(seed)*2654435761 + 1
	for i := range b {
		x = x*1664525 + 1013904223
		b[i] = byte(x >> 24)
	}
	return b
}

func loopback4() []netip.Addr { return []netip.Addr{netip.MustParseAddr("127.0.0.1")} }

type (
	netipAddr     = netip.Addr
	netipAddrPort = netip.AddrPort
)

func mustAP(s string) netip.AddrPort { return netip.MustParseAddrPort(s) }
func mustAddr(s string) netip.Addr   { return netip.MustParseAddr(s) }

// newPairNoCleanup is newPair for tests that close the endpoints themselves.
func newPairNoCleanup(t testing.TB, cfg Config) *pair {
	t.Helper()
	cfg.Seed = 11
	ea, err := Listen(cfg)
	require.NoError(t, err)
	cfg.Seed++
	eb, err := Listen(cfg)
	require.NoError(t, err)
	return join(t, ea, eb)
}

// unansweredAddr returns the address of a UDP socket on e's first plane's
// host that never reads, closed when the test ends: a peer that never
// answers a HELLO.
func unansweredAddr(t *testing.T, e *Endpoint) []netip.AddrPort {
	t.Helper()
	silent, err := net.ListenUDP("udp", net.UDPAddrFromAddrPort(netip.AddrPortFrom(e.Addrs()[0].Addr(), 0)))
	require.NoError(t, err)
	t.Cleanup(func() { silent.Close() })
	return []netip.AddrPort{silent.LocalAddr().(*net.UDPAddr).AddrPort()}
}
