package udp

import (
	"errors"
	"fmt"
	"net"
	"net/netip"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/metaroce/metaroce/transport"
	"github.com/metaroce/metaroce/transport/auth"
	"github.com/metaroce/metaroce/transport/wire"
)

// Config parameterises an Endpoint. The zero value listens on 127.0.0.1 with
// an ephemeral port.
type Config struct {
	// Addrs holds one local address per plane (1..16). Default [127.0.0.1].
	// Addresses must be specific (not 0.0.0.0 or ::): they are announced to
	// peers in the handshake.
	Addrs []netip.Addr
	// Port is the listening UDP port on every plane; 0 picks an ephemeral
	// port, the same number on each plane where it is free. With a fixed
	// Port, the pool of a plane uses Port, Port+1, …, Port+PortsPerPlane-1.
	Port int
	// PortsPerPlane is the size of each plane's source-port pool, that is the
	// number of path entropies shared by all connections (1..1024). Default 16.
	PortsPerPlane int
	// MaxDatagram is the largest UDP payload sent or accepted, bytes. Default:
	// 65000 when every plane address is a loopback address (the loopback MTU
	// is 64 KiB, so large datagrams cost one traversal each); otherwise the
	// smallest interface MTU of the planes minus the IP and UDP headers (28
	// bytes for IPv4, 48 for IPv6), so jumbo frames are used where configured,
	// and 1472 when no MTU can be found. Datagrams of one destination are
	// batched into UDP GSO sends where the kernel offers it. At least 576
	// (wire.MinDatagram), and 24 more with a Secret, whose authentication
	// trailer rides inside the datagram.
	MaxDatagram int
	// Core holds the protocol knobs. Planes, EntropiesPerPlane, MaxDatagram,
	// Addr and Listen are filled in by the driver. Zero fields take the
	// driver's defaults where they differ from the core's: MinRTO 2 ms (a
	// busy 2-core host deschedules an event loop for about a millisecond,
	// and a tail-loss timeout shorter than that declares live paths bad),
	// 10 ms when every plane is a loopback address (nothing is lost there
	// but to a full socket buffer, which the window prevents, while a
	// loaded host stalls a receiving loop for milliseconds: every timeout
	// on loopback is spurious and costs a window of retransmissions),
	// InboundRate from the interface speed where the kernel reports one
	// (sum over planes; 0 on loopback), PathsPerPlane at most PortsPerPlane,
	// and CC.ConnWindow half the receive buffer the kernel reports for the
	// listening socket, that is the whole buffer requested (the kernel
	// doubles a request for its per-datagram bookkeeping and limits that
	// figure), so one sender cannot overrun the receiver's socket, which
	// would turn into losses the ECN controller does not react to. With
	// the 4 MiB default buffers that is 4 MiB: on loopback a 2 MiB window
	// left the pipeline idle across a receiver's wake-up. A paced sender
	// whose turn came late may make up to CC.CatchUpTime (100 µs) of it,
	// at most CC.CatchUpBytes (256 KiB), since the pacer runs only when a
	// turn does (DefaultCatchUpTime; a negative CatchUpTime turns it off).
	// A field that transport.Config.Validate refuses once these are filled
	// in (a negative count or duration among them, which is not read as
	// the default) fails Listen with its *transport.ConfigError, which
	// names the field, its value and what it takes.
	Core transport.Config
	// Seed seeds every random choice (connection ids, tokens, entropies,
	// fault injection). 0 draws a seed from crypto/rand, which production
	// must use: tokens are the only proof that a packet comes from the peer.
	Seed uint64
	// DropProb is a test option: the probability (0..1) that a datagram is
	// silently dropped instead of sent.
	DropProb float64
	// Blackhole is a test option: source-port indexes (entropies, on every
	// plane) whose outgoing datagrams are silently dropped.
	Blackhole []int
	// Spin is how long the event loop keeps polling without blocking after
	// it last did work (default 50 µs; negative disables spinning). Spinning
	// saves the wake-up of a sleeping loop thread (100 µs and more on a
	// loaded host) when the next datagram or command comes soon, which
	// keeps a bulk transfer's pipeline full. While a goroutine drives the
	// datapath from Request.Wait, and for WaitSpin after a Request.Poll,
	// the loop parks instead of spinning.
	Spin time.Duration
	// WaitSpin is how long Request.Wait keeps driving the datapath from the
	// calling goroutine (reading ready sockets, running timers, sending)
	// without progress before it blocks (default 200 µs; negative disables
	// it). A waiter that finds its answer this way needs no thread
	// wake-up; one that does not costs this much CPU per wait. The default
	// outlasts the wait between two steps of a collective at 1 MiB (a
	// 256 KiB message of a 4-rank ring), where blocking cost more CPU than
	// polling: the thread's sleep and wake-up, and the event loop's turn in
	// between (docs/results.md, side by side with what users pick instead).
	// It is also how long the loop leaves the datapath to a caller of
	// Request.Poll after its last poll.
	WaitSpin time.Duration
	// YieldCPU makes a spinning loop or waiter give the processor to other
	// processes (sched_yield) after each empty poll, besides other
	// goroutines. It is for a process that a launcher pinned to CPUs it
	// shares with other ranks' processes: yielding the goroutine alone
	// hands the CPU to nobody, so a spinning rank held it for its whole
	// time slice while the rank with work waited. Measured with `mpirun
	// --oversubscribe --bind-to core:overload-allowed -np 4 mrbench
	// --transport metaroce --op alltoall -b 1M -e 1M` on 2 CPUs: 0.38-0.54
	// GB/s spinning without it, 0.58-1.06 with spinning off, 1.29-1.45
	// spinning with it. In-process ranks must not set it: a thread that
	// yields the CPU keeps its P, and the other ranks' goroutines waiting
	// for that P wait with it (0.33-0.40 against 1.33-1.36 GB/s).
	YieldCPU bool
	// Secret turns on per-packet authentication (docs/security.md,
	// package transport/auth): every datagram carries an AES-GCM (or, for
	// the handshake, HMAC) tag keyed from this secret, at least 16 bytes,
	// and must be the same on every endpoint of the job. Nil reads
	// METAROCE_SECRET; when that is unset too, packets are not
	// authenticated.
	Secret []byte
	// Logf receives diagnostic messages; nil discards them.
	Logf func(format string, args ...any)
}

