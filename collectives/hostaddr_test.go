package collectives

import (
	"context"
	"fmt"
	"net"
	"net/netip"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/metaroce/metaroce/collectives/reduce"
	"github.com/metaroce/metaroce/collectives/sched"
)

// TestPlaneAddrs: a rank of a job that may span hosts, given no
// addresses, takes the one its host routes to the rendezvous host from,
// and where that host is its own loopback or wildcard in a job its
// launcher says spans hosts, the one its default route leaves from; given
// addresses, alone, on one host by its launcher's word, with a rendezvous
// on loopback or a wildcard and no word of other hosts, or with a host
// that does not resolve or route, it keeps the datapath's default.
func TestPlaneAddrs(t *testing.T) {
	lan, dflt := netip.MustParseAddr("10.1.2.3"), netip.MustParseAddr("10.1.2.4")
	v6 := netip.MustParseAddr("2001:db8::2")
	route := func(remote netip.Addr) (netip.Addr, bool) {
		switch {
		case remote == defaultRouteProbe:
			return dflt, true
		case remote == netip.MustParseAddr("198.51.100.9"):
			return netip.Addr{}, false // no route
		case remote == netip.MustParseAddr("198.51.100.10"):
			return netip.MustParseAddr("127.0.0.1"), true
		case remote.Is6():
			return v6, true
		}
		return lan, true
	}
	given := Config{}
	given.UDP.Addrs = []netip.Addr{netip.MustParseAddr("10.9.9.9")}
	for _, tc := range []struct {
		name      string
		cfg       Config
		root      string
		n, locals int
		want      []netip.Addr
	}{
		{"across hosts", Config{}, "198.51.100.7:29500", 4, 0, []netip.Addr{lan}},
		{"two of four here", Config{}, "198.51.100.7:29500", 4, 2, []netip.Addr{lan}},
		{"mapped rendezvous", Config{}, "[::ffff:198.51.100.7]:29500", 4, 0, []netip.Addr{lan}},
		{"IPv6 rendezvous", Config{}, "[2001:db8::1]:29500", 4, 0, []netip.Addr{v6}},
		{"addresses given", given, "198.51.100.7:29500", 4, 0, nil},
		{"one rank", Config{}, "198.51.100.7:29500", 1, 0, nil},
		{"all ranks here", Config{}, "198.51.100.7:29500", 4, 4, nil},
		{"loopback rendezvous", Config{}, "127.0.0.1:29500", 4, 0, nil},
		{"IPv6 loopback rendezvous", Config{}, "[::1]:29500", 4, 0, nil},
		{"localhost", Config{}, "localhost:29500", 4, 0, nil},
		{"wildcard", Config{}, "0.0.0.0:29500", 4, 0, nil},
		{"no host", Config{}, ":29500", 4, 0, nil},
		{"own name on loopback, across hosts", Config{}, "127.0.1.1:29500", 4, 2, []netip.Addr{dflt}},
		{"wildcard, across hosts", Config{}, "0.0.0.0:29500", 4, 2, []netip.Addr{dflt}},
		{"no host, across hosts", Config{}, ":29500", 4, 2, []netip.Addr{dflt}},
		{"IPv6 wildcard, across hosts", Config{}, "[::]:29500", 4, 1, []netip.Addr{dflt}},
		{"no port", Config{}, "198.51.100.7", 4, 0, nil},
		{"unresolvable", Config{}, "no-such-host.invalid:29500", 4, 0, nil},
		{"no route", Config{}, "198.51.100.9:29500", 4, 0, nil},
		{"routed over loopback", Config{}, "198.51.100.10:29500", 4, 0, nil},
	} {
		b := Bootstrap{Rank: 1, NRanks: tc.n, LocalSize: tc.locals, Root: tc.root}
		assert.Equal(t, tc.want, planeAddrs(tc.cfg, b, route), tc.name)
	}
}

// hostAddr returns a non-loopback IPv4 address of this host, skipping the
// test where it has none.
func hostAddr(t *testing.T) netip.Addr {
	t.Helper()
	ifs, err := net.Interfaces()
	require.NoError(t, err)
	for _, ifc := range ifs {
		if ifc.Flags&net.FlagUp == 0 || ifc.Flags&net.FlagLoopback != 0 {
			continue
		}
		addrs, err := ifc.Addrs()
		if err != nil {
			continue
		}
		for _, a := range addrs {
			if p, err := netip.ParsePrefix(a.String()); err == nil && p.Addr().Is4() && p.Addr().IsGlobalUnicast() {
				return p.Addr()
			}
		}
	}
	t.Skip("this host has no non-loopback IPv4 address")
	return netip.Addr{}
}

// TestRouteFromOwnAddress: the route to one of this host's own addresses
// leaves from that address.
func TestRouteFromOwnAddress(t *testing.T) {
	own := hostAddr(t)
	got, ok := routeFrom(own)
	require.True(t, ok)
	assert.Equal(t, own, got)
}

// TestNewAnnouncesRoutedAddress: ranks of a job whose rendezvous is on a
// host address, and whose launcher does not say they share a host, bind
// and announce the address they reach it from, not loopback, over both
// transports, and run a collective over it; MetaRoCE then keeps the
// datapath's four paths per plane.
func TestNewAnnouncesRoutedAddress(t *testing.T) {
	own := hostAddr(t)
	for _, tr := range []string{TransportMetaRoCE, TransportTCP} {
		t.Run(tr, func(t *testing.T) {
			ln, err := net.Listen("tcp", netip.AddrPortFrom(own, 0).String())
			require.NoError(t, err)
			defer ln.Close()
			const n = 2
			cfg := Config{Transport: tr, Timeout: 30 * time.Second}
			err = launchRanks(context.Background(), n, func(ctx context.Context, r int) (*Comm, error) {
				b := Bootstrap{Rank: r, NRanks: n, Root: ln.Addr().String(), Source: "test"}
				if r == 0 {
					b.listener = ln
				}
				return New(ctx, b, cfg)
			}, func(c *Comm, r int) error {
				li := c.LinkInfo()
				if len(li.Addrs) != 1 || li.Addrs[0] != own {
					return fmt.Errorf("rank %d announces %v, want [%v]", r, li.Addrs, own)
				}
				if tr == TransportMetaRoCE && li.PathsPerPlane != 4 {
					return fmt.Errorf("rank %d: %d paths per plane, want the datapath's 4", r, li.PathsPerPlane)
				}
				return runOne(context.Background(), c, sched.AllReduce, reduce.Float32, reduce.OpSum, 1<<16, false)
			})
			require.NoError(t, err)
		})
	}
}
