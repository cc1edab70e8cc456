package collectives

import (
	"fmt"
	"net/netip"
	"time"

	"github.com/metaroce/metaroce/collectives/sched"
	"github.com/metaroce/metaroce/transport"
	"github.com/metaroce/metaroce/transport/udp"
)

// Transport names.
const (
	TransportMetaRoCE = "metaroce"
	TransportTCP      = "tcp"
)

// Config parameterises a communicator. Zero fields take defaults.
type Config struct {
	// Transport is TransportMetaRoCE (default) or TransportTCP.
	Transport string
	// Channels is the number of collective channels, each an ordered flow
	// on every peer connection, 1 to 64 (0: DefaultMetaRoCEChannels over
	// MetaRoCE, DefaultTCPChannels over TCP).
	Channels int
	// ChunkBytes bounds one pipelined message, bytes (0:
	// DefaultMetaRoCEChunkBytes over MetaRoCE, sched.DefaultChunkBytes over
	// TCP).
	ChunkBytes int64
	// AllToAllInFlight is how many messages per direction each rank of an
	// all-to-all keeps in flight across rounds (0, the default: per call,
	// sched.AutoAllToAllInFlight: at least 4, more while the messages are
	// small; 1 keeps the rounds in lockstep; see
	// sched.Config.AllToAllInFlight).
	AllToAllInFlight int
	// GroupSize is the number of consecutive ranks that share a leaf switch
	// (or a host), when the job is laid out that way; it must divide the
	// rank count. 0, the default, means unknown. Given one, the all-reduce
	// may take the hierarchical ring (sched.AlgoHierarchical), which
	// spreads the traffic between groups over every rank of a group, each
	// sending about 1/GroupSize of what the flat ring's one rank at each
	// group boundary sends, in far fewer steps (sched.ChooseAlgorithm).
	GroupSize int
	// Timeout bounds connection setup (the rendezvous and the handshake
	// with every peer, together) and each collective (0: the default,
	// 60 s; a negative one is refused).
	//
	// Over MetaRoCE it is the handshake timeout too, unless
	// UDP.Core.HandshakeTimeout is set: one handshake may take as long as
	// the whole setup. With a hundred in-process ranks or more on a host
	// of two CPUs the event loops answer slowly, and the core's fixed
	// default (5 s) failed setups that the deadline allowed; raising
	// Timeout now raises both. The setup deadline starts before the
	// rendezvous and so still ends first. A rank whose process exits, or
	// whose setup fails, between the rendezvous and the end of the
	// handshakes fails every other rank's New at once, naming it (rank 0
	// keeps the rendezvous connections open until every rank reported
	// and it confirmed, watch.go); one whose host vanishes, about 10 s
	// later (TCP keepalive on those connections). A rank that dies during a collective is
	// reported after UDP.Core.IdleTimeout (default 5 s), which Timeout
	// does not change.
	Timeout time.Duration
	// TimeoutSetting names, in the errors of a setup that its deadline
	// ended, the setting Timeout came from: "the setup deadline of 1m0s
	// (-T)" for a program that sets Timeout from its flag -T. Empty means
	// "Config.Timeout". It is this rank's name for its own deadline,
	// which rank 0 also puts in the abort it sends the other ranks, so
	// every rank of a job should give the same one.
	TimeoutSetting string
	// UDP configures the MetaRoCE datapath. Empty Addrs are filled in by
	// New: the address this host reaches the rendezvous host from, for a
	// rank of a job that may span hosts, else 127.0.0.1; the TCP baseline
	// listens on Addrs[0] too. Its Core.PathsPerPlane, when
	// 0, is LoopbackPathsPerPlane for a rank on loopback addresses only
	// whose driver blackholes no port (see there).
	UDP udp.Config
	// Logf, when set, receives progress and diagnostics.
	Logf func(format string, args ...any)
}

// DefaultMetaRoCEChunkBytes is the pipelining unit over MetaRoCE when
// Config.ChunkBytes is 0: 512 KiB. Every message costs the datapath a
// RECV_READY exchange and a completion wake-up whatever its size, so on a
// small host fewer, larger messages win; measured with BenchmarkBusBW, 512
// KiB needs up to 30% less CPU per byte than 128 KiB for the 4-rank
// all-to-all and no more elsewhere, while 1 MiB gains nothing further.
const DefaultMetaRoCEChunkBytes = 512 << 10

// DefaultMetaRoCEChannels is the number of channels over MetaRoCE when
// Config.Channels is 0: 1. The channels of a peer are flows of one
// connection, so they share its paths and its congestion window and add no
// bandwidth; a second channel only doubles the messages, each with its own
// RECV_READY exchange, acknowledgements and completion wake-up. Chunks of a
// large ring step or pipeline still overlap on the one flow. Measured with
// 4 in-process ranks on a 2-vCPU host, one channel needs about 15% less CPU
// per byte than two for a 1 MiB all-reduce and no more elsewhere.
const DefaultMetaRoCEChannels = 1

// DefaultTCPChannels is the number of channels of the kernel-TCP baseline
// when Config.Channels is 0: 2, each its own socket per peer, so a message
// on one does not wait behind the other's in the kernel's byte stream.
const DefaultTCPChannels = 2

// maxHandshakeTimeout caps the handshake timeout that Config.Timeout
// sets: about 36 years, far beyond any setup and far from overflowing the
// core's nanosecond clock when added to it.
const maxHandshakeTimeout = time.Duration(1 << 60)

// timeoutSetting is TimeoutSetting, or the field's own name where it is
// empty.
func (c Config) timeoutSetting() string {
	if c.TimeoutSetting != "" {
		return c.TimeoutSetting
	}
	return timeoutField
}

