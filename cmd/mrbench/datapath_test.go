package main

import (
	"net/netip"
	"testing"

	"github.com/metaroce/metaroce/collectives"
	"github.com/metaroce/metaroce/transport"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestDatapathString(t *testing.T) {
	lo := []ifaceMTU{{"lo", 65536}}
	for _, tc := range []struct {
		name string
		d    datapathInfo
		want string
	}{
		{"metaroce", datapathInfo{Transport: transportMetaRoCE, Planes: 2, PathsPerPlane: 4, MaxDatagram: 8972, PathsMin: 8, PathsMax: 8,
			Ifaces: []ifaceMTU{{"p0", 9000}, {"p1", 9000}}},
			"2 plane(s), 4 path(s) per plane, 8 path(s) open to each peer, max datagram 8972 B, p0 mtu 9000, p1 mtu 9000"},
		{"uneven paths", datapathInfo{Transport: transportMetaRoCE, Planes: 1, PathsPerPlane: 4, MaxDatagram: 65000, PathsMin: 3, PathsMax: 4, Ifaces: lo},
			"1 plane(s), 4 path(s) per plane, 3 to 4 paths open per peer, max datagram 65000 B, lo mtu 65536"},
		{"one rank", datapathInfo{Transport: transportMetaRoCE, Planes: 1, PathsPerPlane: 4, MaxDatagram: 65000, Ifaces: lo},
			"1 plane(s), 4 path(s) per plane, no peer connections, max datagram 65000 B, lo mtu 65536"},
		{"tcp", datapathInfo{Transport: transportTCP, Ifaces: lo}, "kernel TCP over lo mtu 65536"},
		{"no interface", datapathInfo{Transport: transportTCP}, "kernel TCP over interface unknown"},
	} {
		assert.Equal(t, tc.want, tc.d.String(), tc.name)
	}
}

// TestProbeDatapathLoopback: the probe reports the link's settings and
// interface MTU, and counts rank 0's paths per peer.
func TestProbeDatapathLoopback(t *testing.T) {
	peers := []collectives.PeerStats{
		{Rank: 1, Paths: make([]transport.PathStats, 4)},
		{Rank: 2, Paths: make([]transport.PathStats, 3)},
	}
	lo := []netip.Addr{netip.MustParseAddr("127.0.0.1")}
	d := probeDatapath(collectives.LinkInfo{Transport: transportMetaRoCE, Addrs: lo, PathsPerPlane: 4, MaxDatagram: 65000}, peers)
	assert.Equal(t, 1, d.Planes)
	assert.Equal(t, 4, d.PathsPerPlane)
	assert.Equal(t, 65000, d.MaxDatagram)
	assert.Equal(t, 3, d.PathsMin)
	assert.Equal(t, 4, d.PathsMax)
	require.Len(t, d.Ifaces, 1)
	assert.Positive(t, d.Ifaces[0].MTU)

	d = probeDatapath(collectives.LinkInfo{Transport: transportTCP, Addrs: lo}, nil)
	assert.Zero(t, d.Planes)
	require.Len(t, d.Ifaces, 1)
}
