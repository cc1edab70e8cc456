package sockio

import (
	"errors"
	"fmt"
	"net/netip"
	"sync/atomic"

	"golang.org/x/sys/unix"
)

// DefaultBufferBytes is the socket buffer size requested when Config leaves it
// zero: 4 MiB. Buffers near the kernel default (about 212 KB) lose a large share
// of datagrams at full speed.
const DefaultBufferBytes = 4 << 20

// Config describes one socket.
type Config struct {
	// Local is the address and port to bind. Port 0 lets the kernel pick an
	// ephemeral port (read it back with LocalAddr). The address family of
	// Local decides the socket's family; an IPv6 socket is IPv6-only.
	Local netip.AddrPort
	// RcvBuf and SndBuf are the requested buffer sizes in bytes (0 selects
	// DefaultBufferBytes). The FORCE variants are tried first (they pass the
	// rmem_max/wmem_max limits as root), then the plain ones.
	RcvBuf, SndBuf int
	// ECN is the codepoint sent on every datagram (IP_TOS / IPV6_TCLASS);
	// 0 selects ECT0. Use DisableECN to send Not-ECT.
	ECN uint8
	// DisableECN sends Not-ECT datagrams (the codepoint is left at 0).
	DisableECN bool
	// DisableGSO and DisableGRO force the fallback paths even where the
	// kernel offers UDP segmentation offload or receive coalescing.
	DisableGSO, DisableGRO bool
}

// ErrWouldBlock is returned by WriteBatch and ReadBatch when the socket cannot
// move a single message now (EAGAIN); wait with a Poller or WaitWritable.
var ErrWouldBlock = errors.New("sockio: would block")

// ErrClosed is returned by operations on a closed Conn.
var ErrClosed = errors.New("sockio: use of closed socket")

// Conn is one non-blocking UDP socket bound to one local address and port.
type Conn struct {
	fd     int
	v6     bool
	local  netip.AddrPort
	gso    bool
	gro    bool
	rcvBuf int
	sndBuf int
	closed atomic.Bool

	send sendScratch
	recv recvScratch
}

// Open creates, configures and binds a socket as cfg says.
func Open(cfg Config) (*Conn, error) {
	if !cfg.Local.IsValid() {
		return nil, fmt.Errorf("sockio: invalid local address %v", cfg.Local)
	}
	addr := cfg.Local.Addr()
	if addr.Is4In6() {
		addr = addr.Unmap()
	}
	c := &Conn{v6: addr.Is6()}
	family := unix.AF_INET
	if c.v6 {
		family = unix.AF_INET6
	}
	fd, err := unix.Socket(family, unix.SOCK_DGRAM|unix.SOCK_NONBLOCK|unix.SOCK_CLOEXEC, unix.IPPROTO_UDP)
	if err != nil {
		return nil, fmt.Errorf("sockio: socket: %w", err)
	}
	c.fd = fd
	if err := c.configure(cfg, addr); err != nil {
		unix.Close(fd)
		return nil, err
	}
	c.send.init(c.v6)
	c.recv.init()
	return c, nil
}

func (c *Conn) configure(cfg Config, addr netip.Addr) error {
	if c.v6 {
		if err := unix.SetsockoptInt(c.fd, unix.IPPROTO_IPV6, unix.IPV6_V6ONLY, 1); err != nil {
			return fmt.Errorf("sockio: IPV6_V6ONLY: %w", err)
		}
	}
	rb, sb := cfg.RcvBuf, cfg.SndBuf
	if rb <= 0 {
		rb = DefaultBufferBytes
	}
	if sb <= 0 {
		sb = DefaultBufferBytes
	}
	var err error
	if c.rcvBuf, err = setBuffer(c.fd, unix.SO_RCVBUFFORCE, unix.SO_RCVBUF, rb); err != nil {
		return err
	}
	if c.sndBuf, err = setBuffer(c.fd, unix.SO_SNDBUFFORCE, unix.SO_SNDBUF, sb); err != nil {
		return err
	}
	if err := c.setECN(cfg); err != nil {
		return err
	}
	if !cfg.DisableGSO {
		c.gso = probeGSO(c.fd)
	}
	if !cfg.DisableGRO {
		c.gro = unix.SetsockoptInt(c.fd, unix.IPPROTO_UDP, unix.UDP_GRO, 1) == nil
	}
	sa := encodeSockaddr(netip.AddrPortFrom(addr, cfg.Local.Port()), c.v6)
	if err := unix.Bind(c.fd, sa); err != nil {
		return fmt.Errorf("sockio: bind %v: %w", cfg.Local, err)
	}
	got, err := unix.Getsockname(c.fd)
	if err != nil {
		return fmt.Errorf("sockio: getsockname: %w", err)
	}
	c.local = decodeSockaddr(got)
	return nil
}

