package main

import (
	"fmt"
	"net/netip"
	"strings"

	"github.com/metaroce/metaroce/collectives"
	"github.com/metaroce/metaroce/transport/udp"
)

// datapathInfo is what the header's "# datapath:" line says about the
// network under a table. Planes, PathsPerPlane and MaxDatagram (bytes of UDP
// payload) are the MetaRoCE endpoint's effective settings; PathsMin and
// PathsMax span the paths rank 0's connections hold, one count per peer
// (both zero before any connection exists); Ifaces are the plane
// addresses' interfaces with their MTUs, bytes.
type datapathInfo struct {
	Transport          string
	Planes             int
	PathsPerPlane      int
	MaxDatagram        int
	PathsMin, PathsMax int
	Ifaces             []ifaceMTU
}

// ifaceMTU is one interface name and its MTU in bytes.
type ifaceMTU struct {
	Name string
	MTU  int
}

// String renders the line without the "# datapath: " prefix.
func (d datapathInfo) String() string {
	var ifs []string
	for _, i := range d.Ifaces {
		ifs = append(ifs, fmt.Sprintf("%s mtu %d", i.Name, i.MTU))
	}
	where := "interface unknown"
	if len(ifs) > 0 {
		where = strings.Join(ifs, ", ")
	}
	if d.Transport != transportMetaRoCE {
		return fmt.Sprintf("kernel TCP over %s", where)
	}
	paths := "no peer connections"
	switch {
	case d.PathsMax == 0:
	case d.PathsMin == d.PathsMax:
		paths = fmt.Sprintf("%d path(s) open to each peer", d.PathsMax)
	default:
		paths = fmt.Sprintf("%d to %d paths open per peer", d.PathsMin, d.PathsMax)
	}
	return fmt.Sprintf("%d plane(s), %d path(s) per plane, %s, max datagram %d B, %s",
		d.Planes, d.PathsPerPlane, paths, d.MaxDatagram, where)
}

// probeDatapath gathers the datapath facts of a communicator's link and the
// MTUs of its interfaces. It must run in the network namespace of the ranks,
// since interfaces are per namespace. peers are rank 0's counters.
func probeDatapath(li collectives.LinkInfo, peers []collectives.PeerStats) datapathInfo {
	d := datapathInfo{Transport: li.Transport}
	addrs := li.Addrs
	if li.Transport == transportMetaRoCE {
		d.Planes, d.PathsPerPlane, d.MaxDatagram = li.Planes(), li.PathsPerPlane, li.MaxDatagram
		for i, p := range peers {
			k := len(p.Paths)
			if i == 0 || k < d.PathsMin {
				d.PathsMin = k
			}
			d.PathsMax = max(d.PathsMax, k)
		}
	}
	if len(addrs) == 0 {
		addrs = []netip.Addr{netip.AddrFrom4([4]byte{127, 0, 0, 1})}
	}
	for _, a := range addrs {
		if ifc := udp.InterfaceOf(a); ifc != nil {
			d.Ifaces = append(d.Ifaces, ifaceMTU{Name: ifc.Name, MTU: ifc.MTU})
		}
	}
	return d
}