// Defaults of Config.
const (
	DefaultPortsPerPlane = 16
	DefaultSpin          = 50 * time.Microsecond
	DefaultWaitSpin      = 200 * time.Microsecond
	DefaultMinRTO        = 2 * transport.Millisecond
	LoopbackMinRTO       = 10 * transport.Millisecond
	// DefaultCatchUpTime and DefaultCatchUpBytes let a paced sender make
	// up a late turn (cc.Config.CatchUpTime, CatchUpBytes): up to 100 µs
	// of lateness at the pacing rate, at most 256 KiB, may leave back to
	// back, since the pacer only runs when the event loop or a caller
	// turns, tens of µs apart on a busy host. Held to the core's bursts
	// (one packet under a hint) a 1.25 GB/s hint over a 1500-byte MTU
	// moved 0.2 GB/s. A negative CatchUpTime turns it off.
	DefaultCatchUpTime    = 100 * transport.Microsecond
	DefaultCatchUpBytes   = 256 << 10
	loopbackDatagram      = 65000
	fallbackDatagram      = 1500 - 28
	maxPortsPerPlane      = 1024
	acceptQueueLen        = 256
	maxDatagramUpperBound = 65000
)

// resolved is a Config with every default applied, plus facts found while
// applying them.
type resolved struct {
	Config
	v6 []bool
}

