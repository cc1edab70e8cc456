package sockio

import "net/netip"

// ECN codepoints: the two low bits of the IPv4 TOS byte or the IPv6 traffic
// class (RFC 3168 section 5).
const (
	NotECT uint8 = 0 // not ECN-capable transport
	ECT1   uint8 = 1 // ECN-capable, codepoint 1 (L4S)
	ECT0   uint8 = 2 // ECN-capable, codepoint 0: what MetaRoCE sends
	CE     uint8 = 3 // congestion experienced, set by a switch
)

// Msg is one datagram to send or one received, possibly a GSO/GRO batch of
// equal-sized segments.
//
// On send: Buf[:N] is the payload and Addr the destination. When Seg > 0 and
// N > Seg, the payload is a run of segments of Seg bytes each (the last may be
// shorter), sent as separate datagrams: with one UDP_SEGMENT send where the
// kernel offers GSO, or split into single datagrams otherwise. ECN is ignored on
// send (the socket's codepoint is used, see [Config.ECN]).
//
// Tail, on send only, is a second piece of payload that follows Buf[:N] in
// the same datagram: the kernel gathers both, so a header built in Buf and a
// payload that lives elsewhere leave without being copied together first.
// A message with a Tail is one datagram (Seg must be 0); receives ignore it.
//
// On receive: Buf is filled up to len(Buf), N is the byte count, Addr the
// source, ECN the two ECN bits of the IP header, and Seg the GRO segment size
// when the kernel coalesced several datagrams of the same flow into one buffer
// (0 when it holds a single datagram). Use [Msg.Segments] and [Msg.Segment] to
// split it again. Trunc reports that the datagram did not fit in Buf.
type Msg struct {
	Buf   []byte
	N     int
	Tail  []byte
	Addr  netip.AddrPort
	ECN   uint8
	Seg   int
	Trunc bool
}

// Segments is the number of datagrams held in m.Buf[:m.N]: 1 when m.Seg is 0
// or not smaller than N (an empty datagram is one datagram too), else
// ceil(N/Seg).
func (m *Msg) Segments() int {
	if m.Seg <= 0 || m.Seg >= m.N {
		return 1
	}
	return (m.N + m.Seg - 1) / m.Seg
}

// Segment returns datagram i of m (0 <= i < m.Segments()), a slice of m.Buf.
func (m *Msg) Segment(i int) []byte {
	if m.Seg <= 0 || m.Seg >= m.N {
		return m.Buf[:m.N]
	}
	lo := i * m.Seg
	hi := min(lo+m.Seg, m.N)
	return m.Buf[lo:hi]
}
