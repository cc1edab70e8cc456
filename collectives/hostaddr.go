package collectives

import (
	"context"
	"fmt"
	"net"
	"net/netip"
	"strconv"
	"time"
)

// A rank's endpoint address when Config.UDP.Addrs is empty.
//
// Each rank announces its endpoint's addresses to its peers through the
// rendezvous, so they must be addresses the peers reach. The datapath's own
// default, 127.0.0.1, is right for a job on one host and wrong for a job
// across hosts: a rank elsewhere would dial its own host. New therefore
// takes, for a launched job that may span hosts, the address this host
// reaches rank 0's rendezvous from: the source address the kernel's
// routing picks for the rendezvous host, found by connecting a UDP socket
// to it, which sends nothing, much as NCCL's bootstrap, given
// NCCL_COMM_ID and no NCCL_SOCKET_IFNAME, looks for the interface that
// reaches that address: it lies on the network the ranks share.
//
// A job whose launcher says every rank is on this host (Bootstrap.
// LocalSize == NRanks) keeps loopback: its traffic never leaves the host,
// and the loopback device's 64 KiB datagrams move it faster than a
// network interface's MTU would. So does a job whose launcher says
// nothing of its hosts and whose rendezvous is on loopback. One that says
// nothing and names a rendezvous on a network address gets that network's
// address, even where all its ranks happen to share a host (set
// METAROCE_LOCAL_SIZE, or a 127.0.0.1 rendezvous, to keep loopback).
//
// Rank 0 of a job known to span hosts (Bootstrap.SpansHosts, or a local
// size below the rank count) may be given its own host by a name that
// resolves to loopback there (Debian maps the host name to 127.0.1.1), or
// a wildcard: the route to that says nothing, and it takes the source
// address of its default route instead, found the same way through
// defaultRouteProbe (IPv4, else IPv6); its rendezvous then listens on
// every interface where the name resolved to loopback (rootListenAddr).
// Without a default route it fails New, naming the setting, rather than
// announce 127.0.0.1. A rank of such a job whose rendezvous host does not
// resolve or route yet (a name that a cluster's DNS learns once rank 0 is
// up) takes its default route's address too, and without one tries again
// until the setup's deadline, then fails: it never announces loopback.

// defaultRouteProbe and defaultRouteProbe6 are addresses no host has
// (TEST-NET-3, RFC 5737; the documentation prefix, RFC 3849), routed by
// the default route where nothing more specific covers them; only the
// route is looked up, nothing is sent.
var (
	defaultRouteProbe  = netip.MustParseAddr("203.0.113.1")
	defaultRouteProbe6 = netip.MustParseAddr("2001:db8::1")
)

// routeLookupTimeout bounds the name lookup of a rendezvous host given by
// name, within the setup's own deadline; the rendezvous looks it up again
// and reports a failure.
const routeLookupTimeout = 2 * time.Second

// planeAddrs returns the address cfg.UDP.Addrs defaults to for the rank b
// describes (see above), or nil to leave the datapath's default
// (127.0.0.1), and why, in words for a log line. A rank of a job known to
// span hosts never leaves the default: where its rendezvous host does not
// resolve or route yet (a name a cluster's DNS learns once rank 0 is up)
// it takes its default route's address, and without one it tries again
// until ctx, the setup's deadline, ends, then fails; rank 0 whose
// rendezvous is its own host and that has no default route fails at once.
// Errors name the setting. route finds the local address for a remote
// one (routeFrom outside tests).
func planeAddrs(ctx context.Context, cfg Config, b Bootstrap, route func(netip.Addr) (netip.Addr, bool)) ([]netip.Addr, string, error) {
	if len(cfg.UDP.Addrs) > 0 || b.NRanks <= 1 {
		return nil, "", nil
	}
	spans := b.spans()
	if b.LocalSize == b.NRanks && !spans && !b.allocLocal {
		return nil, "", nil // every rank on this host, by the launcher's word
	}
	host, _, err := net.SplitHostPort(b.Root)
	if err != nil {
		return nil, "", nil // refused by Bootstrap.check, with its reason
	}
	for {
		addr, why, state := pickAddr(ctx, b, host, spans, route)
		switch {
		case addr.IsValid():
			return []netip.Addr{addr}, why, nil
		case state == stateOneHost || !spans:
			return nil, "", nil // a job on this host, or the rendezvous reports the host
		case state == stateHere:
			return nil, "", fmt.Errorf("collectives: rank %d: %s=%q names this host's own loopback or every interface, and %s, but this host has no default route whose address its peers could be given: name rank 0's host by an address every host reaches (a Go program may set Config.UDP.Addrs)", b.Rank, b.rootSetting(), b.Root, b.spansWhy())
		}
		select {
		case <-ctx.Done():
			return nil, "", fmt.Errorf("collectives: rank %d: %s=%q %s, this host has no default route, and %s, so this rank found no address to give its peers%s (a Go program may set Config.UDP.Addrs): %w", b.Rank, b.rootSetting(), b.Root, why, b.spansWhy(), b.deadline.ended(ctx.Err()), ctx.Err())
		case <-time.After(addrRetry):
		}
	}
}

