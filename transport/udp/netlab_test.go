package udp

import (
	"net/netip"
	"testing"

	"github.com/metaroce/metaroce/netlab"
	"github.com/stretchr/testify/require"
)

// labHashSeed fixes the switches' ECMP hash, so that a source port takes the
// same spine link in every run.
const labHashSeed = 0x5eed

// labPort is the first port of every lab endpoint's pool.
const labPort = 40000

// labPair builds a 1-plane lab with links spine links and connects an
// endpoint on h1 (the dialer, a) to one on h2 (b); it skips where netlab
// cannot run.
func labPair(t testing.TB, links int, cfg Config) (*netlab.Lab, *pair) {
	t.Helper()
	if err := netlab.Available(); err != nil {
		t.Skipf("netlab: %v", err)
	}
	lab, err := netlab.New(netlab.Config{Planes: 1, Links: links, HashSeed: labHashSeed})
	require.NoError(t, err)
	t.Cleanup(func() { lab.Close() })
	if cfg.Seed == 0 {
		cfg.Seed = 21
	}
	if cfg.Port == 0 {
		// Fixed ports (each host has a namespace of its own): with the
		// fixed hash seed and endpoint seeds, every run maps the same
		// paths onto the same spine links. Ephemeral ports left it to
		// chance, and about one run in a hundred put none of the 16
		// paths of TestNetlabBlackholedLink on the blackholed link.
		cfg.Port = labPort
	}
	var ea, eb *Endpoint
	for h, ep := range map[int]**Endpoint{1: &ea, 2: &eb} {
		c := cfg
		c.Addrs = []netip.Addr{lab.Host(h).Addr(0)}
		c.Seed += uint64(h)
		require.NoError(t, lab.Run(h, func() error {
			var err error
			*ep, err = Listen(c)
			return err
		}))
		e := *ep
		t.Cleanup(func() { e.Close() })
	}
	return lab, join(t, ea, eb)
}

func linkDeltas(t testing.TB, lab *netlab.Lab, before []netlab.LinkCounter) []uint64 {
	after, err := lab.LinkCounters()
	require.NoError(t, err)
	out := make([]uint64, len(after))
	for i := range after {
		out[i] = after[i].FwdPackets - before[i].FwdPackets
	}
	return out
}

// TestNetlabUsesAllLinks: with many paths on distinct source ports, the
// switch's ECMP hash spreads one connection over all four spine links.
func TestNetlabUsesAllLinks(t *testing.T) {
	cfg := Config{PortsPerPlane: 32}
	cfg.Core.PathsPerPlane = 32
	lab, p := labPair(t, 4, cfg)
	require.Equal(t, 1500-28, p.ea.Config().MaxDatagram, "MTU-derived datagram size")
	before, err := lab.LinkCounters()
	require.NoError(t, err)
	transfer(t, p.a, p.b, 1, pattern(16<<20, 1))
	d := linkDeltas(t, lab, before)
	t.Logf("packets per spine link: %v", d)
	for i, n := range d {
		require.Greater(t, n, uint64(100), "link %d carried almost nothing: %v", i, d)
	}
}

// TestNetlabBlackholedLink: a silently dropping spine link is abandoned
// (paths on it move to fresh source ports) and the transfer completes.
func TestNetlabBlackholedLink(t *testing.T) {
	cfg := Config{PortsPerPlane: 64}
	cfg.Core.PathsPerPlane = 16
	lab, p := labPair(t, 4, cfg)
	require.NoError(t, lab.Blackhole(netlab.Link{Plane: 0, Index: 1}, true))
	before, err := lab.LinkCounters()
	require.NoError(t, err)
	for i := 0; i < 4; i++ {
		transfer(t, p.a, p.b, 1, pattern(4<<20, byte(i)))
	}
	st := p.a.Stats()
	t.Logf("path changes %d, timeouts %d, link packets %v", st.PathChanges, st.Timeouts, linkDeltas(t, lab, before))
	require.Positive(t, st.PathChanges)
	// Once the paths settled, the blackholed link carries (almost) nothing.
	before, err = lab.LinkCounters()
	require.NoError(t, err)
	transfer(t, p.a, p.b, 1, pattern(8<<20, 9))
	d := linkDeltas(t, lab, before)
	var total uint64
	for _, n := range d {
		total += n
	}
	t.Logf("after settling: %v", d)
	require.Less(t, d[1], total/20, "blackholed link still used: %v", d)
}

// TestNetlabECNMarks: CE marks set by the switch reach the receiver's core
// and are echoed to the sender.
func TestNetlabECNMarks(t *testing.T) {
	lab, p := labPair(t, 4, Config{})
	for i := 0; i < 4; i++ {
		require.NoError(t, lab.MarkCE(netlab.Link{Plane: 0, Index: i}, true))
	}
	transfer(t, p.a, p.b, 1, pattern(2<<20, 1))
	sa, sb := p.a.Stats(), p.b.Stats()
	t.Logf("sender ECNMarks %d, receiver CERecv %d", sa.ECNMarks, sb.CERecv)
	require.Positive(t, sb.CERecv)
	require.Positive(t, sa.ECNMarks)
}
