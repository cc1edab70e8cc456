package transport

import "github.com/metaroce/metaroce/transport/cc"

// Config parameterises an endpoint. Zero fields take the defaults listed on
// each field (see Config.withDefaults); the defaults suit a real data-centre
// fabric, and drivers override what they know better (MaxDatagram from the
// interface MTU, InboundRate from the link speed).
type Config struct {
	// Listen makes the endpoint accept HELLOs from peers.
	Listen bool
	// Planes is the number of local planes (NIC ports), 1..16. Default 1.
	Planes int
	// PathsPerPlane is how many paths a connection opens on each plane,
	// 1..64. Default 4.
	PathsPerPlane int
	// EntropiesPerPlane is the size of each plane's source-port pool that
	// paths draw their entropy from; it must be ≥ PathsPerPlane so a bad
	// path can move to a fresh port. Default 64.
	EntropiesPerPlane int
	// MaxDatagram is the largest UDP payload this endpoint sends or accepts,
	// bytes, ≥ 576. Default 4096+DataHeaderLen (a 4 KiB payload).
	MaxDatagram int
	// MinRTO is the floor of the per-path tail-loss timeout. Default 1 ms.
	MinRTO Time
	// MaxRTO caps the backed-off tail-loss timeout. Default 200 ms.
	MaxRTO Time
	// TailProbeFloor is the least time a path with a packet outstanding
	// stays silent before it sends a tail probe (docs/spec.md §3.2).
	// Default MinRTO/4: a software stack's millisecond timer noise
	// then seldom draws a needless probe, while a driver that knows its
	// fabric lowers it to about the base RTT.
	TailProbeFloor Time
	// InitialRTT is assumed before a path has an RTT sample. Default 100 µs.
	InitialRTT Time
	// AckEvery is how many sequenced packets a path receives before it is
	// acknowledged without waiting for AckDelay. Default 4.
	AckEvery int
	// AckDelay bounds how long an acknowledgement may be held back. Default 20 µs.
	AckDelay Time
	// IdleTimeout: a connection that hears nothing from its peer for this
	// long fails with ErrPeerDead, whether or not it has work outstanding
	// (KeepAlive keeps a live peer heard while idle). Default 5 s.
	IdleTimeout Time
	// KeepAlive: an idle connection probes its peer this often so that a
	// dead peer is noticed even without traffic. Default IdleTimeout/3.
	KeepAlive Time
	// HandshakeTimeout bounds Dial. Default 5 s.
	HandshakeTimeout Time
	// HandshakeRetry caps the HELLO retransmission interval, which starts
	// at 4 × InitialRTT and doubles per retry. Default 50 ms.
	HandshakeRetry Time
	// BadPathTimeouts is how many consecutive timeouts make a path bad.
	// Default 2.
	BadPathTimeouts int
	// ProbeInterval is how often a bad path is probed on a new source port.
	// Default 5 × MinRTO.
	ProbeInterval Time
	// InboundRate is the receiver's inbound capacity in bytes per second,
	// shared out as fair-share rate hints among active senders
	// (docs/spec.md §3.5). 0 disables hints.
	InboundRate uint64
	// ActiveWindow bounds how long a quiet sender still counts as active
	// for rate hints: the activity window is four packet gaps at the
	// current share, at least InitialRTT and at most ActiveWindow
	// (docs/spec.md §3.5). Default 1 ms.
	ActiveWindow Time
	// ConcurrentSenders is the most connections the application lets send
	// to this endpoint at once, when it knows (a collective's schedule
	// does); 0, the default, means any established connection may start
	// at any time. It bounds the count a starting sender's rate hint
	// divides the inbound capacity by (docs/spec.md §3.5).
	ConcurrentSenders int
	// MaxConns bounds connections (established plus handshaking). Default 4096.
	MaxConns int
	// MaxFlowsPerConn bounds flows per connection. Default 1024.
	MaxFlowsPerConn int
	// MaxPendingRecvs bounds posted receive groups per flow. Default 4096.
	MaxPendingRecvs int
	// MaxPendingSends bounds queued sends per flow. Default 4096.
	MaxPendingSends int
	// Addr is the address blob announced in handshakes (the driver's
	// per-plane addresses; opaque to the core), ≤ 512 bytes.
	Addr []byte
	// CC configures the congestion controller; MSS is derived from
	// MaxDatagram when zero.
	CC cc.Config
}

// withDefaults returns c with zero fields filled in.
func (c Config) withDefaults() Config {
	def := func(v *Time, d Time) {
		if *v <= 0 {
			*v = d
		}
	}
	defi := func(v *int, d int) {
		if *v <= 0 {
			*v = d
		}
	}
	defi(&c.Planes, 1)
	defi(&c.PathsPerPlane, 4)
	defi(&c.EntropiesPerPlane, 64)
	if c.EntropiesPerPlane < c.PathsPerPlane {
		c.EntropiesPerPlane = c.PathsPerPlane
	}
	defi(&c.MaxDatagram, 4096+dataHdr)
	def(&c.MinRTO, Millisecond)
	def(&c.MaxRTO, 200*Millisecond)
	def(&c.TailProbeFloor, c.MinRTO/4)
	def(&c.InitialRTT, 100*Microsecond)
	defi(&c.AckEvery, 4)
	def(&c.AckDelay, 20*Microsecond)
	def(&c.IdleTimeout, 5*Second)
	def(&c.KeepAlive, c.IdleTimeout/3)
	def(&c.HandshakeTimeout, 5*Second)
	def(&c.HandshakeRetry, 50*Millisecond)
	defi(&c.BadPathTimeouts, 2)
	def(&c.ProbeInterval, 5*c.MinRTO)
	def(&c.ActiveWindow, Millisecond)
	defi(&c.MaxConns, 4096)
	defi(&c.MaxFlowsPerConn, 1024)
	defi(&c.MaxPendingRecvs, 4096)
	defi(&c.MaxPendingSends, 4096)
	if c.CC.MSS <= 0 {
		c.CC.MSS = c.MaxDatagram
	}
	if c.CC.InitRTT <= 0 {
		c.CC.InitRTT = int64(c.InitialRTT)
	}
	return c
}