// addrRetry is the pause between planeAddrs' attempts.
const addrRetry = 250 * time.Millisecond

// What pickAddr found of the rendezvous host, where it found no address.
const (
	stateOneHost = iota // the host is this one's and nothing says the job spans hosts
	stateHere           // the host is this one's (loopback, wildcard), and nothing routes
	stateAway           // the host does not resolve or route yet
)

// pickAddr makes one attempt of planeAddrs: the address to announce, or
// the invalid address and the state of the rendezvous host with why in
// words.
func pickAddr(ctx context.Context, b Bootstrap, host string, spans bool, route func(netip.Addr) (netip.Addr, bool)) (netip.Addr, string, int) {
	remote, resolved := netip.IPv4Unspecified(), host == ""
	if !resolved {
		remote, resolved = resolveHost(ctx, host)
	}
	here := resolved && (remote.IsLoopback() || remote.IsUnspecified())
	if here && !spans {
		return netip.Addr{}, "", stateOneHost
	}
	if resolved && !here {
		if local, ok := route(remote); ok && usable(local) {
			return local, fmt.Sprintf("the address this host reaches the rendezvous at %s from", b.Root), stateAway
		}
	}
	why, state := "does not resolve", stateAway
	switch {
	case here:
		why, state = "is this host's loopback or every interface", stateHere
	case resolved:
		why = "has no route from here"
	}
	if !spans {
		return netip.Addr{}, why, state
	}
	for _, probe := range []netip.Addr{defaultRouteProbe, defaultRouteProbe6} {
		if local, ok := route(probe); ok && usable(local) {
			return local, fmt.Sprintf("the address of this host's default route (the rendezvous at %s %s)", b.Root, why), state
		}
	}
	return netip.Addr{}, why, state
}

// usable reports whether a is an address the peers of another host can
// be told: not loopback or unspecified, and not an IPv6 link-local one,
// whose zone a peer would need.
func usable(a netip.Addr) bool {
	return a.IsValid() && !a.IsLoopback() && !a.IsUnspecified() && !(a.Is6() && a.IsLinkLocalUnicast())
}

// resolveHost returns host as an address, looking it up if it is a name
// (an IPv4 address first where it has both), unmapped. A zoned address
// (a link-local one) is not taken.
func resolveHost(ctx context.Context, host string) (netip.Addr, bool) {
	if a, err := netip.ParseAddr(host); err == nil {
		return a.Unmap(), a.Zone() == ""
	}
	ctx, cancel := context.WithTimeout(ctx, routeLookupTimeout)
	defer cancel()
	addrs, err := net.DefaultResolver.LookupNetIP(ctx, "ip", host)
	if err != nil || len(addrs) == 0 {
		return netip.Addr{}, false
	}
	for _, a := range addrs {
		if a.Unmap().Is4() {
			return a.Unmap(), true
		}
	}
	return addrs[0].Unmap(), addrs[0].Zone() == ""
}

// routeFrom returns the local address the kernel's routing uses to reach
// remote: connecting a UDP socket picks a route and a source address
// without sending anything.
func routeFrom(remote netip.Addr) (netip.Addr, bool) {
	c, err := net.Dial("udp", net.JoinHostPort(remote.String(), strconv.Itoa(9)))
	if err != nil {
		return netip.Addr{}, false
	}
	defer c.Close()
	ua, ok := c.LocalAddr().(*net.UDPAddr)
	if !ok {
		return netip.Addr{}, false
	}
	a, ok := netip.AddrFromSlice(ua.IP)
	return a.Unmap(), ok
}
