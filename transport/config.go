package transport

import (
	"fmt"

	"github.com/metaroce/metaroce/transport/cc"
	"github.com/metaroce/metaroce/transport/wire"
)

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

// Upper bounds of Config's durations. The core adds a timeout to the
// driver's clock, and multiplies the RTT-scale durations by small factors
// (ProbeInterval defaults to 5 × MinRTO, the backed-off timeout doubles),
// so larger values would overflow Time into the past and fire at once.
const (
	// MaxTimeout bounds IdleTimeout, KeepAlive and HandshakeTimeout:
	// 2^60 ns, about 36 years, which is as good as never and still far
	// from overflowing when added to a clock of nanoseconds since 1970.
	MaxTimeout Time = 1 << 60
	// MaxRTTScale bounds the durations of loss recovery, acknowledgement
	// and probing (MinRTO, MaxRTO, TailProbeFloor, InitialRTT, AckDelay,
	// HandshakeRetry, ProbeInterval, ActiveWindow): an hour, far beyond
	// any round trip.
	MaxRTTScale Time = 3600 * Second
	// maxPendingRecvs bounds MaxPendingRecvs: receive group numbers are
	// compared in 32-bit serial arithmetic (docs/spec.md §3.4), which
	// tells ahead from behind only within 2^31 groups.
	maxPendingRecvs = 1 << 30
	// maxEntropies bounds EntropiesPerPlane: Route.Entropy is 16 bits.
	maxEntropies = 1 << 16
	// maxDatagram bounds MaxDatagram: a HELLO carries it in 16 bits
	// (docs/spec.md §2.8).
	maxDatagram = 0xffff
)

// ConfigError says which field of a Config is out of range, its value and
// what it takes. It wraps ErrInvalid.
type ConfigError struct {
	Field string // the field as Config spells it: "Planes", "CC"
	Value any    // the value given
	Want  string // what the field takes
	// Err, for Field "CC", is the congestion controller's own error
	// (cc.Config.Validate), which names the field of cc.Config; Value
	// and Want are then unset.
	Err error
}

func (e *ConfigError) Error() string {
	if e.Err != nil {
		return fmt.Sprintf("metaroce: Config.%s: %v", e.Field, e.Err)
	}
	return fmt.Sprintf("metaroce: Config.%s is %v: want %s", e.Field, e.Value, e.Want)
}

// Unwrap returns ErrInvalid and, for CC, the controller's error.
func (e *ConfigError) Unwrap() []error {
	if e.Err != nil {
		return []error{ErrInvalid, e.Err}
	}
	return []error{ErrInvalid}
}