// resolve validates cfg and fills in defaults that do not need sockets.
func (cfg Config) resolve() (resolved, error) {
	if len(cfg.Addrs) == 0 {
		cfg.Addrs = []netip.Addr{netip.AddrFrom4([4]byte{127, 0, 0, 1})}
	}
	if cfg.Secret == nil {
		s, err := auth.SecretFromEnv()
		switch {
		case err == nil:
			cfg.Secret = s
		case !errors.Is(err, auth.ErrNoSecret):
			return resolved{}, fmt.Errorf("udp: %w", err)
		}
	}
	if len(cfg.Addrs) > wire.MaxPlanes {
		return resolved{}, fmt.Errorf("udp: %d planes, at most %d", len(cfg.Addrs), wire.MaxPlanes)
	}
	r := resolved{Config: cfg}
	r.Addrs = make([]netip.Addr, len(cfg.Addrs))
	for i, a := range cfg.Addrs {
		a = a.Unmap()
		if !a.IsValid() || a.IsUnspecified() || a.IsMulticast() {
			return resolved{}, fmt.Errorf("udp: plane %d address %v: need a specific unicast address (it is announced to peers)", i, cfg.Addrs[i])
		}
		if a.Zone() != "" {
			return resolved{}, fmt.Errorf("udp: plane %d address %v: zoned (link-local) addresses are not supported", i, a)
		}
		r.Addrs[i] = a
		r.v6 = append(r.v6, a.Is6())
	}
	if cfg.Port < 0 || cfg.Port > 0xffff {
		return resolved{}, fmt.Errorf("udp: port %d out of range 0..65535", cfg.Port)
	}
	if r.PortsPerPlane == 0 {
		r.PortsPerPlane = DefaultPortsPerPlane
	}
	if r.PortsPerPlane < 1 || r.PortsPerPlane > maxPortsPerPlane {
		return resolved{}, fmt.Errorf("udp: %d ports per plane, want 1..%d", r.PortsPerPlane, maxPortsPerPlane)
	}
	if cfg.Port != 0 && cfg.Port+r.PortsPerPlane-1 > 0xffff {
		return resolved{}, fmt.Errorf("udp: ports %d..%d exceed 65535", cfg.Port, cfg.Port+r.PortsPerPlane-1)
	}
	if !(r.DropProb >= 0 && r.DropProb <= 1) { // NaN too
		return resolved{}, fmt.Errorf("udp: drop probability %v out of range 0..1", r.DropProb)
	}
	for _, b := range r.Blackhole {
		if b < 0 || b >= r.PortsPerPlane {
			return resolved{}, fmt.Errorf("udp: blackholed entropy %d out of range 0..%d", b, r.PortsPerPlane-1)
		}
	}
	if r.MaxDatagram == 0 {
		r.MaxDatagram = defaultDatagram(r.Addrs)
	}
	if r.MaxDatagram < wire.MinDatagram || r.MaxDatagram > maxDatagramUpperBound {
		return resolved{}, fmt.Errorf("udp: max datagram %d out of range %d..%d", r.MaxDatagram, wire.MinDatagram, maxDatagramUpperBound)
	}
	if r.Secret != nil && r.MaxDatagram < wire.MinDatagram+auth.Overhead {
		// The protocol's datagrams must still hold MinDatagram bytes
		// once the authentication trailer is taken off.
		return resolved{}, fmt.Errorf("udp: max datagram %d too small with a secret: authentication adds %d bytes, so at least %d",
			r.MaxDatagram, auth.Overhead, wire.MinDatagram+auth.Overhead)
	}
	if r.Spin == 0 {
		r.Spin = DefaultSpin
	}
	if r.WaitSpin == 0 {
		r.WaitSpin = DefaultWaitSpin
	}
	c := &r.Core
	c.Listen = true
	c.Addr = nil // Listen fills it in once the sockets are bound
	c.Planes = len(r.Addrs)
	c.EntropiesPerPlane = r.PortsPerPlane
	c.MaxDatagram = r.MaxDatagram
	if r.Secret != nil {
		// The authentication trailer rides inside the datagram.
		c.MaxDatagram -= auth.Overhead
	}
	if c.PathsPerPlane == 0 {
		c.PathsPerPlane = min(4, r.PortsPerPlane)
	}
	if c.PathsPerPlane > r.PortsPerPlane || c.PathsPerPlane > wire.MaxPathsPerPlane {
		return resolved{}, fmt.Errorf("udp: %d paths per plane need at least as many ports per plane (have %d) and at most %d",
			c.PathsPerPlane, r.PortsPerPlane, wire.MaxPathsPerPlane)
	}
	if c.MinRTO == 0 {
		c.MinRTO = DefaultMinRTO
		if allLoopback(r.Addrs) {
			c.MinRTO = LoopbackMinRTO
		}
	}
	if c.InboundRate == 0 {
		c.InboundRate = inboundRate(r.Addrs)
	}
	if c.CC.CatchUpTime == 0 {
		c.CC.CatchUpTime = int64(DefaultCatchUpTime)
	}
	if c.CC.CatchUpBytes == 0 {
		c.CC.CatchUpBytes = DefaultCatchUpBytes
	}
	// The core's own checks, on the configuration as the driver hands it
	// over, so that a Core field out of range fails Listen, naming the
	// field, before any socket is opened, rather than every Dial later.
	// The fields the driver fills in pass them (MaxDatagram's bounds above
	// lie within the core's, Planes and PathsPerPlane are checked against
	// the same wire limits), and so do the two Listen adds: the address
	// blob (at most wire.MaxAddrBlob) and a positive CC.ConnWindow.
	if err := c.Validate(); err != nil {
		return resolved{}, fmt.Errorf("udp: Config.Core: %w", err)
	}
	return r, nil
}

