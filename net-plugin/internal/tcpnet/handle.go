package tcpnet

import (
	"encoding/binary"
	"fmt"
	"net/netip"

	"github.com/metaroce/metaroce/net-plugin/internal/backend"
)

// handleMagic marks a listen handle produced by this backend.
var handleMagic = [4]byte{'M', 'R', 'T', 'C'}

// handleVersion is the version of the listen handle's layout and of the
// connection handshake, carried by the handle and by every hello: a dialer
// only speaks to listeners of its own version, and says so when the
// versions differ. Version 3: once every socket of a connection is
// accepted, the dialer confirms that it takes the connection with one
// byte on socket 0 (connConfirmed), which the listener waits for before
// it hands the connection out. Version 2 listeners handed it out as soon
// as its last socket was accepted, and version 1 dialers counted a socket
// connected once its hello was written, before the listener answered it
// with one byte (helloAccepted).
const handleVersion = 3

// Handle layout (offsets in bytes, integers big-endian). Bytes past
// handleLen are zero and ignored, so NCCL may keep them as scratch.
const (
	hOffMagic   = 0  // 4 bytes "MRTC"
	hOffVersion = 4  // 1 byte
	hOffSocks   = 5  // 1 byte, number of sockets per connection
	hOffPort    = 6  // 2 bytes, TCP port
	hOffAddr    = 8  // 16 bytes, IPv6 or IPv4-mapped address
	hOffNonce   = 24 // 8 bytes, random listener identity (non-zero)
	handleLen   = 32
)

// MaxSocks bounds the sockets per connection (Config.Socks and handles).
const MaxSocks = 8

// listenHandle is what a sender needs to reach a listener.
type listenHandle struct {
	// Addr is the listener's address and port.
	Addr netip.AddrPort
	// Socks is the number of sockets per connection, chosen by the receiver.
	Socks int
	// Nonce identifies the listener; connections carrying another nonce are
	// rejected, so a stale handle cannot attach to a reused port.
	Nonce uint64
}

// Length returns the encoded size in bytes.
func (h *listenHandle) Length() int { return handleLen }

// Append encodes h after b.
func (h *listenHandle) Append(b []byte) ([]byte, error) {
	if h.Socks < 1 || h.Socks > MaxSocks {
		return b, fmt.Errorf("tcpnet: handle with %d sockets (want 1..%d): %w", h.Socks, MaxSocks, backend.ErrInvalidArgument)
	}
	if h.Nonce == 0 || !h.Addr.IsValid() || h.Addr.Port() == 0 {
		return b, fmt.Errorf("tcpnet: incomplete handle %v nonce %#x: %w", h.Addr, h.Nonce, backend.ErrInvalidArgument)
	}
	var e [handleLen]byte
	copy(e[hOffMagic:], handleMagic[:])
	e[hOffVersion] = handleVersion
	e[hOffSocks] = byte(h.Socks)
	binary.BigEndian.PutUint16(e[hOffPort:], h.Addr.Port())
	a16 := h.Addr.Addr().As16()
	copy(e[hOffAddr:], a16[:])
	binary.BigEndian.PutUint64(e[hOffNonce:], h.Nonce)
	return append(b, e[:]...), nil
}

// parseListenHandle decodes a handle written by Append, validating every
// field so that garbage yields a clear error instead of a stray connection.
func parseListenHandle(into *listenHandle, b []byte) (int, error) {
	if len(b) < handleLen {
		return 0, fmt.Errorf("tcpnet: listen handle of %d bytes, want at least %d: %w", len(b), handleLen, backend.ErrInvalidArgument)
	}
	if [4]byte(b[hOffMagic:hOffMagic+4]) != handleMagic {
		return 0, fmt.Errorf("tcpnet: listen handle has bad magic % x (not produced by the MetaRoCE tcp backend, or corrupted in transit): %w", b[hOffMagic:hOffMagic+4], backend.ErrInvalidArgument)
	}
	if v := b[hOffVersion]; v != handleVersion {
		return 0, fmt.Errorf("tcpnet: listen handle version %d, this library speaks %d (mixed plugin versions across ranks?): %w", v, handleVersion, backend.ErrInvalidArgument)
	}
	socks := int(b[hOffSocks])
	if socks < 1 || socks > MaxSocks {
		return 0, fmt.Errorf("tcpnet: listen handle asks for %d sockets (want 1..%d): %w", socks, MaxSocks, backend.ErrInvalidArgument)
	}
	port := binary.BigEndian.Uint16(b[hOffPort:])
	addr := netip.AddrFrom16([16]byte(b[hOffAddr : hOffAddr+16])).Unmap()
	nonce := binary.BigEndian.Uint64(b[hOffNonce:])
	if port == 0 || nonce == 0 || addr.IsUnspecified() {
		return 0, fmt.Errorf("tcpnet: listen handle names %v port %d nonce %#x: %w", addr, port, nonce, backend.ErrInvalidArgument)
	}
	*into = listenHandle{Addr: netip.AddrPortFrom(addr, port), Socks: socks, Nonce: nonce}
	return handleLen, nil
}
