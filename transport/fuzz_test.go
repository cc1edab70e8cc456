package transport_test

import (
	"math/rand/v2"
	"testing"

	"github.com/metaroce/metaroce/transport"
	"github.com/metaroce/metaroce/transport/transporttest"
	"github.com/metaroce/metaroce/transport/wire"
	"github.com/stretchr/testify/require"
)

// fuzzBed returns a connected pair (always the same ids and tokens: the
// seeds are fixed) with receives posted on flows 0–2 and a transfer under
// way in both directions, and the datagrams node 0 sent to node 1 so far.
func fuzzBed(t testing.TB) (*transporttest.Net, transport.ConnID, transport.ConnID, [][]byte) {
	n, ca, cb := pair(t, baseNet(30), baseCfg())
	var seen [][]byte
	n.OnArrive = func(p *transporttest.Packet, _ transport.Time, _ int) {
		if p.Dst == 1 && len(seen) < 64 {
			seen = append(seen, append([]byte(nil), p.Data...))
		}
	}
	for f, c := range []uint64{0, 100, 20000} {
		_, err := n.PostRecv(1, cb, uint32(f), transporttest.RecvSpec{Cap: c, Tag: 1}, transporttest.RecvSpec{Cap: 9000, Tag: 2})
		require.NoError(t, err)
	}
	for f, sz := range []int{0, 100, 12000} {
		_, err := n.Send(0, ca, uint32(f), make([]byte, sz), 1)
		require.NoError(t, err)
		_, err = n.Send(0, ca, uint32(f), make([]byte, 9000-f), 2)
		require.NoError(t, err)
	}
	_, err := n.PostRecv(0, ca, 0, transporttest.RecvSpec{Cap: 5000})
	require.NoError(t, err)
	_, err = n.Send(1, cb, 0, make([]byte, 5000), 0)
	require.NoError(t, err)
	require.NoError(t, n.RunFor(12*transport.Microsecond))
	n.OnArrive = nil
	return n, ca, cb, seen
}

// feed injects one forged datagram into node 1 and checks that nothing
// broke: no panic, no write outside a posted buffer, and a datagram that
// does not even parse is counted as malformed.
func feed(t *testing.T, n *transporttest.Net, data []byte, ecn transport.ECN) {
	ep := n.Node(1).EP
	before := ep.Counters()
	var h wire.Header
	_, herr := wire.ParseHeader(&h, data)
	n.Inject(1, 0, 0, ecn, data)
	after := ep.Counters()
	if herr != nil {
		require.Equal(t, before.Dropped[transport.DropMalformed]+1, after.Dropped[transport.DropMalformed], "unparsable datagram not counted")
	}
	require.GreaterOrEqual(t, after.Total(), before.Total())
	require.NoError(t, transport.CheckFootprint(ep))
}

// FuzzEndpoint feeds arbitrary datagrams to an endpoint with posted
// buffers, then lets the connection run on: the endpoint must neither
// panic nor place outside a buffer, and must stay within its bounds.
func FuzzEndpoint(f *testing.F) {
	_, _, _, seen := fuzzBed(f)
	for _, d := range seen {
		f.Add(d, uint8(2))
	}
	f.Add([]byte{}, uint8(0))
	f.Add([]byte{1, 3, 0, 0}, uint8(3))
	f.Fuzz(func(t *testing.T, data []byte, ecn uint8) {
		n, _, _, _ := fuzzBed(t)
		feed(t, n, data, transport.ECN(ecn&3))
		require.NoError(t, n.RunFor(100*transport.Microsecond))
		require.NoError(t, n.Check(transporttest.CheckOptions{AllowFailures: true}))
	})
}

// TestForgedPackets mutates real datagrams (bit flips, truncation, field
// rewrites aimed at the placement fields, far-ahead PSNs) and feeds
// thousands of them to a live endpoint. A datagram that carries the
// connection's token is trusted (docs/spec.md §3.3: the token is the only
// proof of origin), so it may spoil a transfer, but never a buffer nor the
// endpoint's bounds; one with a wrong token must change nothing, so the
// transfers under way still complete intact.
func TestForgedPackets(t *testing.T) {
	for _, keepToken := range []bool{true, false} {
		n, _, _, seen := fuzzBed(t)
		require.NotEmpty(t, seen)
		rng := rand.New(rand.NewPCG(31, 31))
		for i := 0; i < 3000; i++ {
			d := append([]byte(nil), seen[rng.IntN(len(seen))]...)
			switch rng.IntN(4) {
			case 0: // flip bits
				for k := rng.IntN(4) + 1; k > 0; k-- {
					d[rng.IntN(len(d))] ^= 1 << rng.IntN(8)
				}
			case 1: // truncate
				d = d[:rng.IntN(len(d)+1)]
			case 2: // rewrite a placement field of DATA: msg, index, offset, length
				if len(d) >= wire.DataHeaderLen {
					off := []int{28, 32, 40, 44, 48, 52}[rng.IntN(6)]
					d[off] = byte(rng.Uint32())
					d[off+3] ^= byte(rng.Uint32())
				}
			case 3: // rewrite the path and PSN: far-ahead PSNs slide windows
				if len(d) >= wire.HeaderLen {
					d[16], d[17] = 0, byte(rng.IntN(20))
					d[20], d[21] = byte(rng.Uint32()), byte(rng.Uint32())
				}
			}
			if !keepToken && len(d) >= 16 {
				d[8] ^= 0xff // at most 4 bit flips above: this byte stays wrong
			}
			feed(t, n, d, transport.ECN(rng.IntN(4)))
		}
		c := n.Node(1).EP.Counters()
		t.Logf("token kept %v: drops by reason after 3000 forged datagrams: %v", keepToken, c.Dropped)
		if keepToken {
			require.NoError(t, n.RunFor(10*transport.Millisecond))
			require.NoError(t, n.Check(transporttest.CheckOptions{AllowFailures: true}))
			continue
		}
		require.Equal(t, uint64(3000), c.Total(), "every forged datagram is dropped and counted once")
		require.NoError(t, n.RunUntil(n.AllDone, n.Now()+transport.Second))
		require.NoError(t, n.Check(transporttest.CheckOptions{Complete: true}))
	}
}