// Validate reports the first field of c, in the order Config declares
// them, that is out of range, as a *ConfigError naming the field, its
// value and what it takes; nil when NewEndpoint can run c. Zero fields
// stand for their defaults and pass. A negative count or duration is
// refused rather than read as the default: whoever wrote it meant
// something (none, unlimited) the default is not. The bounds are those
// of the wire (Planes, PathsPerPlane and MaxDatagram travel in a HELLO,
// and a peer refuses the handshake beyond them, docs/spec.md §2.8, so
// that every dial would only time out), of the core's arithmetic (see
// MaxTimeout), and the relations between fields once defaults are filled
// in: entropies enough for the paths, MinRTO ≤ MaxRTO, KeepAlive below
// IdleTimeout, and the controller's windows (cc.Config.Validate).
func (c Config) Validate() error {
	bad := func(field string, v any, want string, args ...any) error {
		return &ConfigError{Field: field, Value: v, Want: fmt.Sprintf(want, args...)}
	}
	d := c.withDefaults()
	if c.Planes < 0 || c.Planes > wire.MaxPlanes {
		return bad("Planes", c.Planes, "1 to %d planes (a HELLO's limit), or 0 for the default 1", wire.MaxPlanes)
	}
	if c.PathsPerPlane < 0 || c.PathsPerPlane > wire.MaxPathsPerPlane {
		return bad("PathsPerPlane", c.PathsPerPlane, "1 to %d paths (a HELLO's limit), or 0 for the default 4", wire.MaxPathsPerPlane)
	}
	if c.EntropiesPerPlane < 0 || c.EntropiesPerPlane > maxEntropies || c.EntropiesPerPlane > 0 && c.EntropiesPerPlane < d.PathsPerPlane {
		return bad("EntropiesPerPlane", c.EntropiesPerPlane,
			"PathsPerPlane (%d) to %d source ports, so that each path of a plane has its own, or 0 for the default 64", d.PathsPerPlane, maxEntropies)
	}
	if c.MaxDatagram < 0 || c.MaxDatagram > maxDatagram || c.MaxDatagram > 0 && c.MaxDatagram < wire.MinDatagram {
		return bad("MaxDatagram", c.MaxDatagram, "%d to %d bytes (a peer refuses a HELLO announcing less, and it carries 16 bits), or 0 for the default %d",
			wire.MinDatagram, maxDatagram, 4096+dataHdr)
	}
	for _, f := range []struct {
		name string
		v    Time
		max  Time
		def  string
	}{
		{"MinRTO", c.MinRTO, MaxRTTScale, "1ms"},
		{"MaxRTO", c.MaxRTO, MaxRTTScale, "200ms"},
		{"TailProbeFloor", c.TailProbeFloor, MaxRTTScale, "MinRTO/4"},
		{"InitialRTT", c.InitialRTT, MaxRTTScale, "100µs"},
		{"AckDelay", c.AckDelay, MaxRTTScale, "20µs"},
		{"IdleTimeout", c.IdleTimeout, MaxTimeout, "5s"},
		{"KeepAlive", c.KeepAlive, MaxTimeout, "IdleTimeout/3"},
		{"HandshakeTimeout", c.HandshakeTimeout, MaxTimeout, "5s"},
		{"HandshakeRetry", c.HandshakeRetry, MaxRTTScale, "50ms"},
		{"ProbeInterval", c.ProbeInterval, MaxRTTScale, "5 × MinRTO"},
		{"ActiveWindow", c.ActiveWindow, MaxRTTScale, "1ms"},
	} {
		if f.v < 0 || f.v > f.max {
			limit := "an hour (MaxRTTScale)"
			if f.max == MaxTimeout {
				limit = "2^60 ns, about 36 years (MaxTimeout)"
			}
			return bad(f.name, f.v, "a positive duration of at most %s, or 0 for the default %s", limit, f.def)
		}
	}
	if d.MinRTO > d.MaxRTO {
		return bad("MinRTO", d.MinRTO, "at most MaxRTO (%v), the ceiling of the backed-off timeout", d.MaxRTO)
	}
	if d.KeepAlive >= d.IdleTimeout {
		return bad("KeepAlive", d.KeepAlive, "less than IdleTimeout (%v): an idle connection probes its peer to be heard from it before IdleTimeout declares it dead", d.IdleTimeout)
	}
	for _, f := range []struct {
		name string
		v    int
		def  string
	}{
		{"AckEvery", c.AckEvery, "4"},
		{"BadPathTimeouts", c.BadPathTimeouts, "2"},
		{"MaxConns", c.MaxConns, "4096"},
		{"MaxFlowsPerConn", c.MaxFlowsPerConn, "1024"},
		{"MaxPendingRecvs", c.MaxPendingRecvs, "4096"},
		{"MaxPendingSends", c.MaxPendingSends, "4096"},
	} {
		if f.v < 0 {
			return bad(f.name, f.v, "a positive count, or 0 for the default %s", f.def)
		}
	}
	if c.MaxPendingRecvs > maxPendingRecvs {
		return bad("MaxPendingRecvs", c.MaxPendingRecvs, "at most %d receive groups (group numbers are compared in 32-bit serial arithmetic), or 0 for the default 4096", maxPendingRecvs)
	}
	if c.ConcurrentSenders < 0 {
		return bad("ConcurrentSenders", c.ConcurrentSenders, "a positive count, or 0 when any established connection may send")
	}
	if len(c.Addr) > wire.MaxAddrBlob {
		return bad("Addr", fmt.Sprintf("%d bytes", len(c.Addr)), "at most %d bytes (a HELLO's limit)", wire.MaxAddrBlob)
	}
	// The controller's config as NewEndpoint hands it over: MSS and
	// InitRTT follow MaxDatagram and InitialRTT when zero. Taken from c,
	// not d, whose filling-in would hide a negative MSS or InitRTT.
	ccfg := c.CC
	if ccfg.MSS == 0 {
		ccfg.MSS = d.MaxDatagram
	}
	if ccfg.InitRTT == 0 {
		ccfg.InitRTT = int64(d.InitialRTT)
	}
	if err := ccfg.Validate(); err != nil {
		return &ConfigError{Field: "CC", Err: err}
	}
	return nil
}
