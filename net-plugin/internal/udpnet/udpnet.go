package udpnet

import (
	"crypto/rand"
	"encoding/binary"
	"errors"
	"fmt"
	"net/netip"
	"strings"
	"time"

	"github.com/metaroce/metaroce/net-plugin/internal/backend"
	"github.com/metaroce/metaroce/net-plugin/internal/netdev"
)

// Config tunes the MetaRoCE backend.
type Config struct {
	// IfNames selects the interfaces whose addresses become the planes
	// (NCCL_SOCKET_IFNAME syntax); "" = automatic.
	IfNames string
	// Timeout bounds connection setup and dead-peer detection: it is the
	// core's HandshakeTimeout and IdleTimeout. Default 30 s.
	Timeout time.Duration
	// PortsPerPlane is the source-port pool per plane (path entropies);
	// 0 takes the datapath's default (16).
	PortsPerPlane int
	// MaxPeers bounds the connections of one device's endpoint, i.e. the
	// peer processes it talks to (established plus handshaking: the bound
	// also caps what a flood of HELLOs can hold, about 3 KiB each while
	// handshaking). 0 takes DefaultMaxPeers.
	MaxPeers int
	// Seed seeds the datapath's random choices; 0 (production) draws one
	// from crypto/rand. Tests set it for repeatable runs.
	Seed uint64
	// Secret turns on per-packet authentication with this shared secret
	// (at least 16 bytes, the same on every rank; see transport/udp's
	// Config.Secret). Nil leaves the choice to the datapath, which then
	// reads METAROCE_SECRET with os.LookupEnv; the plugin reads the
	// variable itself and passes it here, so that a value set after the
	// process started counts.
	Secret []byte
	// Logf receives diagnostics (dropped control messages, forced closes,
	// datapath messages); nil discards them.
	Logf func(format string, args ...any)
}

// DefaultMaxPeers is Config.MaxPeers when zero: an all-to-all job of 32768
// processes, beyond the core's own default of 4096, which a large job
// would reach.
const DefaultMaxPeers = 32768

// DefaultTimeout is Config.Timeout when zero.
const DefaultTimeout = 30 * time.Second

// DefaultPlaneSpeedMbps is the speed counted for a plane whose link speed
// the kernel does not report (loopback, most virtual NICs), Mbit/s; it
// matches NCCL's socket transport.
const DefaultPlaneSpeedMbps = 10000

// DefaultLatencyUs is the latency the device reports, microseconds: about
// a busy-polled small-message round trip of the user-space datapath.
const DefaultLatencyUs = 10

// MaxSendRequests is the number of sends one comm can have in flight:
// NCCL_NET_MAX_REQUESTS (32) times backend.MaxRecvs.
const MaxSendRequests = 32 * backend.MaxRecvs

// MaxRecvRequests is the number of grouped receives one comm can have posted.
const MaxRecvRequests = 64

// maxFlowsPerConn bounds the flows a shared connection holds at once. Every
// comm pair to a peer takes a fresh flow (peer.dataFlow), released when the
// comm closes, so this bounds comms open at once to one peer, not over the
// connection's life. A variable so that tests can make it small.
var maxFlowsPerConn = 1 << 16

// Backend implements backend.Backend over the MetaRoCE datapath.
type Backend struct {
	cfg  Config
	devs []*device
	info []backend.Device
}

var _ backend.Backend = (*Backend)(nil)

// New selects the planes and returns the backend; sockets open on first use.
func New(cfg Config) (*Backend, error) {
	if cfg.Timeout == 0 {
		cfg.Timeout = DefaultTimeout
	}
	if cfg.Timeout < 0 {
		return nil, fmt.Errorf("udpnet: negative timeout %v: %w", cfg.Timeout, backend.ErrInvalidUsage)
	}
	f, err := netdev.ParseFilter(cfg.IfNames)
	if err != nil {
		return nil, fmt.Errorf("udpnet: %w: %w", err, backend.ErrInvalidUsage)
	}
	ifs, err := netdev.Select(f)
	if errors.Is(err, netdev.ErrNoMatch) {
		return nil, fmt.Errorf("udpnet: %w: %w", err, backend.ErrInvalidUsage)
	}
	if err != nil {
		return nil, fmt.Errorf("udpnet: %w", err)
	}
	planes := choosePlanes(ifs)
	for _, p := range planes {
		if p.NoCarrier && cfg.Logf != nil {
			cfg.Logf("udpnet: plane %s (%v) is up without a carrier: kept, as METAROCE_IFNAMES names it (every host must have as many planes), and the connections fail over from it until it carries", p.Name, p.Addr)
		}
	}
	b := &Backend{cfg: cfg}
	d := newDevice(b, describe(planes), planes)
	b.devs = append(b.devs, d)
	b.info = append(b.info, d.info)
	return b, nil
}

