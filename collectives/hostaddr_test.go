package collectives

import (
	"context"
	"fmt"
	"net"
	"net/netip"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/metaroce/metaroce/collectives/reduce"
	"github.com/metaroce/metaroce/collectives/sched"
)

// TestPlaneAddrs: a rank of a job that may span hosts, given no
// addresses, takes the one its host routes to the rendezvous host from;
// rank 0 of a job its launcher says spans hosts, whose rendezvous host is
// its own loopback or a wildcard, the one its default route leaves from
// (IPv4, else IPv6); given addresses, alone, on one host by its
// launcher's word, or with a rendezvous on loopback or a wildcard and no
// word of other hosts, it keeps the datapath's default; a rank of a job
// across hosts that finds no address fails, naming the setting.
func TestPlaneAddrs(t *testing.T) {
	lan, dflt, dflt6 := netip.MustParseAddr("10.1.2.3"), netip.MustParseAddr("10.1.2.4"), netip.MustParseAddr("2001:db8::4")
	v6 := netip.MustParseAddr("2001:db8::2")
	given := Config{}
	given.UDP.Addrs = []netip.Addr{netip.MustParseAddr("10.9.9.9")}
	const (
		routed     = iota // every route there
		noDefault4        // no IPv4 default route
		noDefault         // no default route at all
		linkLocal         // the default routes leave from link-local addresses
	)
	for _, tc := range []struct {
		name      string
		cfg       Config
		root      string
		n, locals int
		spans     bool
		alloc     bool // the local size was the allocation's, cut to n
		routes    int
		want      []netip.Addr
		wantErr   string
	}{
		{"unknown hosts", Config{}, "198.51.100.7:29500", 4, 0, false, false, routed, []netip.Addr{lan}, ""},
		{"across hosts", Config{}, "198.51.100.7:29500", 4, 2, true, false, routed, []netip.Addr{lan}, ""},
		{"allocation's local size", Config{}, "198.51.100.7:29500", 4, 4, false, true, routed, []netip.Addr{lan}, ""},
		{"Slurm step on two nodes", Config{}, "198.51.100.7:29500", 4, 4, true, false, routed, []netip.Addr{lan}, ""},
		{"mapped rendezvous", Config{}, "[::ffff:198.51.100.7]:29500", 4, 0, false, false, routed, []netip.Addr{lan}, ""},
		{"IPv6 rendezvous", Config{}, "[2001:db8::7]:29500", 4, 0, false, false, routed, []netip.Addr{v6}, ""},
		{"addresses given", given, "198.51.100.7:29500", 4, 0, true, false, routed, nil, ""},
		{"one rank", Config{}, "198.51.100.7:29500", 1, 0, false, false, routed, nil, ""},
		{"all ranks here", Config{}, "198.51.100.7:29500", 4, 4, false, false, routed, nil, ""},
		{"loopback rendezvous", Config{}, "127.0.0.1:29500", 4, 0, false, false, routed, nil, ""},
		{"IPv6 loopback rendezvous", Config{}, "[::1]:29500", 4, 0, false, false, routed, nil, ""},
		{"localhost", Config{}, "localhost:29500", 4, 0, false, false, routed, nil, ""},
		{"wildcard", Config{}, "0.0.0.0:29500", 4, 0, false, false, routed, nil, ""},
		{"no host", Config{}, ":29500", 4, 0, false, false, routed, nil, ""},
		{"own name on loopback, across hosts", Config{}, "127.0.1.1:29500", 4, 2, true, false, routed, []netip.Addr{dflt}, ""},
		{"wildcard, across hosts", Config{}, "0.0.0.0:29500", 4, 2, true, false, routed, []netip.Addr{dflt}, ""},
		{"no host, across hosts", Config{}, ":29500", 4, 2, true, false, routed, []netip.Addr{dflt}, ""},
		{"IPv6 default route only", Config{}, "[::]:29500", 4, 1, true, false, noDefault4, []netip.Addr{dflt6}, ""},
		{"no default route, across hosts", Config{}, "0.0.0.0:29500", 4, 2, true, false, noDefault, nil, `Bootstrap.Root="0.0.0.0:29500" names this host's own`},
		{"local size says across hosts", Config{}, "0.0.0.0:29500", 4, 2, false, false, routed, []netip.Addr{dflt}, ""},
		{"no route", Config{}, "198.51.100.9:29500", 4, 0, false, false, routed, nil, ""},
		{"no route, across hosts", Config{}, "198.51.100.9:29500", 4, 2, true, false, routed, []netip.Addr{dflt}, ""},
		{"no route nor default route, across hosts", Config{}, "198.51.100.9:29500", 4, 2, true, false, noDefault, nil, ""},
		{"routed over loopback", Config{}, "198.51.100.10:29500", 4, 0, false, false, routed, nil, ""},
		{"unresolvable", Config{}, "no-such-host.invalid:29500", 4, 0, false, false, routed, nil, ""},
		{"unresolvable, across hosts", Config{}, "no-such-host.invalid:29500", 4, 2, true, false, routed, []netip.Addr{dflt}, ""},
		{"unresolvable, no default route", Config{}, "no-such-host.invalid:29500", 4, 2, true, false, noDefault, nil, ""},
		{"link-local default route only", Config{}, "0.0.0.0:29500", 4, 2, true, false, linkLocal, nil, "no default route"},
		{"no port", Config{}, "198.51.100.7", 4, 2, true, false, routed, nil, ""},
	} {
		route := func(remote netip.Addr) (netip.Addr, bool) {
			switch {
			case tc.routes == linkLocal && (remote == defaultRouteProbe || remote == defaultRouteProbe6):
				return netip.MustParseAddr("fe80::1"), true
			case remote == defaultRouteProbe:
				return dflt, tc.routes == routed
			case remote == defaultRouteProbe6:
				return dflt6, tc.routes != noDefault
			case remote == netip.MustParseAddr("198.51.100.9"):
				return netip.Addr{}, false // no route
			case remote == netip.MustParseAddr("198.51.100.10"):
				return netip.MustParseAddr("127.0.0.1"), true
			case remote.Is6():
				return v6, true
			}
			return lan, true
		}
		b := Bootstrap{Rank: 0, NRanks: tc.n, LocalSize: tc.locals, SpansHosts: tc.spans, allocLocal: tc.alloc, Root: tc.root}
		got, why, err := planeAddrs(context.Background(), tc.cfg, b, route)
		if tc.wantErr != "" {
			assert.ErrorContains(t, err, tc.wantErr, tc.name)
			continue
		}
		assert.NoError(t, err, tc.name)
		assert.Equal(t, tc.want, got, tc.name)
		assert.Equal(t, got != nil, why != "", "%s: a chosen address comes with its reason", tc.name)
	}
}

