package sim

import (
	"errors"
	"fmt"
	"math"
)

// Config describes the fabric. Zero fields take the defaults of
// DefaultConfig.
type Config struct {
	Seed         uint64  // seed of the single random source
	Planes       int     // independent planes; every host has one NIC port per plane
	Leaves       int     // leaves per plane
	Spines       int     // spines per plane
	HostsPerLeaf int     // hosts under each leaf
	Oversub      float64 // leaf downlink/uplink capacity ratio, ≥ 1
	LinkRate     float64 // host link rate, bits per second
	LinkDelay    int64   // propagation delay of every link, ns
	Overhead     int     // per-packet wire bytes beyond the UDP payload (Ethernet, IP, UDP, preamble, gap)
	Buffer       int     // egress queue limit per switch port, bytes (drop tail)
	Kmin, Kmax   int     // ECN ramp thresholds on the instantaneous queue, bytes
	Pmax         float64 // marking probability at Kmax (1 above it)
	Loss         float64 // random loss probability per link traversal
	PFC          bool    // enable priority flow control (lossless)
	XOFF, XON    int     // PFC thresholds on bytes held per ingress port
	NICQueue     int     // packets a host NIC port holds behind the one being sent
	RerouteDelay int64   // after a spine–leaf link fails, leaves stop using that spine for the leaf after this long (0: never)
	MaxDatagram  int     // largest transport datagram (header + payload), bytes
}

// DefaultConfig is a 64-host single-plane fabric of 400 Gb/s links with
// 1 µs links (8.344 µs base RTT across spines for a 4218-byte packet and a
// 130-byte acknowledgement), 4 KiB MTU, 2 MiB port
// buffers and a 100–400 KB ECN ramp.
func DefaultConfig() Config {
	return Config{
		Planes:       1,
		Leaves:       8,
		Spines:       8,
		HostsPerLeaf: 8,
		Oversub:      1,
		LinkRate:     400e9,
		LinkDelay:    1000,
		Overhead:     66,
		Buffer:       2 << 20,
		Kmin:         100_000,
		Kmax:         400_000,
		Pmax:         0.2,
		XOFF:         256 << 10,
		XON:          128 << 10,
		NICQueue:     2,
		MaxDatagram:  4096 + 128,
	}
}

// ErrConfig is wrapped by every configuration error.
var ErrConfig = errors.New("sim: invalid configuration")

// Bounds of a link rate (host links and leaf–spine links), bits per
// second. A port keeps its rate as a whole number of bits per second
// (port.txTime): from 1 kb/s up that rounding is off by at most 0.05%, and
// up to 1e18 b/s the serialisation arithmetic cannot overflow 64 bits.
const (
	minLinkRate = 1e3
	maxLinkRate = 1e18
)

// UplinkRate is the rate of every leaf–spine link, bits per second: a
// leaf's uplinks together carry its hosts' links divided by Oversub.
func (c Config) UplinkRate() float64 {
	return c.LinkRate * float64(c.HostsPerLeaf) / (float64(c.Spines) * c.Oversub)
}

