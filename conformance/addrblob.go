package conformance

import "net/netip"

// udpAddrBlob encodes the UDP driver's handshake address blob for one IPv4
// or IPv6 plane: version 1, plane count, then family (4 or 6), address and
// big-endian port. The core treats the blob as opaque; the UDP driver uses
// it to learn where replies go, so the tester announces its own socket.
func udpAddrBlob(ap netip.AddrPort) []byte {
	a := ap.Addr().Unmap()
	b := []byte{1, 1}
	if a.Is4() {
		v := a.As4()
		b = append(append(b, 4), v[:]...)
	} else {
		v := a.As16()
		b = append(append(b, 6), v[:]...)
	}
	return append(b, byte(ap.Port()>>8), byte(ap.Port()))
}
