package udpnet

import (
	"encoding/binary"
	"fmt"
	"net/netip"

	"github.com/metaroce/metaroce/net-plugin/internal/backend"
)

// handleMagic marks a listen handle produced by this backend.
var handleMagic = [3]byte{'M', 'R', 'U'}

// handleVersion is the layout version of the listen handle.
const handleVersion = 1

// Listen handle layout (integers big-endian). Bytes past the encoded length
// are ignored, so NCCL may zero-pad the handle to its 128 bytes.
//
//	0  3  magic "MRU"
//	3  1  version
//	4  1  address family: 4 or 6
//	5  1  planes n
//	6  4  flow id (1..maxListenFlow)
//	10 8  nonce (non-zero)
//	18    n × (address (4 or 16 bytes), port (2 bytes))
//
// An IPv4 plane costs 6 bytes, an IPv6 plane 18, so 16 IPv4 planes or 6 IPv6
// planes fit the 128-byte handle.
const (
	hOffMagic   = 0
	hOffVersion = 3
	hOffFamily  = 4
	hOffPlanes  = 5
	hOffFlow    = 6
	hOffNonce   = 10
	hdrLen      = 18
)

// Plane limits of the handle by address family.
const (
	MaxPlanes4 = 16
	MaxPlanes6 = (backend.HandleSize - hdrLen) / 18
)

// listenHandle is what a sender needs to reach a listener.
type listenHandle struct {
	// Flow is the flow id the listener allocated for this comm pair,
	// 1..maxListenFlow.
	Flow uint32
	// Nonce identifies the listener: an announcement carrying another nonce
	// is rejected, so a stale handle cannot attach to a reused flow id.
	Nonce uint64
	// Addrs are the listening endpoint's per-plane addresses.
	Addrs []netip.AddrPort
}

// maxPlanes returns the plane limit of family (4 or 6).
func maxPlanes(family byte) int {
	if family == 6 {
		return MaxPlanes6
	}
	return MaxPlanes4
}

// Length returns the encoded size in bytes (0 if h has no address).
func (h *listenHandle) Length() int {
	if len(h.Addrs) == 0 {
		return 0
	}
	if h.Addrs[0].Addr().Unmap().Is4() {
		return hdrLen + 6*len(h.Addrs)
	}
	return hdrLen + 18*len(h.Addrs)
}

// Append encodes h after b. Every plane address must be of one family.
func (h *listenHandle) Append(b []byte) ([]byte, error) {
	if len(h.Addrs) == 0 {
		return b, fmt.Errorf("udpnet: listen handle without addresses: %w", backend.ErrInvalidArgument)
	}
	family := byte(6)
	if h.Addrs[0].Addr().Unmap().Is4() {
		family = 4
	}
	if len(h.Addrs) > maxPlanes(family) {
		return b, fmt.Errorf("udpnet: %d IPv%d planes do not fit the %d-byte listen handle (at most %d): %w", len(h.Addrs), family, backend.HandleSize, maxPlanes(family), backend.ErrInvalidUsage)
	}
	if h.Flow == 0 || h.Flow > maxListenFlow || h.Nonce == 0 {
		return b, fmt.Errorf("udpnet: listen handle with flow %d (want 1..%d) nonce %#x: %w", h.Flow, maxListenFlow, h.Nonce, backend.ErrInvalidArgument)
	}
	b = append(b, handleMagic[:]...)
	b = append(b, handleVersion, family, byte(len(h.Addrs)))
	b = binary.BigEndian.AppendUint32(b, h.Flow)
	b = binary.BigEndian.AppendUint64(b, h.Nonce)
	for i, ap := range h.Addrs {
		a := ap.Addr().Unmap()
		if !usable(a) || ap.Port() == 0 || a.Is4() != (family == 4) {
			return b, fmt.Errorf("udpnet: plane %d address %v in a listen handle of IPv%d planes: %w", i, ap, family, backend.ErrInvalidArgument)
		}
		if family == 4 {
			v := a.As4()
			b = append(b, v[:]...)
		} else {
			v := a.As16()
			b = append(b, v[:]...)
		}
		b = binary.BigEndian.AppendUint16(b, ap.Port())
	}
	return b, nil
}

// usable reports whether a can be a peer's plane address.
func usable(a netip.Addr) bool {
	return a.IsValid() && !a.IsUnspecified() && !a.IsMulticast() && a.Zone() == ""
}

// parseListenHandle decodes a handle written by Append, validating every
// field so that garbage yields a clear error instead of a stray connection.
// It returns the encoded length.
//
// A handle that is well formed but names a flow above maxListenFlow was
// made by no listener of this backend (listen never takes such a flow): it
// is refused here as a stale or foreign handle, with ErrRemote as the
// listener's own refusal of one would be (device.answer), rather than
// dialed and refused a round trip later.
func parseListenHandle(into *listenHandle, b []byte) (int, error) {
	bad := func(format string, args ...any) (int, error) {
		return 0, fmt.Errorf("udpnet: listen handle "+format+": %w", append(args, backend.ErrInvalidArgument)...)
	}
	if len(b) < hdrLen {
		return bad("of %d bytes, want at least %d", len(b), hdrLen)
	}
	if [3]byte(b[hOffMagic:hOffMagic+3]) != handleMagic {
		return bad("has bad magic % x (not produced by the MetaRoCE udp backend, or ranks use different METAROCE_BACKEND values)", b[hOffMagic:hOffMagic+3])
	}
	if v := b[hOffVersion]; v != handleVersion {
		return bad("version %d, this library speaks %d (mixed plugin versions across ranks?)", v, handleVersion)
	}
	family := b[hOffFamily]
	if family != 4 && family != 6 {
		return bad("address family %d", family)
	}
	n := int(b[hOffPlanes])
	if n < 1 || n > maxPlanes(family) {
		return bad("with %d IPv%d planes (want 1..%d)", n, family, maxPlanes(family))
	}
	flow := binary.BigEndian.Uint32(b[hOffFlow:])
	nonce := binary.BigEndian.Uint64(b[hOffNonce:])
	if flow == 0 || nonce == 0 {
		return bad("with flow %d nonce %#x", flow, nonce)
	}
	per := 6
	if family == 6 {
		per = 18
	}
	end := hdrLen + n*per
	if len(b) < end {
		return bad("of %d bytes, its %d planes need %d", len(b), n, end)
	}
	addrs := make([]netip.AddrPort, n)
	for i := range n {
		e := b[hdrLen+i*per : hdrLen+(i+1)*per]
		var a netip.Addr
		if family == 4 {
			a = netip.AddrFrom4([4]byte(e[:4]))
		} else {
			a = netip.AddrFrom16([16]byte(e[:16]))
			if a.Is4In6() {
				return bad("plane %d: IPv4-mapped address %v in IPv6 planes", i, a)
			}
		}
		port := binary.BigEndian.Uint16(e[per-2:])
		if !usable(a) || port == 0 {
			return bad("plane %d names %v port %d", i, a, port)
		}
		addrs[i] = netip.AddrPortFrom(a, port)
	}
	if flow > maxListenFlow {
		return 0, fmt.Errorf("udpnet: listen handle names flow %d of peer %s, above %d, the largest flow a listener takes: no listener made it, so the handle is stale, corrupted in transit, or from another job or plugin version: %w", flow, peerKey(addrs), maxListenFlow, backend.ErrRemote)
	}
	*into = listenHandle{Flow: flow, Nonce: nonce, Addrs: addrs}
	return end, nil
}
