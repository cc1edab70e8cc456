// Package netdev selects the network interfaces the plugin's backends use:
// the METAROCE_IFNAMES filter (NCCL_SOCKET_IFNAME syntax), the automatic
// choice when it is unset, and each interface's address, PCI path and link
// speed from sysfs.
package netdev

import (
	"errors"
	"fmt"
	"net"
	"net/netip"
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

// MaxIfaces bounds the interfaces Select returns, like NCCL's MAX_IFS.
const MaxIfaces = 16

// Filter selects interfaces by name. The spec is a comma-separated list of
// name prefixes; a leading '^' turns it into an exclude list and a leading
// '=' makes the names exact (the NCCL_SOCKET_IFNAME conventions).
type Filter struct {
	exclude bool
	exact   bool
	names   []string
	spec    string // as set, for errors
}

// ErrNoMatch marks Select's error for an explicit filter that matches no
// usable interface: the user's setting to fix, not a system failure.
var ErrNoMatch = errors.New("no usable interface matches")

// ParseFilter parses a filter spec; an empty spec yields the zero Filter
// (automatic choice).
func ParseFilter(spec string) (Filter, error) {
	var f Filter
	spec = strings.TrimSpace(spec)
	if spec == "" {
		return f, nil
	}
	// set is the value as given, for the errors: spec loses its markers below.
	set := spec
	f.spec = set
	if strings.HasPrefix(spec, "^") {
		f.exclude, spec = true, spec[1:]
	}
	if strings.HasPrefix(spec, "=") {
		f.exact, spec = true, spec[1:]
	}
	for _, n := range strings.Split(spec, ",") {
		n = strings.TrimSpace(n)
		if n == "" {
			continue
		}
		if len(n) > 64 || strings.ContainsAny(n, " /\x00") {
			return Filter{}, fmt.Errorf("bad interface name %q in METAROCE_IFNAMES", n)
		}
		f.names = append(f.names, n)
	}
	if len(f.names) == 0 {
		return Filter{}, fmt.Errorf("METAROCE_IFNAMES=%q names no interface (want a comma list of interface names or prefixes, optionally after '^' to exclude or '=' for exact names)", set)
	}
	return f, nil
}

// Auto reports whether no names were given.
func (f Filter) Auto() bool { return len(f.names) == 0 }

// Match reports whether interface name passes the filter.
func (f Filter) Match(name string) bool {
	hit := false
	for _, n := range f.names {
		if name == n || (!f.exact && strings.HasPrefix(name, n)) {
			hit = true
			break
		}
	}
	return hit != f.exclude
}

// Iface is one selected interface.
type Iface struct {
	// Name is the kernel interface name, e.g. "eth0".
	Name string
	// Addr is the address used on it: IPv4 if it has one, else a global IPv6.
	Addr netip.Addr
	// PCIPath is the sysfs path of its PCI device, "" for virtual interfaces.
	PCIPath string
	// SpeedMbps is the link speed the kernel reports, Mbit/s; 0 if unknown
	// (loopback, most virtual interfaces).
	SpeedMbps int
	// Loopback is set for the loopback interface.
	Loopback bool
	// NoCarrier is set for an interface that is up without a carrier
	// (RUNNING clear) when it was named by its exact name: it stays a plane, as
	// it would if its cable were pulled later, so that every host of a
	// job that names the same interfaces has as many planes; the caller
	// warns about it.
	NoCarrier bool
}

// ifaceAddr picks an interface's address: IPv4 first, then a global IPv6.
// With linkLocal false an IPv4 link-local address (169.254.0.0/16) does not
// count: a BMC or an unconfigured NIC has the same such address on every
// host, and a peer given it would send to itself.
func ifaceAddr(ifc net.Interface, linkLocal bool) (netip.Addr, bool) {
	addrs, err := ifc.Addrs()
	if err != nil {
		return netip.Addr{}, false
	}
	return pickAddr(addrs, linkLocal)
}

// pickAddr is ifaceAddr's choice among an interface's addresses.
func pickAddr(addrs []net.Addr, linkLocal bool) (netip.Addr, bool) {
	var v6 netip.Addr
	for _, a := range addrs {
		ipn, ok := a.(*net.IPNet)
		if !ok {
			continue
		}
		ip, ok := netip.AddrFromSlice(ipn.IP)
		if !ok {
			continue
		}
		ip = ip.Unmap()
		if ip.Is4() {
			if !linkLocal && ip.IsLinkLocalUnicast() {
				continue
			}
			return ip, true
		}
		if !v6.IsValid() && !ip.IsLinkLocalUnicast() && !ip.IsLoopback() {
			v6 = ip
		}
	}
	return v6, v6.IsValid()
}

// virtualPrefixes name bridges, container and cluster overlays, and VPN
// tunnels: interfaces a host has besides its fabric NICs, which the
// automatic choice skips (an explicit METAROCE_IFNAMES may still name them).
var virtualPrefixes = []string{"docker", "virbr", "veth", "br-", "cni", "flannel", "cali", "cilium",
	"kube-", "lxc", "vxlan", "tunl", "weave", "podman", "tailscale", "zt", "wg"}

// virtual reports whether the automatic choice skips interface n.
func virtual(n string) bool {
	for _, p := range virtualPrefixes {
		if strings.HasPrefix(n, p) {
			return true
		}
	}
	return false
}

// Select lists usable interfaces, at most MaxIfaces. With an explicit filter
// every running interface that matches and has an address is used, and one
// named by its exact name also when it is up without a carrier (marked
// NoCarrier);
// automatically, non-loopback, non-virtual interfaces with an address other
// than IPv4 link-local are preferred and loopback is the last resort, so a
// laptop or CI box still gets one.
func Select(f Filter) ([]Iface, error) {
	ifcs, err := net.Interfaces()
	if err != nil {
		return nil, fmt.Errorf("listing interfaces: %w", err)
	}
	// Running interfaces only: a NIC without a carrier (a cable out, a
	// veth whose peer is down) would be a plane that drops everything.
	// One named by its exact name is taken when up, and marked: the planes
	// of a job's hosts must match in number, and the datapath fails over
	// from a dead plane as it does when a carrier goes later.
	pick := func(ok func(net.Interface) bool) []Iface {
		var out []Iface
		for _, ifc := range ifcs {
			if !usable(ifc.Flags, f.keepsDark()) || !ok(ifc) || len(out) == MaxIfaces {
				continue
			}
			ip, found := ifaceAddr(ifc, !f.Auto())
			if !found {
				continue
			}
			d := describe(ifc, ip)
			d.NoCarrier = !running(ifc.Flags)
			out = append(out, d)
		}
		return out
	}
	if !f.Auto() {
		out := pick(func(i net.Interface) bool { return f.Match(i.Name) })
		if len(out) == 0 {
			var have []string
			for _, i := range pick(func(net.Interface) bool { return true }) {
				have = append(have, i.Name)
			}
			list := strings.Join(have, ", ")
			if list == "" {
				list = "none"
			}
			var dark []string
			for _, i := range ifcs {
				if f.Match(i.Name) && i.Flags&net.FlagUp != 0 && !running(i.Flags) {
					dark = append(dark, i.Name)
				}
			}
			if len(dark) > 0 {
				list += "; up without a carrier: " + strings.Join(dark, ", ")
			}
			return nil, fmt.Errorf("METAROCE_IFNAMES=%q: %w (running, with an address: %s; check `ip addr`)",
				f.spec, ErrNoMatch, list)
		}
		return out, nil
	}
	out := pick(func(i net.Interface) bool { return i.Flags&net.FlagLoopback == 0 && !virtual(i.Name) })
	if len(out) == 0 {
		out = pick(func(i net.Interface) bool { return i.Flags&net.FlagLoopback != 0 })
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("no running interface with an IP address; set METAROCE_IFNAMES")
	}
	return out, nil
}

// running reports whether an interface can carry traffic: up, and with a
// carrier (RUNNING). An interface that is up without a carrier (a cable
// out, a veth whose peer is down) would become a plane that drops every
// datagram, and its speed would count in the device's.
func running(f net.Flags) bool {
	return f&net.FlagUp != 0 && f&net.FlagRunning != 0
}

// usable reports whether an interface with flags f can be a plane: running,
// or only up where dark (a carrier-less interface) is allowed (see Select).
func usable(f net.Flags, dark bool) bool {
	return running(f) || (dark && f&net.FlagUp != 0)
}

// keepsDark reports whether f names interfaces by their exact names
// ("=eth0,eth1"), which then count without a carrier: a prefix or an
// exclusion list picks whatever matches, and would take every unplugged
// NIC or dangling veth it covers, ahead of working ones within MaxIfaces.
func (f Filter) keepsDark() bool { return f.exact && !f.exclude }

// describe fills an Iface from sysfs.
func describe(ifc net.Interface, ip netip.Addr) Iface {
	d := Iface{Name: ifc.Name, Addr: ip, Loopback: ifc.Flags&net.FlagLoopback != 0}
	if p, err := filepath.EvalSymlinks(filepath.Join("/sys/class/net", ifc.Name, "device")); err == nil {
		d.PCIPath = p
	}
	if b, err := os.ReadFile(filepath.Join("/sys/class/net", ifc.Name, "speed")); err == nil {
		if s, err := strconv.Atoi(strings.TrimSpace(string(b))); err == nil && s > 0 {
			d.SpeedMbps = s
		}
	}
	return d
}
