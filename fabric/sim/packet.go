package sim

// ECN is the two-bit ECN codepoint of a packet (RFC 3168 values).
type ECN uint8

// ECN codepoints.
const (
	NotECT ECN = 0
	ECT1   ECN = 1
	ECT0   ECN = 2
	CE     ECN = 3
)

// smallHdr is the header capacity of a pooled packet; every DATA, ACK and
// NAK header of both transports fits, larger control packets (handshakes)
// get a one-off allocation.
const smallHdr = 192

// Packet is one datagram in flight. It carries the transport header bytes
// and the payload length; payload bytes are never simulated.
type Packet struct {
	Src, Dst   int32  // host ids
	SrcPort    uint16 // UDP source port (ECMP entropy)
	DstPort    uint16 // UDP destination port
	Plane      uint8  // plane the packet travels in
	ECN        ECN    // current ECN codepoint
	PayloadLen int32  // payload bytes following Hdr
	Size       int32  // bytes on the wire: len(Hdr)+PayloadLen+per-packet overhead
	inPort     int32  // ingress port at the switch holding it (PFC accounting)
	linkGen    uint32 // gen of the port it is being sent from (see port.gen)
	Hdr        []byte // transport header (pooled storage)
	// TxStart and TxEnd are when the port that delivered the packet (its
	// last hop) began and ended serialising it, ns. A port sends one
	// packet at a time, so the packets a host receives on one plane
	// occupy disjoint intervals [TxStart, TxEnd) of its link.
	TxStart, TxEnd int64
	// Placed is the payload the receiving transport placed into a posted
	// receive (Transport.Receive's result), bytes; set before Sim.OnRx
	// sees the packet.
	Placed int32
}

// newPacket returns a zeroed packet from the pool with Hdr sized n.
func (s *Sim) newPacket(n int) *Packet {
	var p *Packet
	if k := len(s.pool); k > 0 {
		p = s.pool[k-1]
		s.pool = s.pool[:k-1]
	} else {
		p = &Packet{Hdr: make([]byte, 0, smallHdr)}
	}
	if n > cap(p.Hdr) {
		p.Hdr = make([]byte, n)
	} else {
		p.Hdr = p.Hdr[:n]
	}
	return p
}

// freePacket returns p to the pool. Oversized header storage is dropped so
// the pool stays small.
func (s *Sim) freePacket(p *Packet) {
	h := p.Hdr
	if cap(h) > smallHdr {
		h = make([]byte, 0, smallHdr)
	}
	*p = Packet{Hdr: h[:0]}
	s.pool = append(s.pool, p)
}
