package udp

import (
	"errors"
	"fmt"
	"net/netip"
)

// Address blob format (carried opaquely by the core's HELLO, ≤ 512 bytes):
//
//	0   1  version (1)
//	1   1  number of planes n (1..16)
//	then n entries: family (4 or 6), address (4 or 16 bytes), port (2 bytes, big endian)
//
// An IPv4 plane costs 7 bytes and an IPv6 plane 19, so 16 IPv6 planes fit in
// 306 bytes.
const (
	addrBlobVersion = 1
	maxPlanes       = 16
)

// errAddrBlob is the base of every blob decoding error.
var errAddrBlob = errors.New("udp: malformed address blob")

// EncodeAddrs appends the handshake encoding of per-plane addresses to b.
// Every address must be valid; IPv4-mapped IPv6 addresses are written as IPv4.
func EncodeAddrs(b []byte, addrs []netip.AddrPort) ([]byte, error) {
	if len(addrs) == 0 || len(addrs) > maxPlanes {
		return b, fmt.Errorf("udp: %d plane addresses, want 1..%d", len(addrs), maxPlanes)
	}
	b = append(b, addrBlobVersion, byte(len(addrs)))
	for i, ap := range addrs {
		a := ap.Addr().Unmap()
		switch {
		case a.Is4():
			v := a.As4()
			b = append(b, 4)
			b = append(b, v[:]...)
		case a.Is6():
			v := a.As16()
			b = append(b, 6)
			b = append(b, v[:]...)
		default:
			return b, fmt.Errorf("udp: plane %d address %v is not valid", i, ap)
		}
		b = append(b, byte(ap.Port()>>8), byte(ap.Port()))
	}
	return b, nil
}

// DecodeAddrs parses a blob written by EncodeAddrs. Trailing bytes, unknown
// versions and families, IPv4-mapped IPv6 addresses, zero ports and
// unspecified addresses are errors.
func DecodeAddrs(b []byte) ([]netip.AddrPort, error) {
	if len(b) < 2 {
		return nil, fmt.Errorf("%w: %d bytes", errAddrBlob, len(b))
	}
	if b[0] != addrBlobVersion {
		return nil, fmt.Errorf("%w: version %d", errAddrBlob, b[0])
	}
	n := int(b[1])
	if n == 0 || n > maxPlanes {
		return nil, fmt.Errorf("%w: %d planes", errAddrBlob, n)
	}
	b = b[2:]
	out := make([]netip.AddrPort, 0, n)
	for i := 0; i < n; i++ {
		if len(b) < 1 {
			return nil, fmt.Errorf("%w: plane %d missing", errAddrBlob, i)
		}
		var a netip.Addr
		switch b[0] {
		case 4:
			if len(b) < 1+4+2 {
				return nil, fmt.Errorf("%w: plane %d truncated", errAddrBlob, i)
			}
			a = netip.AddrFrom4([4]byte(b[1:5]))
			b = b[5:]
		case 6:
			if len(b) < 1+16+2 {
				return nil, fmt.Errorf("%w: plane %d truncated", errAddrBlob, i)
			}
			a = netip.AddrFrom16([16]byte(b[1:17]))
			b = b[17:]
			if a.Is4In6() {
				// Canonical blobs write IPv4 as family 4.
				return nil, fmt.Errorf("%w: plane %d IPv4-mapped address %v", errAddrBlob, i, a)
			}
		default:
			return nil, fmt.Errorf("%w: plane %d family %d", errAddrBlob, i, b[0])
		}
		port := uint16(b[0])<<8 | uint16(b[1])
		b = b[2:]
		if port == 0 || a.IsUnspecified() {
			return nil, fmt.Errorf("%w: plane %d address %v port %d", errAddrBlob, i, a, port)
		}
		out = append(out, netip.AddrPortFrom(a, port))
	}
	if len(b) != 0 {
		return nil, fmt.Errorf("%w: %d trailing bytes", errAddrBlob, len(b))
	}
	return out, nil
}