// choosePlanes keeps the interfaces of one address family (every plane of
// a connection must match the peer's), IPv4 if any, within the handle's
// plane limit.
func choosePlanes(ifs []netdev.Iface) []netdev.Iface {
	var v4, v6 []netdev.Iface
	for _, i := range ifs {
		if i.Addr.Is4() {
			v4 = append(v4, i)
		} else {
			v6 = append(v6, i)
		}
	}
	if len(v4) > 0 {
		return v4[:min(len(v4), MaxPlanes4)]
	}
	return v6[:min(len(v6), MaxPlanes6)]
}

// describe builds the device of a set of planes: its speed is the sum of
// the planes' speeds, its PCI path the first plane's.
func describe(planes []netdev.Iface) backend.Device {
	var names, addrs []string
	d := backend.Device{LatencyUs: DefaultLatencyUs, Planes: len(planes), PCIPath: planes[0].PCIPath}
	for _, p := range planes {
		names = append(names, p.Name)
		addrs = append(addrs, p.Addr.String())
		if p.SpeedMbps > 0 {
			d.SpeedMbps += p.SpeedMbps
		} else {
			d.SpeedMbps += DefaultPlaneSpeedMbps
		}
	}
	d.Name = "metaroce_" + strings.Join(names, "+")
	d.IfName = strings.Join(names, ",")
	d.Addr = strings.Join(addrs, ",")
	d.Paths = len(planes) * 4 // the datapath's default paths per plane
	return d
}

// Name returns "udp".
func (b *Backend) Name() string { return "udp" }

// Devices returns the devices found by New.
func (b *Backend) Devices() []backend.Device { return b.info }

func (b *Backend) device(dev int) (*device, error) {
	if dev < 0 || dev >= len(b.devs) {
		return nil, fmt.Errorf("udpnet: device %d out of range 0..%d: %w", dev, len(b.devs)-1, backend.ErrInternal)
	}
	return b.devs[dev], nil
}

// Listen allocates a flow on device dev's endpoint and returns a listener
// whose handle names it. On error the Listener is nil itself, not an
// interface holding a nil *listener.
func (b *Backend) Listen(dev int) (backend.Listener, error) {
	d, err := b.device(dev)
	if err != nil {
		return nil, err
	}
	l, err := d.listen()
	if err != nil {
		return nil, err
	}
	return l, nil
}

// Dial starts connecting to the listener described by handle.
func (b *Backend) Dial(dev int, handle []byte) (backend.Dialer, error) {
	d, err := b.device(dev)
	if err != nil {
		return nil, err
	}
	var h listenHandle
	if _, err := parseListenHandle(&h, handle); err != nil {
		return nil, err
	}
	if len(h.Addrs) != len(d.addrs) || h.Addrs[0].Addr().Is4() != d.addrs[0].Is4() {
		return nil, fmt.Errorf("udpnet: the peer at %v has %d IPv%s plane(s), device %s has %d IPv%s plane(s): select the same number of interfaces on every host (METAROCE_IFNAMES; automatic selection leaves out interfaces without a carrier): %w",
			h.Addrs[0], len(h.Addrs), family(h.Addrs[0].Addr()), d.info.Name, len(d.addrs), family(d.addrs[0]), backend.ErrInvalidUsage)
	}
	return d.dial(h), nil
}

func family(a netip.Addr) string {
	if a.Is4() {
		return "4"
	}
	return "6"
}

// Close closes every device's endpoint (and with it every connection).
func (b *Backend) Close() error {
	for _, d := range b.devs {
		d.close()
	}
	return nil
}

// randomNonZero returns a random non-zero 64-bit value.
func randomNonZero() uint64 {
	var b [8]byte
	for {
		_, _ = rand.Read(b[:])
		if v := binary.LittleEndian.Uint64(b[:]); v != 0 {
			return v
		}
	}
}