func (c *Config) fill() error {
	d := DefaultConfig()
	fi := func(v *int, x int) {
		if *v <= 0 {
			*v = x
		}
	}
	fi(&c.Planes, d.Planes)
	fi(&c.Leaves, d.Leaves)
	fi(&c.Spines, d.Spines)
	fi(&c.HostsPerLeaf, d.HostsPerLeaf)
	fi(&c.Overhead, d.Overhead)
	fi(&c.Buffer, d.Buffer)
	fi(&c.Kmin, d.Kmin)
	fi(&c.Kmax, d.Kmax)
	fi(&c.XOFF, d.XOFF)
	fi(&c.XON, d.XON)
	fi(&c.NICQueue, d.NICQueue)
	fi(&c.MaxDatagram, d.MaxDatagram)
	if c.Oversub <= 0 {
		c.Oversub = d.Oversub
	}
	if c.LinkRate <= 0 {
		c.LinkRate = d.LinkRate
	}
	if c.LinkDelay <= 0 {
		c.LinkDelay = d.LinkDelay
	}
	if c.Pmax <= 0 {
		c.Pmax = d.Pmax
	}
	switch {
	case c.Planes > 16:
		return fmt.Errorf("%w: %d planes (max 16)", ErrConfig, c.Planes)
	case c.Oversub < 1:
		return fmt.Errorf("%w: oversubscription %.2f < 1", ErrConfig, c.Oversub)
	case c.Kmax < c.Kmin:
		return fmt.Errorf("%w: Kmax %d < Kmin %d", ErrConfig, c.Kmax, c.Kmin)
	case c.XON > c.XOFF:
		return fmt.Errorf("%w: XON %d > XOFF %d", ErrConfig, c.XON, c.XOFF)
	case c.Loss < 0 || c.Loss >= 1:
		return fmt.Errorf("%w: loss %g outside [0,1)", ErrConfig, c.Loss)
	case c.Pmax > 1:
		return fmt.Errorf("%w: Pmax %g > 1", ErrConfig, c.Pmax)
	case c.Leaves*c.HostsPerLeaf > 1<<16:
		return fmt.Errorf("%w: %d hosts (max 65536)", ErrConfig, c.Leaves*c.HostsPerLeaf)
	case !(c.LinkRate >= minLinkRate && c.LinkRate <= maxLinkRate):
		return fmt.Errorf("%w: link rate %g b/s outside [%g, %g]", ErrConfig, c.LinkRate, float64(minLinkRate), float64(maxLinkRate))
	case !(c.UplinkRate() >= minLinkRate && c.UplinkRate() <= maxLinkRate):
		return fmt.Errorf("%w: leaf–spine rate %g b/s outside [%g, %g]", ErrConfig, c.UplinkRate(), float64(minLinkRate), float64(maxLinkRate))
	}
	return nil
}

// Hosts is the number of hosts of the fabric.
func (c Config) Hosts() int { return c.Leaves * c.HostsPerLeaf }

// BaseRTT is the unloaded round trip across spines, ns: a packet of size
// bytes on the wire (header, payload and Overhead) from a host to a host
// under another leaf, host → leaf → spine → leaf → host, and an
// acknowledgement of ack bytes on the wire back along the same four links.
// Every link adds LinkDelay and, store and forward, one whole serialisation
// of the packet at that link's own rate: LinkRate on the two host links,
// UplinkRate on the two leaf–spine links. Each serialisation is rounded
// down to a whole ns at the whole bits per second the port keeps, which is
// what an idle port of the simulator charges (port.txTime with nothing
// carried), so an unloaded fabric delivers the pair in exactly this time.
// Zero fields take their defaults, as in New; for a configuration New
// refuses the result means nothing (but is still computed without a panic).
func (c Config) BaseRTT(size, ack int) int64 {
	_ = c.fill() // defaults for zero fields; c is a copy
	host, up := wholeBps(c.LinkRate), wholeBps(c.UplinkRate())
	oneWay := func(n int) int64 { return 2*serNs(n, host) + 2*serNs(n, up) }
	return 8*c.LinkDelay + oneWay(size) + oneWay(ack)
}

// wholeBps is a link rate in bits per second as a port keeps it: rounded to
// a whole number and held within [minLinkRate, maxLinkRate] (New refuses
// rates outside; the clamp only keeps BaseRTT of such a configuration from
// dividing by zero).
func wholeBps(rate float64) uint64 {
	if !(rate >= minLinkRate) {
		rate = minLinkRate
	}
	return uint64(math.Round(min(rate, maxLinkRate)))
}

// serNs is the serialisation time of n bytes at bps bits per second in
// whole ns, rounded down; n ≤ 0 takes no time, and n below 2^31 keeps
// n × 8e9 within 64 bits (as in port.txTime).
func serNs(n int, bps uint64) int64 {
	if n <= 0 {
		return 0
	}
	return int64(uint64(n) * 8e9 / bps)
}
