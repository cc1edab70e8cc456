package collectives

import (
	"context"
	"fmt"
	"net"
	"net/netip"
	"strconv"
	"sync"
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
		{"no route nor default route, across hosts", Config{}, "198.51.100.9:29500", 4, 2, true, false, noDefault, nil, "found no address to give its peers"},
		{"routed over loopback", Config{}, "198.51.100.10:29500", 4, 0, false, false, routed, nil, ""},
		{"unresolvable", Config{}, "no-such-host.invalid:29500", 4, 0, false, false, routed, nil, ""},
		{"unresolvable, across hosts", Config{}, "no-such-host.invalid:29500", 4, 2, true, false, routed, []netip.Addr{dflt}, ""},
		{"unresolvable, no default route", Config{}, "no-such-host.invalid:29500", 4, 2, true, false, noDefault, nil, "does not resolve, this host has no default route"},
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
		// A job across hosts with nothing to announce tries again until
		// the setup's deadline.
		ctx, cancel := context.WithTimeout(context.Background(), 3*addrRetry)
		got, why, err := planeAddrs(ctx, tc.cfg, b, route)
		cancel()
		if tc.wantErr != "" {
			assert.ErrorContains(t, err, tc.wantErr, tc.name)
			continue
		}
		assert.NoError(t, err, tc.name)
		assert.Equal(t, tc.want, got, tc.name)
		assert.Equal(t, got != nil, why != "", "%s: a chosen address comes with its reason", tc.name)
	}
}

