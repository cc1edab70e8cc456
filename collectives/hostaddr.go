package collectives

import (
	"context"
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
// reaches that address: it lies on the network the ranks share. A job
// whose launcher says every rank is on this host (Bootstrap.LocalSize ==
// NRanks) keeps loopback: its traffic never leaves the host, and the
// loopback device's 64 KiB datagrams move it faster than a network
// interface's MTU would.

// A rank whose own rendezvous host is loopback or unspecified, in a job
// its launcher says spans hosts (LocalSize below NRanks), is rank 0 given
// its own host by a name that resolves to loopback there (Debian maps the
// host name to 127.0.1.1) or by a wildcard: the route to the rendezvous
// says nothing then, and the rank takes the source address of its default
// route, found the same way through defaultRouteProbe.

// defaultRouteProbe is an address no host has (TEST-NET-3, RFC 5737),
// routed by the default route where nothing more specific covers it; only
// the route is looked up, nothing is sent.
var defaultRouteProbe = netip.MustParseAddr("203.0.113.1")

// routeLookupTimeout bounds the name lookup of a rendezvous host given by
// name; the rendezvous itself looks it up again and reports a failure.
const routeLookupTimeout = 2 * time.Second

// planeAddrs returns the address cfg.UDP.Addrs defaults to for the rank b
// describes, or nil to leave the datapath's default (127.0.0.1): nil
// where the caller gave addresses, for one rank, for a job whose ranks are
// all on this host, where the rendezvous host is a loopback or
// unspecified address and the launcher did not say the job spans hosts,
// and where the host does not resolve or route (the rendezvous then fails
// with its own error). route finds the local address for a remote one
// (routeFrom outside tests).
func planeAddrs(cfg Config, b Bootstrap, route func(netip.Addr) (netip.Addr, bool)) []netip.Addr {
	if len(cfg.UDP.Addrs) > 0 || b.NRanks <= 1 || b.LocalSize == b.NRanks {
		return nil
	}
	host, _, err := net.SplitHostPort(b.Root)
	if err != nil {
		return nil
	}
	remote, ok := netip.IPv4Unspecified(), host == ""
	if !ok {
		remote, ok = resolveHost(host)
	}
	if !ok {
		return nil
	}
	if remote.IsLoopback() || remote.IsUnspecified() {
		if b.LocalSize == 0 || b.LocalSize >= b.NRanks {
			return nil // a job on this host, as far as anyone said
		}
		remote = defaultRouteProbe
	}
	local, ok := route(remote)
	if !ok || local.IsLoopback() || local.IsUnspecified() {
		return nil
	}
	return []netip.Addr{local}
}

// resolveHost returns host as an address, looking it up if it is a name
// (an IPv4 address first where it has both), unmapped.
func resolveHost(host string) (netip.Addr, bool) {
	if a, err := netip.ParseAddr(host); err == nil {
		return a.Unmap(), a.Zone() == ""
	}
	ctx, cancel := context.WithTimeout(context.Background(), routeLookupTimeout)
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