func (c Config) withDefaults() (Config, error) {
	if c.Transport == "" {
		c.Transport = TransportMetaRoCE
	}
	if c.Transport != TransportMetaRoCE && c.Transport != TransportTCP {
		return c, fmt.Errorf("collectives: unknown transport %q (want %q or %q)", c.Transport, TransportMetaRoCE, TransportTCP)
	}
	// Negative sizes and durations are refused rather than read as the
	// default: a caller who wrote -1 meant something (none, unlimited)
	// that the default is not.
	switch {
	case c.Channels < 0:
		return c, fmt.Errorf("collectives: %d channels (Config.Channels), want 1 to 64, or 0 for the default", c.Channels)
	case c.ChunkBytes < 0:
		return c, fmt.Errorf("collectives: chunk of %d bytes (Config.ChunkBytes), want a positive size, or 0 for the default", c.ChunkBytes)
	case c.Timeout < 0:
		return c, fmt.Errorf("collectives: timeout %v (Config.Timeout), want a positive duration, or 0 for the default 60s; there is no setting without one (a long one, 24h, is one)", c.Timeout)
	}
	if c.Channels == 0 {
		c.Channels = DefaultTCPChannels
		if c.Transport == TransportMetaRoCE {
			c.Channels = DefaultMetaRoCEChannels
		}
	}
	for i, a := range c.UDP.Addrs {
		// Each rank announces its addresses to its peers, and an
		// unspecified one (0.0.0.0, ::) names no host: a peer on another
		// host would send to itself. The TCP baseline announces
		// UDP.Addrs[0] too. Refused here, before any socket, with the
		// same words for both transports.
		if a.Unmap().IsUnspecified() {
			return c, fmt.Errorf("collectives: plane %d address %v (Config.UDP.Addrs) is unspecified: each rank announces its addresses to its peers, and %v reaches none of them; give this host's address on the network the ranks share", i, a, a)
		}
	}
	if c.Channels > 64 {
		return c, fmt.Errorf("collectives: %d channels (Config.Channels), want 1 to 64, or 0 for the default", c.Channels)
	}
	if c.ChunkBytes == 0 {
		c.ChunkBytes = sched.DefaultChunkBytes
		if c.Transport == TransportMetaRoCE {
			c.ChunkBytes = DefaultMetaRoCEChunkBytes
		}
	}
	if c.AllToAllInFlight < 0 {
		return c, fmt.Errorf("collectives: %d all-to-all messages in flight, want 0 (default) or more", c.AllToAllInFlight)
	}
	if c.GroupSize < 0 {
		return c, fmt.Errorf("collectives: group size %d, want 0 (unknown) or more", c.GroupSize)
	}
	if c.Transport == TransportMetaRoCE && c.UDP.Core.ConcurrentSenders == 0 && c.AllToAllInFlight > 0 {
		// No schedule lets more peers send to a rank at once than the
		// all-to-all keeps in flight (the rings, trees and pairwise
		// rounds take one peer each): the endpoint's starting rate hints
		// divide its inbound capacity by that, not by every peer
		// (docs/spec.md §3.5). A call that asks for more in flight only
		// overshoots for its first RTT. With the automatic window the
		// bound is left open; either way, before each plan the executor
		// declares the peers that can send to this rank at once
		// (sched.Plan.RecvPeers).
		c.UDP.Core.ConcurrentSenders = c.AllToAllInFlight
	}
	if c.Timeout == 0 {
		c.Timeout = 60 * time.Second
	}
	if c.Transport == TransportMetaRoCE && c.UDP.Core.HandshakeTimeout <= 0 {
		// See Timeout: the setup deadline, not the core's default,
		// bounds each handshake. Both count nanoseconds; the core adds
		// the timeout to its clock, so a Timeout of centuries is cut to
		// maxHandshakeTimeout rather than overflow into the past.
		c.UDP.Core.HandshakeTimeout = transport.Time(min(c.Timeout, maxHandshakeTimeout))
	}
	if c.Transport == TransportMetaRoCE && c.UDP.Core.PathsPerPlane == 0 && len(c.UDP.Blackhole) == 0 && onlyLoopback(c.UDP.Addrs) {
		c.UDP.Core.PathsPerPlane = LoopbackPathsPerPlane
	}
	if c.Logf == nil {
		c.Logf = func(string, ...any) {}
	}
	return c, nil
}

// LoopbackPathsPerPlane is the number of paths per plane of a MetaRoCE rank
// whose every plane address is a loopback address, when Config.UDP.Core.
// PathsPerPlane is 0 and the driver blackholes no port: 1, where the
// datapath's default is 4 (udp.Config). Every rank such an endpoint can
// reach is on the same host, and the loopback device is one queue: spraying
// a connection over four source ports spreads nothing, and costs a send
// call and an acknowledgement record per path used. Measured with
// alternated runs of `build/mrbench --transport metaroce -np 4 --op alltoall
// -b 1M -e 1M` on a 2-vCPU host: 6-11% less time and CPU per call with
// one path (docs/results.md). A driver that blackholes ports (Config.UDP.
// Blackhole, a test option) stands in for a fabric's failing paths, which
// only a connection with several paths survives, so it keeps the default.
const LoopbackPathsPerPlane = 1

// onlyLoopback reports whether every plane address is a loopback address;
// no address means udp.Config's default, 127.0.0.1.
func onlyLoopback(addrs []netip.Addr) bool {
	for _, a := range addrs {
		if !a.Unmap().IsLoopback() {
			return false
		}
	}
	return true
}
