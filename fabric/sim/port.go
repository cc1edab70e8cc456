package sim

// port is one egress direction of a link: a FIFO queue in front of a
// serialiser, and the far end it delivers to. A link is two ports that name
// each other as peer. The same type serves host NIC ports and switch ports.
type port struct {
	owner   int32   // node index
	peer    int32   // the port of the far node on the same link
	psPerB  int64   // serialisation time, picoseconds per byte
	delay   int64   // propagation delay, ns
	loss    float64 // probability a packet sent here is lost
	up      bool
	busy    bool
	paused  bool // PFC pause received from the far end
	carry   int64
	q       []*Packet // FIFO ring
	qHead   int
	qLen    int
	qBytes  int
	ingress int  // bytes held by this node that arrived through this port (PFC)
	xoff    bool // a pause was sent upstream for this ingress
	isHost  bool // owner is a host

	// counters
	sentPkts  uint64
	sentBytes uint64
	drops     uint64 // drop-tail
	lost      uint64 // random loss or link down
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

// txTime returns the serialisation time of n bytes in ns, carrying the
// sub-nanosecond remainder so that long runs keep the exact line rate.
func (p *port) txTime(n int32) int64 {
	p.carry += int64(n) * p.psPerB
	ns := p.carry / 1000
	p.carry -= ns * 1000
	return ns
}
