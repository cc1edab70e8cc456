package transport

// PathStats are the counters of one of our paths.
type PathStats struct {
	Plane   uint8
	Entropy uint16
	Active  bool
	// PacketsSent counts the sequenced packets sent on the path (DATA,
	// control packets, probes, retransmissions included); BytesSent only
	// the DATA among them, header and payload, without any piggybacked
	// acknowledgement. ConnStats counts every datagram, and all its bytes.
	PacketsSent uint64
	BytesSent   uint64
	Lost        uint64 // packets declared lost (gap or timeout)
	Spurious    uint64 // declared lost, then acknowledged after all
	Timeouts    uint64
	// SpuriousTimeouts counts timeouts that an acknowledgement later
	// showed unneeded: something they declared lost had arrived.
	SpuriousTimeouts uint64
	// RTOFloor is the path's adaptive timer floor raised by spurious
	// timeouts (0 = none, MinRTO rules), virtual-time units.
	RTOFloor    Time
	ECNMarks    uint64 // acknowledged packets that carried CE
	Probes      uint64
	PathChanges uint64 // moves to a fresh entropy
	Revived     uint64 // probes that brought the path back
	RTT         Time   // smoothed
	Window      int    // congestion window, bytes
	Inflight    int    // bytes
}

// ConnStats are the counters of one connection.
type ConnStats struct {
	Remote RemoteID
	State  string
	Paths  int
	// PacketsSent and BytesSent count every datagram the connection sent
	// (DATA, control, ACKs, probes, handshake and CLOSE) and all of its
	// bytes. PacketsRecv counts the packets that reached the connection
	// and BytesRecv the DATA payload among them, duplicates and DATA for
	// receives no longer posted included: what arrived, not what was
	// placed.
	PacketsSent uint64
	BytesSent   uint64
	PacketsRecv uint64
	BytesRecv   uint64
	Retransmits uint64
	Lost        uint64
	Spurious    uint64
	Timeouts    uint64
	// TailProbes counts the probes sent because a path's newest packet
	// went unacknowledged for its tail-probe timeout (docs/spec.md §3.2).
	TailProbes uint64
	// SpuriousTimeouts counts path timeouts later shown unneeded (see
	// PathStats.SpuriousTimeouts).
	SpuriousTimeouts uint64
	ECNMarks         uint64 // our packets the peer saw marked
	CERecv           uint64 // packets we received marked
	PathChanges      uint64
	AcksSent         uint64
	AcksRecv         uint64
	// AcksPiggybacked counts acknowledgements we carried inside our own
	// sequenced packets instead of separate ACKs; PiggyAcksRecv those the
	// peer carried in its packets (docs/spec.md §3.1).
	AcksPiggybacked uint64
	PiggyAcksRecv   uint64
	NacksRecv       uint64
	RTT             Time
	// MinRTT is the least RTT sampled on the connection, the handshake's
	// included (docs/spec.md §3.3); 0 before any sample.
	MinRTT     Time
	Window     int    // connection window, bytes
	PacingRate uint64 // bytes/s, 0 = unpaced
	RateHint   uint64 // latest hint from the peer, bytes/s
	Inflight   int
}

// Stats returns a snapshot of connection id's counters.
func (e *Endpoint) Stats(id ConnID) (ConnStats, bool) {
	c := e.conns[id]
	if c == nil {
		return ConnStats{}, false
	}
	s := c.stats
	s.Remote = c.remote
	s.State = c.state.String()
	s.Paths = len(c.paths)
	s.MinRTT = c.minRTT
	s.Window = c.cc.ConnWindow()
	s.PacingRate = c.cc.PacingRate()
	s.Inflight = c.inflight
	return s, true
}

// PathStats returns a snapshot of path i of connection id.
func (e *Endpoint) PathStats(id ConnID, i int) (PathStats, bool) {
	c := e.conns[id]
	if c == nil || i < 0 || i >= len(c.paths) {
		return PathStats{}, false
	}
	p := c.paths[i]
	s := p.stats
	s.Plane, s.Entropy, s.Active = p.plane, p.entropy, p.state == pathActive
	s.Window = c.cc.PathWindow(i)
	s.Inflight = p.inflight
	s.RTOFloor = p.rtoFloor
	if s.RTT == 0 {
		s.RTT = p.srtt
	}
	return s, true
}
