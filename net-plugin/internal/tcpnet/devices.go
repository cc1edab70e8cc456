package tcpnet

import (
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/metaroce/metaroce/net-plugin/internal/backend"
)

// defaultSpeedMbps is reported when the kernel does not know the link speed
// (loopback, virtual NICs); it matches NCCL's socket transport.
const defaultSpeedMbps = 10000

// maxDevices bounds the number of devices, like NCCL's MAX_IFS.
const maxDevices = 16

// ifaceFilter selects interfaces by name. The spec is a comma-separated list
// of name prefixes; a leading '^' turns it into an exclude list and a leading
// '=' makes the names exact (the NCCL_SOCKET_IFNAME conventions).
type ifaceFilter struct {
	exclude bool
	exact   bool
	names   []string
}

// parseIfaceFilter parses a filter spec; an empty spec yields the zero filter
// (automatic choice).
func parseIfaceFilter(spec string) (ifaceFilter, error) {
	var f ifaceFilter
	spec = strings.TrimSpace(spec)
	if spec == "" {
		return f, nil
	}
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
			return ifaceFilter{}, fmt.Errorf("tcpnet: bad interface name %q in METAROCE_IFNAMES", n)
		}
		f.names = append(f.names, n)
	}
	if len(f.names) == 0 {
		return ifaceFilter{}, fmt.Errorf("tcpnet: METAROCE_IFNAMES=%q names no interface", spec)
	}
	return f, nil
}

// auto reports whether no names were given.
func (f ifaceFilter) auto() bool { return len(f.names) == 0 }

// match reports whether interface name passes the filter.
func (f ifaceFilter) match(name string) bool {
	hit := false
	for _, n := range f.names {
		if name == n || (!f.exact && strings.HasPrefix(name, n)) {
			hit = true
			break
		}
	}
	return hit != f.exclude
}

// ifaceAddr picks an interface's address: IPv4 first, then a global IPv6.
func ifaceAddr(ifc net.Interface) (net.IP, bool) {
	addrs, err := ifc.Addrs()
	if err != nil {
		return nil, false
	}
	var v6 net.IP
	for _, a := range addrs {
		ipn, ok := a.(*net.IPNet)
		if !ok {
			continue
		}
		if ip4 := ipn.IP.To4(); ip4 != nil {
			return ip4, true
		}
		if v6 == nil && !ipn.IP.IsLinkLocalUnicast() && !ipn.IP.IsLoopback() {
			v6 = ipn.IP
		}
	}
	return v6, v6 != nil
}

// discoverDevices lists usable interfaces. With an explicit filter every
// running interface that matches and has an address is used; automatically,
// non-loopback, non-virtual interfaces are preferred and loopback is the last
// resort, so a laptop or CI box still gets one device.
func discoverDevices(f ifaceFilter, socks int) ([]backend.Device, error) {
	ifcs, err := net.Interfaces()
	if err != nil {
		return nil, fmt.Errorf("tcpnet: listing interfaces: %w", err)
	}
	pick := func(ok func(net.Interface) bool) []backend.Device {
		var devs []backend.Device
		for _, ifc := range ifcs {
			if ifc.Flags&net.FlagUp == 0 || !ok(ifc) || len(devs) == maxDevices {
				continue
			}
			ip, found := ifaceAddr(ifc)
			if !found {
				continue
			}
			devs = append(devs, describe(ifc.Name, ip, socks))
		}
		return devs
	}
	if !f.auto() {
		devs := pick(func(i net.Interface) bool { return f.match(i.Name) })
		if len(devs) == 0 {
			return nil, fmt.Errorf("tcpnet: no running interface with an address matches METAROCE_IFNAMES (check `ip addr`)")
		}
		return devs, nil
	}
	virtual := func(n string) bool {
		return strings.HasPrefix(n, "docker") || strings.HasPrefix(n, "virbr") || strings.HasPrefix(n, "veth") || strings.HasPrefix(n, "br-")
	}
	devs := pick(func(i net.Interface) bool { return i.Flags&net.FlagLoopback == 0 && !virtual(i.Name) })
	if len(devs) == 0 {
		devs = pick(func(i net.Interface) bool { return i.Flags&net.FlagLoopback != 0 })
	}
	if len(devs) == 0 {
		return nil, fmt.Errorf("tcpnet: no running interface with an IP address; set METAROCE_IFNAMES")
	}
	return devs, nil
}

// describe fills a Device for interface name from sysfs.
func describe(name string, ip net.IP, socks int) backend.Device {
	d := backend.Device{
		Name:      "metaroce_" + name,
		IfName:    name,
		SpeedMbps: defaultSpeedMbps,
		Addr:      ip.String(),
		Planes:    1,
		Paths:     socks,
	}
	if p, err := filepath.EvalSymlinks(filepath.Join("/sys/class/net", name, "device")); err == nil {
		d.PCIPath = p
	}
	if b, err := os.ReadFile(filepath.Join("/sys/class/net", name, "speed")); err == nil {
		if s, err := strconv.Atoi(strings.TrimSpace(string(b))); err == nil && s > 0 {
			d.SpeedMbps = s
		}
	}
	return d
}