// setECN asks the kernel to mark outgoing datagrams with the configured
// codepoint and to report the received codepoint as a control message.
func (c *Conn) setECN(cfg Config) error {
	tos := int(cfg.ECN & 3)
	if tos == 0 {
		tos = int(ECT0)
	}
	if cfg.DisableECN {
		tos = 0
	}
	if c.v6 {
		if err := unix.SetsockoptInt(c.fd, unix.IPPROTO_IPV6, unix.IPV6_TCLASS, tos); err != nil {
			return fmt.Errorf("sockio: IPV6_TCLASS: %w", err)
		}
		if err := unix.SetsockoptInt(c.fd, unix.IPPROTO_IPV6, unix.IPV6_RECVTCLASS, 1); err != nil {
			return fmt.Errorf("sockio: IPV6_RECVTCLASS: %w", err)
		}
		return nil
	}
	if err := unix.SetsockoptInt(c.fd, unix.IPPROTO_IP, unix.IP_TOS, tos); err != nil {
		return fmt.Errorf("sockio: IP_TOS: %w", err)
	}
	if err := unix.SetsockoptInt(c.fd, unix.IPPROTO_IP, unix.IP_RECVTOS, 1); err != nil {
		return fmt.Errorf("sockio: IP_RECVTOS: %w", err)
	}
	return nil
}

// setBuffer requests n bytes with the privileged option, falls back to the
// capped one, and returns the size the kernel reports (which is twice the
// accepted request, the kernel's bookkeeping allowance included).
func setBuffer(fd, force, plain, n int) (int, error) {
	if unix.SetsockoptInt(fd, unix.SOL_SOCKET, force, n) != nil {
		if err := unix.SetsockoptInt(fd, unix.SOL_SOCKET, plain, n); err != nil {
			return 0, fmt.Errorf("sockio: set socket buffer: %w", err)
		}
	}
	got, err := unix.GetsockoptInt(fd, unix.SOL_SOCKET, plain)
	if err != nil {
		return 0, fmt.Errorf("sockio: get socket buffer: %w", err)
	}
	return got, nil
}

// probeGSO reports whether the kernel accepts UDP_SEGMENT on this socket. The
// option is left at 0 so that only messages with a Seg carry a segment size.
func probeGSO(fd int) bool {
	if _, err := unix.GetsockoptInt(fd, unix.IPPROTO_UDP, unix.UDP_SEGMENT); err != nil {
		return false
	}
	return unix.SetsockoptInt(fd, unix.IPPROTO_UDP, unix.UDP_SEGMENT, 0) == nil
}

// LocalAddr is the bound address and port.
func (c *Conn) LocalAddr() netip.AddrPort { return c.local }

// Fd is the socket's file descriptor, for registration with a Poller. It stays
// owned by the Conn.
func (c *Conn) Fd() int { return c.fd }

// GSO reports whether sends with Msg.Seg use one UDP_SEGMENT syscall entry.
func (c *Conn) GSO() bool { return c.gso }

// GRO reports whether the kernel may coalesce received datagrams (Msg.Seg > 0).
// Receive buffers must then hold MaxDatagram bytes.
func (c *Conn) GRO() bool { return c.gro }

// RcvBuf and SndBuf are the effective socket buffer sizes in bytes as the
// kernel reports them.
func (c *Conn) RcvBuf() int { return c.rcvBuf }

// SndBuf is the effective send buffer size in bytes, see RcvBuf.
func (c *Conn) SndBuf() int { return c.sndBuf }

// Close closes the socket; later calls return ErrClosed. Close must not race
// with WriteBatch or ReadBatch on the same Conn.
func (c *Conn) Close() error {
	if c.closed.Swap(true) {
		return ErrClosed
	}
	return unix.Close(c.fd)
}

// WaitWritable blocks until the socket can take more data or timeoutMs
// milliseconds pass (negative waits forever); it reports whether it is
// writable.
func (c *Conn) WaitWritable(timeoutMs int) (bool, error) {
	if c.closed.Load() {
		return false, ErrClosed
	}
	c.send.pfd[0] = unix.PollFd{Fd: int32(c.fd), Events: unix.POLLOUT}
	for {
		n, err := unix.Poll(c.send.pfd[:], timeoutMs)
		if err == unix.EINTR {
			continue
		}
		if err != nil {
			return false, fmt.Errorf("sockio: poll: %w", err)
		}
		return n > 0, nil
	}
}
