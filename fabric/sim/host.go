package sim

import "math"

// SrcPortBase is the UDP source port of entropy index 0; entropy i leaves
// from SrcPortBase+i.
const SrcPortBase = 49152

// StallBackoff is how long a host waits before re-running a transport
// whose NextTimeout stays in the past after HandleTimeout (a transport bug
// the simulator survives and counts in Stats.TimerStalls), ns.
const StallBackoff = 1000

// DstPort is the UDP destination port on every packet (the ECMP hash input).
const DstPort = 4791

// Host drives one Transport on virtual time: it feeds received datagrams and
// timeouts in, and pulls datagrams out only while one of its NIC ports can
// take them, so the transport is paced by NIC serialisation.
type Host struct {
	ID       int
	sim      *Sim
	T        Transport
	App      App
	ports    []int32 // egress port per plane
	timerAt  int64   // earliest armed timer event, math.MaxInt64 if none
	txbuf    []byte
	rxbuf    []byte
	pumping  bool
	lastFire int64 // when the transport's timer last ran

	// RxPayload counts payload bytes delivered to this host by source host.
	RxPayload []uint64
	// TxPackets and RxPackets count datagrams sent and received.
	TxPackets, RxPackets uint64
}

// Now is the current virtual time.
func (h *Host) Now() int64 { return h.sim.now }

// Sim returns the simulator the host belongs to.
func (h *Host) Sim() *Sim { return h.sim }

// Dial, Send and PostRecv call the transport and then let it transmit.
func (h *Host) Dial(remote int) (uint32, error) {
	c, err := h.T.Dial(h.sim.now, remote)
	h.pump()
	return c, err
}

// Send queues a message on the transport; see Transport.Send.
func (h *Host) Send(conn, flow uint32, length uint64, tag uint32, cookie uint64) error {
	err := h.T.Send(h.sim.now, conn, flow, length, tag, cookie)
	h.pump()
	return err
}

// PostRecv posts a receive buffer; see Transport.PostRecv.
func (h *Host) PostRecv(conn, flow uint32, capacity uint64, tag uint32, cookie uint64) error {
	err := h.T.PostRecv(h.sim.now, conn, flow, capacity, tag, cookie)
	h.pump()
	return err
}

// canSend reports whether the host pulls another datagram: some NIC port
// is idle and the ports together hold fewer than NICQueue packets per port.
// The transport picks the plane, so one backed-up port must not stall the
// others; the total bound keeps the transport, not the NIC, owning the
// backlog.
func (h *Host) canSend() bool {
	s := h.sim
	idle := false
	queued := 0
	for _, pi := range h.ports {
		p := &s.ports[pi]
		queued += p.qLen
		if !p.busy && !p.paused {
			idle = true
		}
	}
	return idle && queued < s.cfg.NICQueue*len(h.ports)
}

// pump pulls datagrams while the NIC can take them, delivers the
// transport's events to the app, and re-arms the timer.
func (h *Host) pump() {
	if h.T == nil {
		return // no transport attached: nothing to send or poll
	}
	if h.pumping {
		return // re-entered from an App callback; the outer loop continues
	}
	h.pumping = true
	s := h.sim
	for {
		progressed := false
		for h.canSend() {
			tx, ok := h.T.PollTransmit(s.now, h.txbuf)
			if !ok {
				break
			}
			progressed = true
			h.emit(tx)
		}
		for {
			ev, ok := h.T.PollEvent()
			if !ok {
				break
			}
			progressed = true
			if h.App != nil {
				h.App.OnEvent(s.now, h, ev)
			}
		}
		if !progressed {
			break
		}
	}
	h.pumping = false
	if t := h.T.NextTimeout(); t < h.timerAt {
		if t <= s.now {
			if h.lastFire == s.now {
				// The transport asked for a timeout that has passed and did
				// nothing when it ran: wake it a little later instead of
				// spinning at one instant, and count it.
				s.Stats.TimerStalls++
				t = s.now + StallBackoff
			} else {
				t = s.now
			}
		}
		h.timerAt = t
		s.schedule(event{at: t, kind: evTimer, a: int32(h.ID)})
	}
}

func (h *Host) emit(tx Tx) {
	s := h.sim
	if tx.Plane < 0 || tx.Plane >= len(h.ports) || tx.To < 0 || tx.To >= len(s.hosts) || tx.N <= 0 || tx.N > len(h.txbuf) {
		s.Stats.BadTx++
		return
	}
	pk := s.newPacket(tx.N)
	copy(pk.Hdr, h.txbuf[:tx.N])
	pk.Src, pk.Dst = int32(h.ID), int32(tx.To)
	pk.Plane = uint8(tx.Plane)
	pk.SrcPort = SrcPortBase + tx.Entropy
	pk.DstPort = DstPort
	pk.ECN = ECT0
	pk.PayloadLen = int32(tx.PayloadLen)
	pk.Size = int32(tx.N + tx.PayloadLen + s.cfg.Overhead)
	h.TxPackets++
	s.enqueue(h.ports[tx.Plane], pk)
}

// timer runs the transport's timeouts.
func (h *Host) timer(at int64) {
	if at != h.timerAt {
		return // superseded by an earlier arm
	}
	h.timerAt = math.MaxInt64
	if h.T.NextTimeout() <= h.sim.now {
		h.T.HandleTimeout(h.sim.now)
	}
	h.lastFire = h.sim.now
	h.pump()
}

// receive hands a packet to the transport, then to Sim.OnRx with what
// the transport placed.
func (h *Host) receive(pk *Packet) {
	n := len(pk.Hdr) + int(pk.PayloadLen)
	if n > len(h.rxbuf) {
		h.rxbuf = make([]byte, n)
	}
	copy(h.rxbuf, pk.Hdr)
	h.RxPackets++
	h.RxPayload[pk.Src] += uint64(pk.PayloadLen)
	pk.Placed = int32(h.T.Receive(h.sim.now, int(pk.Src), int(pk.Plane), pk.ECN, h.rxbuf[:n]))
	h.sim.observeRx(h, pk)
	h.sim.freePacket(pk)
	h.pump()
}