// TestPlaneAddrsLateRoute: a rank of a job across hosts whose rendezvous
// host has no route yet, on a host without a default route, tries again
// and takes the address once the route comes, instead of announcing
// loopback.
func TestPlaneAddrsLateRoute(t *testing.T) {
	lan := netip.MustParseAddr("10.1.2.3")
	tries := 0
	route := func(remote netip.Addr) (netip.Addr, bool) {
		if remote == defaultRouteProbe || remote == defaultRouteProbe6 {
			return netip.Addr{}, false
		}
		tries++
		return lan, tries >= 3
	}
	b := Bootstrap{Rank: 2, NRanks: 4, LocalSize: 2, Root: "198.51.100.7:29500"}
	got, why, err := planeAddrs(context.Background(), Config{}, b, route)
	require.NoError(t, err)
	assert.Equal(t, []netip.Addr{lan}, got)
	assert.Contains(t, why, "reaches the rendezvous at 198.51.100.7:29500 from")
	assert.Equal(t, 3, tries)
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
// Debian does, and perhaps to ::1 too), which the other hosts could not
// reach, and tells every loopback address the name resolved to; a loopback
// address given as such, "localhost", a name resolving elsewhere or not at
// all, and anything in a job not known to span hosts are taken at their
// word.
func TestRootListenAddr(t *testing.T) {
	lo, lo6 := netip.MustParseAddr("127.0.1.1"), netip.MustParseAddr("::1")
	names := map[string][]netip.Addr{
		"rank0host": {lo},
		"dualhost":  {lo6, lo},
		"lanhost":   {netip.MustParseAddr("198.51.100.7")},
	}
	defer func(l func(context.Context, string) []netip.Addr) { lookupRoot = l }(lookupRoot)
	lookupRoot = func(_ context.Context, host string) []netip.Addr { return names[host] }
	for _, tc := range []struct {
		root   string
		spans  bool
		locals int
		want   string
		home   []netip.Addr
	}{
		{"rank0host:7000", true, 0, ":7000", []netip.Addr{lo}},
		{"dualhost:7000", true, 0, ":7000", []netip.Addr{lo6, lo}},
		{"rank0host:7000", false, 2, ":7000", []netip.Addr{lo}}, // a local size below the rank count says so too
		{"rank0host:7000", false, 0, "rank0host:7000", nil},
		{"rank0host:7000", false, 4, "rank0host:7000", nil},
		{"lanhost:7000", true, 0, "lanhost:7000", nil},
		{"nohost:7000", true, 0, "nohost:7000", nil},
		{"localhost:7000", true, 0, "localhost:7000", nil},
		{"127.0.1.1:7000", true, 0, "127.0.1.1:7000", nil},
		{"[::1]:7000", true, 0, "[::1]:7000", nil},
		{":7000", true, 0, ":7000", nil},
		{"bad", true, 0, "bad", nil},
	} {
		b := Bootstrap{Rank: 0, NRanks: 4, LocalSize: tc.locals, Root: tc.root, SpansHosts: tc.spans}
		got, home := rootListenAddr(context.Background(), b)
		assert.Equal(t, tc.want, got, "%s spans %v, %d local", tc.root, tc.spans, tc.locals)
		assert.Equal(t, tc.home, home, "%s spans %v, %d local", tc.root, tc.spans, tc.locals)
	}
}

// TestWrongLoopbackTurnedAway: a rendezvous that listens on every
// interface because its name resolved to loopback addresses turns away
// connections that came in on another loopback address (another job's
// ranks on this host at the same port), and lets through those on the
// name's own loopback addresses (IPv4 and IPv6: a rank on rank 0's host
// dials the name, and Go's dialer tries ::1 first where the name has
// both) and on the host's other addresses.
func TestWrongLoopbackTurnedAway(t *testing.T) {
	ln, err := net.Listen("tcp", ":0")
	require.NoError(t, err)
	defer ln.Close()
	port := strconv.Itoa(ln.Addr().(*net.TCPAddr).Port)
	home := []netip.Addr{netip.MustParseAddr("127.0.1.1"), netip.MustParseAddr("::1")}
	dials := map[string]bool{"127.0.1.1": false, "::1": false, "127.0.0.1": true, "127.0.0.2": true}
	if own, ok := firstHostAddr(); ok {
		dials[own.String()] = false
	}
	for dial, wrong := range dials {
		c, err := net.Dial("tcp", net.JoinHostPort(dial, port))
		if err != nil && dial == "::1" {
			continue // no IPv6 loopback here
		}
		require.NoError(t, err, dial)
		in, err := ln.Accept()
		require.NoError(t, err)
		assert.Equal(t, wrong, wrongLoopback(in, home), dial)
		assert.Equal(t, wrong || dial == "::1", wrongLoopback(in, home[:1]), "%s, the name resolving to 127.0.1.1 alone", dial)
		assert.False(t, wrongLoopback(in, nil), "%s: nothing is turned away where the root was not widened", dial)
		in.Close()
		c.Close()
	}
}

// TestWidenedRendezvous: rank 0 of a job across hosts, named by a host
// name that resolves to 127.0.1.1 and ::1 on its host, listens on every
// interface; a rank on its host that reached it on ::1 (as Go's dialer
// tries first) joins, and a rank of another job on this host that dials
// 127.0.0.1 at the same port is turned away as another job's, while this
// job's rendezvous completes.
func TestWidenedRendezvous(t *testing.T) {
	ln, err := net.Listen("tcp", "[::1]:0")
	if err != nil {
		t.Skipf("no IPv6 loopback here: %v", err)
	}
	port := strconv.Itoa(ln.Addr().(*net.TCPAddr).Port)
	ln.Close()
	defer func(l func(context.Context, string) []netip.Addr) { lookupRoot = l }(lookupRoot)
	lookupRoot = func(context.Context, string) []netip.Addr {
		return []netip.Addr{netip.MustParseAddr("::1"), netip.MustParseAddr("127.0.1.1")}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	root := Bootstrap{Rank: 0, NRanks: 2, LocalSize: 1, Root: net.JoinHostPort("rank0host", port), Source: "test"}
	peer := Bootstrap{Rank: 1, NRanks: 2, Root: net.JoinHostPort("::1", port), Source: "test"}
	stranger := Bootstrap{Rank: 1, NRanks: 2, Root: net.JoinHostPort("127.0.0.1", port), Source: "test"}
	turned := make(chan struct{}, 1)
	stranger.turnedAway = func() {
		select {
		case turned <- struct{}{}:
		default:
		}
	}
	var rootErr, peerErr, strangerErr error
	var wg sync.WaitGroup
	wg.Add(2)
	go func() { defer wg.Done(); _, rootErr = exchange(ctx, root, []byte("r0")) }()
	go func() {
		defer wg.Done()
		sctx, scancel := context.WithTimeout(ctx, 2*time.Second)
		defer scancel()
		_, strangerErr = exchange(sctx, stranger, []byte("other job"))
	}()
	// The stranger first, so that rank 0 meets it while it waits for rank 1.
	select {
	case <-turned:
	case <-ctx.Done():
		t.Fatal("rank 0 never turned the other job's rank away")
	}
	_, peerErr = exchange(ctx, peer, []byte("r1"))
	wg.Wait()
	require.NoError(t, rootErr)
	require.NoError(t, peerErr)
	require.ErrorContains(t, strangerErr, errOtherJob.Error(), "turned away as another job's")
}