// defaultDatagram picks MaxDatagram from the planes' interfaces (see
// Config.MaxDatagram).
func defaultDatagram(addrs []netip.Addr) int {
	if allLoopback(addrs) {
		return loopbackDatagram
	}
	best := 0
	for _, a := range addrs {
		ifc := InterfaceOf(a)
		if ifc == nil || ifc.MTU <= 0 {
			return fallbackDatagram
		}
		hdr := 28
		if a.Is6() {
			hdr = 48
		}
		d := min(ifc.MTU-hdr, maxDatagramUpperBound)
		if best == 0 || d < best {
			best = d
		}
	}
	if best < wire.MinDatagram {
		return fallbackDatagram
	}
	return best
}

// allLoopback reports whether every plane address is a loopback address.
func allLoopback(addrs []netip.Addr) bool {
	for _, a := range addrs {
		if !a.IsLoopback() {
			return false
		}
	}
	return true
}

// InterfaceOf returns the interface that holds address a, or nil. It looks in
// the calling thread's network namespace (interfaces are per namespace).
func InterfaceOf(a netip.Addr) *net.Interface {
	ifs, err := net.Interfaces()
	if err != nil {
		return nil
	}
	for i := range ifs {
		as, err := ifs[i].Addrs()
		if err != nil {
			continue
		}
		for _, x := range as {
			if pfx, err := netip.ParsePrefix(x.String()); err == nil && pfx.Addr().Unmap() == a {
				return &ifs[i]
			}
		}
	}
	return nil
}

// inboundRate sums the link speeds the kernel reports for the planes'
// interfaces, in bytes per second; 0 when any is unknown (loopback, virtual
// devices without a speed).
func inboundRate(addrs []netip.Addr) uint64 {
	var sum uint64
	for _, a := range addrs {
		if a.IsLoopback() {
			return 0
		}
		ifc := InterfaceOf(a)
		if ifc == nil {
			return 0
		}
		b, err := os.ReadFile("/sys/class/net/" + ifc.Name + "/speed")
		if err != nil {
			return 0
		}
		mbps, err := strconv.ParseInt(strings.TrimSpace(string(b)), 10, 64)
		if err != nil || mbps <= 0 {
			return 0
		}
		sum += uint64(mbps) * 1_000_000 / 8
	}
	return sum
}