// hostAddr returns a non-loopback IPv4 address of this host, skipping the
// test where it has none.
func hostAddr(t *testing.T) netip.Addr {
	t.Helper()
	a, ok := firstHostAddr()
	if !ok {
		t.Skip("this host has no non-loopback IPv4 address")
	}
	return a
}

// firstHostAddr returns a non-loopback IPv4 address of an interface that
// is up, if this host has one.
func firstHostAddr() (netip.Addr, bool) {
	ifs, err := net.Interfaces()
	if err != nil {
		return netip.Addr{}, false
	}
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
				return p.Addr(), true
			}
		}
	}
	return netip.Addr{}, false
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

// TestRootListenAddr: rank 0 of a job that spans hosts listens on every
// interface at its port where its rendezvous host is a name that resolves
// to loopback on its own host (its host name mapped to 127.0.1.1, as
// Debian does), which the other hosts could not reach, and tells which
// loopback address that was; a loopback address given as such, or
// "localhost", is taken at its word, and so is anything in a job not known
// to span hosts.
func TestRootListenAddr(t *testing.T) {
	for _, tc := range []struct {
		root  string
		spans bool
	}{
		{"localhost:7000", true},
		{"127.0.1.1:7000", true},
		{"[::1]:7000", true},
		{"198.51.100.7:7000", true},
		{":7000", true},
		{"bad", true},
	} {
		b := Bootstrap{Rank: 0, NRanks: 4, Root: tc.root, SpansHosts: tc.spans}
		got, home := rootListenAddr(context.Background(), b)
		assert.Equal(t, tc.root, got, "%s spans %v", tc.root, tc.spans)
		assert.False(t, home.IsValid(), "%s spans %v", tc.root, tc.spans)
	}
	// This host's own name, which its /etc/hosts maps to 127.0.1.1.
	const name = "rank0host"
	lo := netip.MustParseAddr("127.0.1.1")
	defer func(r func(context.Context, string) (netip.Addr, bool)) { resolveRoot = r }(resolveRoot)
	resolveRoot = func(ctx context.Context, host string) (netip.Addr, bool) {
		if host == name {
			return lo, true
		}
		return resolveHost(ctx, host)
	}
	for _, tc := range []struct {
		spans  bool
		locals int
		want   string
	}{
		{true, 0, ":7000"},
		{false, 2, ":7000"}, // a local size below the rank count says so too
		{false, 0, name + ":7000"},
		{false, 4, name + ":7000"},
	} {
		b := Bootstrap{Rank: 0, NRanks: 4, LocalSize: tc.locals, Root: name + ":7000", SpansHosts: tc.spans}
		got, home := rootListenAddr(context.Background(), b)
		assert.Equal(t, tc.want, got, "spans %v, %d local", tc.spans, tc.locals)
		assert.Equal(t, got == ":7000", home == lo, "spans %v, %d local: the loopback address the name resolved to", tc.spans, tc.locals)
	}
}

// TestWrongLoopbackTurnedAway: a rendezvous that listens on every
// interface because its name resolved to one loopback address turns away
// connections that came in on another loopback address (another job's
// ranks on this host at the same port), and lets the others through.
func TestWrongLoopbackTurnedAway(t *testing.T) {
	ln, err := net.Listen("tcp", ":0")
	require.NoError(t, err)
	defer ln.Close()
	port := strconv.Itoa(ln.Addr().(*net.TCPAddr).Port)
	home := netip.MustParseAddr("127.0.1.1")
	dials := map[string]bool{"127.0.1.1": false, "127.0.0.1": true, "127.0.0.2": true}
	if own, ok := firstHostAddr(); ok {
		dials[own.String()] = false
	}
	for dial, wrong := range dials {
		c, err := net.Dial("tcp", net.JoinHostPort(dial, port))
		require.NoError(t, err, dial)
		in, err := ln.Accept()
		require.NoError(t, err)
		assert.Equal(t, wrong, wrongLoopback(in, home), dial)
		assert.False(t, wrongLoopback(in, netip.Addr{}), "%s: nothing is turned away where the root was not widened", dial)
		in.Close()
		c.Close()
	}
}
