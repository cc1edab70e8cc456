package tcpnet

import (
	"crypto/rand"
	"encoding/binary"
	"fmt"
	"net"
	"net/netip"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/metaroce/metaroce/net-plugin/internal/backend"
	"github.com/metaroce/metaroce/net-plugin/internal/netdev"
)

// Config tunes the TCP backend.
type Config struct {
	// IfNames selects interfaces (NCCL_SOCKET_IFNAME syntax); "" = automatic.
	IfNames string
	// Socks is the number of TCP sockets per connection, 1..MaxSocks.
	Socks int
	// Timeout bounds connection setup and how long unacknowledged data may
	// sit on a socket (TCP_USER_TIMEOUT) before the peer is declared dead.
	Timeout time.Duration
	// Logf, when set, receives one line (no trailing newline) for each
	// connection the listener drops because its peer misbehaved or gave
	// up; nil discards them.
	Logf func(format string, args ...any)
}

// DefaultConfig is used for zero fields of a Config.
var DefaultConfig = Config{Socks: 2, Timeout: 30 * time.Second}

// Backend implements backend.Backend over kernel TCP.
type Backend struct {
	cfg  Config
	devs []backend.Device

	// verdictRead is handed to every dialer (see dialer.verdictRead);
	// nil except in tests.
	verdictRead func(idx int)
}

var _ backend.Backend = (*Backend)(nil)

// New discovers devices and returns a TCP backend.
func New(cfg Config) (*Backend, error) {
	if cfg.Socks == 0 {
		cfg.Socks = DefaultConfig.Socks
	}
	if cfg.Timeout == 0 {
		cfg.Timeout = DefaultConfig.Timeout
	}
	if cfg.Socks < 1 || cfg.Socks > MaxSocks {
		return nil, fmt.Errorf("tcpnet: %d sockets per connection, want 1..%d: %w", cfg.Socks, MaxSocks, backend.ErrInvalidUsage)
	}
	f, err := netdev.ParseFilter(cfg.IfNames)
	if err != nil {
		return nil, fmt.Errorf("tcpnet: %w: %w", err, backend.ErrInvalidUsage)
	}
	devs, err := discoverDevices(f, cfg.Socks)
	if err != nil {
		return nil, err
	}
	return &Backend{cfg: cfg, devs: devs}, nil
}

// Name returns "tcp".
func (b *Backend) Name() string { return "tcp" }

// Devices returns the devices found by New.
func (b *Backend) Devices() []backend.Device { return b.devs }

// Close releases nothing: connections own their sockets.
func (b *Backend) Close() error { return nil }

// logf passes a line to cfg.Logf, if set.
func (cfg *Config) logf(format string, args ...any) {
	if cfg.Logf != nil {
		cfg.Logf(format, args...)
	}
}

func (b *Backend) device(dev int) (backend.Device, error) {
	if dev < 0 || dev >= len(b.devs) {
		return backend.Device{}, fmt.Errorf("tcpnet: device %d out of range 0..%d: %w", dev, len(b.devs)-1, backend.ErrInternal)
	}
	return b.devs[dev], nil
}

// Listen opens a TCP listener on the device's address (ephemeral port).
// On error the Listener is nil itself, not an interface holding a nil
// *listener.
func (b *Backend) Listen(dev int) (backend.Listener, error) {
	d, err := b.device(dev)
	if err != nil {
		return nil, err
	}
	ip, err := netip.ParseAddr(d.Addr)
	if err != nil {
		return nil, fmt.Errorf("tcpnet: device %s address %q: %w", d.Name, d.Addr, err)
	}
	l, err := newListener(b.cfg, netip.AddrPortFrom(ip, 0), randomNonZero())
	if err != nil {
		return nil, err
	}
	return l, nil
}

// Dial starts connecting to the listener described by handle.
func (b *Backend) Dial(dev int, handle []byte) (backend.Dialer, error) {
	if _, err := b.device(dev); err != nil {
		return nil, err
	}
	var h listenHandle
	if _, err := parseListenHandle(&h, handle); err != nil {
		return nil, err
	}
	return newDialer(b.cfg, h, b.verdictRead), nil
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

// tuneSocket sets the options every data socket needs: no Nagle delay,
// keepalive probes and TCP_USER_TIMEOUT so that a silently dead peer turns
// into an error within about timeout instead of a hang.
func tuneSocket(c *net.TCPConn, timeout time.Duration) {
	_ = c.SetNoDelay(true)
	_ = c.SetKeepAliveConfig(net.KeepAliveConfig{Enable: true, Idle: timeout / 4, Interval: timeout / 8, Count: 4})
	if rc, err := c.SyscallConn(); err == nil {
		_ = rc.Control(func(fd uintptr) {
			_ = unix.SetsockoptInt(int(fd), syscall.IPPROTO_TCP, unix.TCP_USER_TIMEOUT, int(timeout/time.Millisecond))
		})
	}
}
