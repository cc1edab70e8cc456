package udp

import (
	"testing"

	"github.com/metaroce/metaroce/transport/wire"
	"github.com/stretchr/testify/require"
)

func TestIPv6Loopback(t *testing.T) {
	p := newPair(t, Config{Addrs: []netipAddr{mustAddr("::1")}})
	require.True(t, p.ea.Addrs()[0].Addr().Is6())
	for i, n := range []int{0, 5000, 1 << 20} {
		transfer(t, p.a, p.b, 1, pattern(n, byte(i)))
	}
	require.Equal(t, p.eb.Addrs(), p.a.RemoteAddrs())
	require.Equal(t, p.ea.Addrs(), p.b.RemoteAddrs())
}

// TestTwoPlanes runs a connection over two planes (two loopback addresses)
// and checks that both carry data and that the accepting side learned both
// of the dialer's addresses from the handshake.
func TestTwoPlanes(t *testing.T) {
	cfg := Config{Addrs: []netipAddr{mustAddr("127.0.0.1"), mustAddr("127.0.0.2")}}
	p := newPair(t, cfg)
	require.Equal(t, p.ea.Addrs(), p.b.RemoteAddrs())
	require.Equal(t, p.ea.Addrs()[0].Port(), p.ea.Addrs()[1].Port(), "same port on each plane where free")
	transfer(t, p.a, p.b, 1, pattern(8<<20, 3))
	planes := map[uint8]uint64{}
	for _, ps := range p.a.PathStats() {
		planes[ps.Plane] += ps.PacketsSent
	}
	require.Positive(t, planes[0])
	require.Positive(t, planes[1])
}

// TestSeveralPeers has one endpoint accept from three dialers on the same
// IP address, each with its own port: peers are told apart by their address
// blobs, not by source IP.
func TestSeveralPeers(t *testing.T) {
	ctx := testCtx(t)
	srv, err := Listen(Config{Seed: 40})
	require.NoError(t, err)
	defer srv.Close()
	for i := 0; i < 3; i++ {
		cl, err := Listen(Config{Seed: uint64(41 + i)})
		require.NoError(t, err)
		defer cl.Close()
		a, err := cl.Dial(ctx, srv.Addrs())
		require.NoError(t, err)
		b, err := srv.Accept(ctx)
		require.NoError(t, err)
		require.Equal(t, cl.Addrs(), b.RemoteAddrs())
		transfer(t, b, a, 1, pattern(100000, byte(i)))
		transfer(t, a, b, 1, pattern(100000, byte(i)))
	}
	require.Equal(t, 3, srv.Stats().Conns)
}

// TestZeroAllocsPerPacket checks the allocation budget of the datapath:
// moving a message costs a bounded number of allocations whatever its
// packet count, so the per-packet send and receive paths allocate nothing.
func TestZeroAllocsPerPacket(t *testing.T) {
	cfg := Config{MaxDatagram: 4096 + wire.DataHeaderLen}
	p := newPair(t, cfg)
	ctx := testCtx(t)
	measure := func(size int) float64 {
		msg := pattern(size, 1)
		buf := make([]byte, size)
		one := func() {
			rr, _ := p.b.Recv(1, [][]byte{buf}, []uint32{0})
			sr, _ := p.a.Send(1, msg, 0)
			require.NoError(t, sr.Wait(ctx))
			require.NoError(t, rr.Wait(ctx))
		}
		one() // warm up: maps and queues reach their steady size
		one()
		return testing.AllocsPerRun(20, one)
	}
	small := measure(4096)        // 1 packet
	large := measure(1024 * 4096) // 1024 packets
	t.Logf("allocations per message: 1 packet %.1f, 1024 packets %.1f", small, large)
	// A per-packet allocation would add about 1000; a few are per message
	// (the core's reassembly bitmap grows with the message) or incidental.
	require.Less(t, large-small, 32.0)
}
