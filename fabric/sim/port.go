package sim

// port is one egress direction of a link: a FIFO queue in front of a
// serialiser, and the far end it delivers to. A link is two ports that name
// each other as peer. The same type serves host NIC ports and switch ports.
type port struct {
	owner int32   // node index
	peer  int32   // the port of the far node on the same link
	bps   uint64  // line rate, whole bits per second (see txTime)
	delay int64   // propagation delay, ns
	loss  float64 // probability a packet sent here is lost
	up    bool
	// gen counts the link's state changes (setLink bumps it on both
	// ports). A packet in flight carries the gen its sender had when it
	// started serialising; one that arrives to another gen crossed a link
	// that failed (or failed and recovered) meanwhile and is lost. PFC
	// pause and resume frames carry it too, and are void on arrival to
	// another gen.
	gen     uint32
	busy    bool
	paused  bool      // PFC pause received from the far end (false whenever the link changes state)
	carry   uint64    // serialisation time owed but not yet charged, in units of 1/bps ns (see txTime)
	q       []*Packet // FIFO ring
	qHead   int
	qLen    int
	qBytes  int
	ingress int  // bytes held by this node that arrived through this port (PFC), ≥ 0
	xoff    bool // a pause was sent upstream for this ingress (false whenever the link changes state)
	isHost  bool // owner is a host

	// counters
	sentPkts  uint64
	sentBytes uint64
	drops     uint64 // drop-tail
	lost      uint64 // random loss and link failures, sent (or to be sent) from this port
	linkLost  uint64 // of lost: to link failures (see Stats.LinkLost)
	marks     uint64
	maxQ      int
}

func (p *port) push(pk *Packet) {
	if p.qLen == len(p.q) {
		n := 2 * len(p.q)
		if n == 0 {
			n = 16
		}
		q := make([]*Packet, n)
		for i := 0; i < p.qLen; i++ {
			q[i] = p.q[(p.qHead+i)%len(p.q)]
		}
		p.q, p.qHead = q, 0
	}
	p.q[(p.qHead+p.qLen)%len(p.q)] = pk
	p.qLen++
	p.qBytes += int(pk.Size)
	if p.qBytes > p.maxQ {
		p.maxQ = p.qBytes
	}
}

func (p *port) pop() *Packet {
	pk := p.q[p.qHead]
	p.q[p.qHead] = nil
	p.qHead++
	if p.qHead == len(p.q) {
		p.qHead = 0
	}
	p.qLen--
	p.qBytes -= int(pk.Size)
	return pk
}

// txTime returns the serialisation time of n bytes in whole ns and keeps
// the fraction of a nanosecond it did not charge in carry, as bits × 1e9
// (bit-nanoseconds per second) below one ns at the port's rate. The
// arithmetic is exact for any whole bits-per-second rate: a run of packets
// ends within 1 ns of its total bits / rate, where a rate rounded to whole
// picoseconds per byte was off by up to half a picosecond per byte (20 Tb/s
// rounded to 0 ps: infinite bandwidth; 3.2 Tb/s to 3 ps: 17% slow). A rate
// whose time per byte is a whole number of picoseconds (400 Gb/s: 20 ps)
// gives the same nanoseconds as that rounding did. No overflow: n × 8e9 <
// 1.72e19 for any int32 n, and carry < bps ≤ maxLinkRate leaves room
// below 2^64.
func (p *port) txTime(n int32) int64 {
	p.carry += uint64(n) * 8e9
	ns := p.carry / p.bps
	p.carry -= ns * p.bps
	return int64(ns)
}
