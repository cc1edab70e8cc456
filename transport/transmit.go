package transport

import "github.com/metaroce/metaroce/transport/wire"

// PollTransmit writes the next datagram the endpoint wants to send into buf
// (which must hold at least MaxDatagram bytes for control packets, and
// DataHeaderLen for DATA whose payload the driver appends) and says where it
// goes. It returns false when nothing may be sent now; NextTimeout then says
// when to ask again, unless a datagram or a user call arrives first.
//
// Connections are served round-robin, one datagram per turn, so that one
// busy connection cannot starve the others' ACKs.
func (e *Endpoint) PollTransmit(now Time, buf []byte) (Transmit, bool) {
	if n := len(e.ctrl); n > 0 {
		o := &e.ctrl[n-1]
		var b []byte
		if o.isClose {
			b = o.close.Append(buf[:0])
		} else {
			b = o.nack.Append(buf[:0])
		}
		tx := Transmit{Route: o.route, N: len(b)}
		e.ctrl = e.ctrl[:n-1]
		return tx, true
	}
	for i := 0; i < len(e.order); i++ {
		k := (e.rr + i) % len(e.order)
		c := e.order[k]
		ackAt, pace, tail := c.ackAt, c.paceTimer(), c.tailDue
		tx, ok := c.poll(now, buf)
		if ok {
			e.touch(c)
			e.rr = (k + 1) % len(e.order)
			c.lastSent = now
			c.stats.PacketsSent++
			c.stats.BytesSent += uint64(tx.N + tx.Payload.Len)
			return tx, true
		}
		// A poll that sends nothing changes no deadline but these
		// three (a tail probe no longer wanted gets its timer back).
		if c.ackAt != ackAt || c.paceTimer() != pace || c.tailDue != tail {
			e.touch(c)
		}
	}
	return Transmit{}, false
}

// ctrlClose queues an unsequenced CLOSE (or its reply) for c at endpoint
// level, so it still leaves after c is forgotten.
func (e *Endpoint) ctrlClose(c *Conn, reply bool) {
	if len(e.ctrl) >= 1024 {
		return
	}
	o := ctrlOut{route: c.anyRoute(), isClose: true}
	o.close.DstConn, o.close.Token = c.peerConn, c.peerTok
	o.close.Reason = c.closeRsn
	if reply {
		o.close.Flags = wire.FlagReply
		o.close.Reason = wire.CloseNormal
	}
	e.ctrl = append(e.ctrl, o)
}

// ctrlCloseEveryPath queues a CLOSE of c (reason c.closeRsn) on each of
// c's paths, once: the CLOSE of a connection given up as dead is not
// retransmitted (nothing will acknowledge it), and some of its routes
// may be the dead ones.
func (e *Endpoint) ctrlCloseEveryPath(c *Conn) {
	for _, p := range c.paths {
		if len(e.ctrl) >= 1024 {
			return
		}
		o := ctrlOut{route: Route{Remote: c.remote, Plane: p.plane, Entropy: p.entropy}, isClose: true}
		o.close.DstConn, o.close.Token = c.peerConn, c.peerTok
		o.close.Reason = c.closeRsn
		e.ctrl = append(e.ctrl, o)
	}
}

// anyRoute returns a route on an active path, rotating, for unsequenced
// packets (ACKs, handshake, close): spreading them over several reverse
// entropies means one dead route stalls nothing (docs/spec.md §3.6). With
// no path active it rotates over all of them.
func (c *Conn) anyRoute() Route {
	n := len(c.paths)
	for i := 0; i < n; i++ {
		c.ackRR = (c.ackRR + 1) % n
		p := c.paths[c.ackRR]
		if p.state == pathActive {
			return Route{Remote: c.remote, Plane: p.plane, Entropy: p.entropy}
		}
	}
	if n == 0 {
		return Route{Remote: c.remote}
	}
	// No path is active: rotate over the probing paths' fresh entropies.
	// The scan above went full circle, back to the same path, and every
	// ACK left on one route, which could be as dead as the routes the
	// paths had left (a simulated failure lost a peer's answers to the
	// probes that would have revived the connection that way).
	c.ackRR = (c.ackRR + 1) % n
	p := c.paths[c.ackRR]
	return Route{Remote: c.remote, Plane: p.plane, Entropy: p.entropy}
}

func (c *Conn) hdr(op wire.Opcode) wire.Header {
	return wire.Header{Op: op, DstConn: c.peerConn, Token: c.peerTok}
}

// poll produces c's next datagram, in priority order: handshake, close,
// ACKs, probes, then sequenced packets (control, retransmissions, new data)
// subject to pacing and windows.
func (c *Conn) poll(now Time, buf []byte) (Transmit, bool) {
	cfg := &c.ep.cfg
	switch c.state {
	case stateDialing:
		if now < c.helloDue {
			return Transmit{}, false
		}
		c.helloDue = now + c.helloInterval()
		c.helloTries++
		c.noteHandshakeSent(now)
		return c.sendHello(buf, wire.OpHello), true
	case stateClosing:
		// Acknowledgements first: the peer completes its sends from them.
		if c.ackDue || (c.ackAt != 0 && now >= c.ackAt) {
			a := &c.ep.ack
			a.Header = c.hdr(wire.OpAck)
			a.RateHint = 0
			if c.buildAck(now, a) {
				b := a.Append(buf[:0])
				c.stats.AcksSent++
				return Transmit{Route: c.anyRoute(), N: len(b)}, true
			}
		}
		if now < c.closeDue {
			return Transmit{}, false
		}
		c.closeTries++
		c.closeDue = now + cfg.HandshakeRetry
		cl := wire.Close{Header: c.hdr(wire.OpClose), Reason: c.closeRsn}
		b := cl.Append(buf[:0])
		return Transmit{Route: c.anyRoute(), N: len(b)}, true
	case stateClosed:
		return Transmit{}, false
	}
	if c.helloAck {
		c.helloAck = false
		c.noteHandshakeSent(now)
		return c.sendHello(buf, wire.OpHelloAck), true
	}
	if c.ackDue || (c.ackAt != 0 && now >= c.ackAt) {
		// A sequenced packet that can leave now carries the
		// acknowledgement (docs/spec.md §3.1); only what it could not
		// carry, or all of it when nothing can leave, goes in an ACK.
		// One that could carry none (a full DATA segment) delays the
		// ACK by that one packet only: ackFirst sends the ACK next.
		// An idle answer (idleDue) goes in an ACK of its own, the only
		// packet that carries FlagIdle.
		if !c.ackFirst && !c.idleDue {
			if tx, ok := c.pollSequenced(now, buf); ok {
				c.ackFirst = c.ackDue || (c.ackAt != 0 && now >= c.ackAt)
				return tx, true
			}
		}
		c.ackFirst = false
		a := &c.ep.ack
		a.Header = c.hdr(wire.OpAck)
		a.RateHint = c.ep.rateHint(now, c)
		if c.idleDue {
			a.Flags |= wire.FlagIdle
			c.idleDue = false
		}
		if c.buildAck(now, a) {
			b := a.Append(buf[:0])
			c.stats.AcksSent++
			return Transmit{Route: c.anyRoute(), N: len(b)}, true
		}
	}
	// Probes: bad paths waiting to be re-tried, then a keepalive on an idle
	// connection so a dead peer is noticed without traffic.
	for _, p := range c.paths {
		if c.probing == 0 {
			break
		}
		if p.state == pathProbing && p.probeAt != 0 && now >= p.probeAt && p.outstanding() < wire.SackBits {
			p.probeAt = 0
			return c.sendProbe(now, p, buf), true
		}
	}
	if c.tailDue {
		if p := c.takeTailProbe(now); p != nil {
			c.stats.TailProbes++
			tx := c.sendProbe(now, p, buf)
			p.rec(p.next - 1).tail = true
			return tx, true
		}
	}
	if now-c.lastSent >= cfg.KeepAlive && now-c.lastRecv >= cfg.KeepAlive {
		if p := c.pickPath(now, wire.HeaderLen, -1); p != nil {
			return c.sendProbe(now, p, buf), true
		}
	}
	return c.pollSequenced(now, buf)
}

// helloInterval is the wait before the next HELLO: 4 × InitialRTT after the
// first, doubling with every retry up to HandshakeRetry. A fixed 50 ms
// retry made one lost HELLO on a 10 µs fabric delay a connection by 5000
// RTTs.
func (c *Conn) helloInterval() Time {
	cfg := &c.ep.cfg
	t := 4 * cfg.InitialRTT
	for i := 0; i < c.helloTries && t < cfg.HandshakeRetry; i++ {
		t *= 2
	}
	return min(t, cfg.HandshakeRetry)
}

func (c *Conn) sendHello(buf []byte, op wire.Opcode) Transmit {
	cfg := &c.ep.cfg
	h := &c.ep.hello
	h.Header = wire.Header{Op: op}
	if op == wire.OpHelloAck {
		h.DstConn, h.Token = c.peerConn, c.peerTok
	}
	h.SrcConn = uint32(c.id)
	h.SrcTok = c.localTok
	h.Caps = wire.CapFwdDelay
	h.Planes = uint8(cfg.Planes)
	h.Paths = uint8(cfg.PathsPerPlane)
	h.MaxDgram = uint16(min(cfg.MaxDatagram, 0xffff))
	h.Addr = cfg.Addr
	b := h.Append(buf[:0])
	return Transmit{Route: c.anyRoute(), N: len(b)}
}

// takeTailProbe returns the first path whose tail-probe timer expired and
// that still wants the probe (docs/spec.md §3.2), clearing its mark; marks
// of paths that no longer want one (an acknowledgement or a new packet
// came meanwhile) are cleared too, which gives them their timer back.
func (c *Conn) takeTailProbe(now Time) *txPath {
	cfg := &c.ep.cfg
	var pick *txPath
	c.tailDue = false
	for _, p := range c.paths {
		if !p.tailDue {
			continue
		}
		if pick == nil && p.tailProbeAt(cfg) <= now {
			pick = p
			p.tailDue = false
			continue
		}
		if pick == nil {
			p.tailDue = false
			continue
		}
		c.tailDue = true // for the next poll
	}
	return pick
}

func (c *Conn) sendProbe(now Time, p *txPath, buf []byte) Transmit {
	pr := wire.Probe{Header: c.hdr(wire.OpProbe)}
	pr.Flags = wire.FlagAckReq
	pr.Path = p.id
	pr.PSN = p.next
	// A path that is not active probes a route that is probably dead: an
	// acknowledgement it carried would mostly vanish with it, and count as
	// sent. Tail probes and keepalives of active paths carry one.
	if p.state == pathActive {
		c.piggyback(now, &pr.Piggyback)
	}
	rec := p.push(now, recProbe, true)
	rec.bytes = wire.HeaderLen
	p.inflight += rec.bytes
	p.inflightPkts++
	c.inflight += rec.bytes
	p.stats.Probes++
	p.stats.PacketsSent++
	b := pr.Append(buf[:0])
	return Transmit{Route: Route{Remote: c.remote, Plane: p.plane, Entropy: p.entropy}, N: len(b)}
}

// pickPath chooses the path for a sequenced packet of size bytes
// (docs/spec.md §3.6): an active path with room in its window and its PSN
// window, preferring pref, otherwise — among the paths whose plane's NIC
// port is free now (Endpoint.planeFree), if any — the one with the most
// free window, which weights paths by their windows, so a path trimmed by
// ECN or reset by a timeout gets less. Ties rotate.
func (c *Conn) pickPath(now Time, bytes int, pref int) *txPath {
	if c.inflight > 0 && c.inflight+bytes > c.cc.ConnWindow() {
		return nil
	}
	fits := func(p *txPath) (int, bool) {
		if p.state != pathActive || p.outstanding() >= wire.SackBits {
			return 0, false
		}
		free := c.cc.PathWindow(int(p.id)) - p.inflight
		if p.inflight > 0 && free < bytes {
			return 0, false
		}
		return free, true
	}
	if pref >= 0 && pref < len(c.paths) {
		if _, ok := fits(c.paths[pref]); ok {
			return c.paths[pref]
		}
	}
	var best *txPath
	bestFree, bestBusy := -1<<62, true
	n := len(c.paths)
	pf := c.ep.planeFree
	for i := 0; i < n; i++ {
		p := c.paths[(c.pathRR+i)%n]
		free, ok := fits(p)
		if !ok {
			continue
		}
		busy := pf != nil && pf[p.plane] > now
		if best == nil || (bestBusy && !busy) || (busy == bestBusy && free > bestFree) {
			best, bestFree, bestBusy = p, free, busy
		}
	}
	if best != nil {
		c.pathRR = (int(best.id) + 1) % n
	}
	return best
}

// pollSequenced sends one sequenced packet if pacing and windows allow.
func (c *Conn) pollSequenced(now Time, buf []byte) (Transmit, bool) {
	if len(c.ctrlQ) == 0 && len(c.retxQ) == 0 && len(c.active) == 0 {
		c.backlogFrom = 0
		return Transmit{}, false
	}
	if c.backlogFrom == 0 {
		c.backlogFrom = now
	}
	rate := c.cc.PacingRate()
	c.repace(rate)
	c.paceHeld = false
	if rate > 0 && now < c.paceNext {
		c.paceHeld = true
		return Transmit{}, false
	}
	var tx Transmit
	var ok bool
	switch {
	case len(c.ctrlQ) > 0:
		// Control packets rotate over the paths rather than follow the
		// freest window: a lost RECV_READY is then found by the gap the
		// next one on its path leaves, within a few posts. Picked by
		// free window, they all avoided the one path still holding the
		// lost packet, which only its RTO (≥ MinRTO) recovered, and the
		// flow, matching receives in order, stalled that long.
		c.ctrlRR = (c.ctrlRR + 1) % max(len(c.paths), 1)
		tx, ok = c.sendCtrl(now, c.ctrlQ[0], c.ctrlRR, false, buf)
		if ok {
			c.ctrlQ[0] = nil
			c.ctrlQ = c.ctrlQ[1:]
		}
	case len(c.retxQ) > 0:
		it := c.retxQ[0]
		if it.kind == recCtrl && c.goneFlowReady(it.ctrl) {
			c.retxQ[0] = retxItem{}
			c.retxQ = c.retxQ[1:]
			return c.pollSequenced(now, buf)
		}
		if it.kind == recCtrl {
			tx, ok = c.sendCtrl(now, it.ctrl, it.pref, true, buf)
		} else if it.msg.done {
			c.retxQ = c.retxQ[1:]
			return c.pollSequenced(now, buf)
		} else {
			tx, ok = c.sendData(now, it.msg, it.off, it.n, it.pref, true, buf)
		}
		if ok {
			c.retxQ[0] = retxItem{}
			c.retxQ = c.retxQ[1:]
			c.stats.Retransmits++
		}
	default:
		tx, ok = c.sendNewData(now, buf)
	}
	if ok {
		c.ep.planeSent(now, tx.Route.Plane, tx.N+tx.Payload.Len)
	}
	if ok && rate > 0 {
		base := c.paceBase(now, rate)
		bytes := uint64(tx.N + tx.Payload.Len)
		gap := paceSpan(bytes, rate)
		if c.cc.Hinted() && gap > 0 {
			// Senders paced at the same share that started together
			// stay in step, and their packets reach the receiver's
			// port together: 63 senders put 63 packets in its queue
			// each interval. A gap drawn from [⅞, 1⅛) of the nominal
			// one, the same on average, spreads them out (±1/2 made
			// the sum of the senders' arrivals a random walk that
			// itself built a queue up to the marking threshold;
			// ±1/16 left the 63 senders of the simulator's incast
			// too close to step).
			if q := gap / 4; q > 0 {
				gap = gap - q/2 + Time(c.ep.rng.Int64N(int64(q)))
			}
		}
		c.paceFrom, c.paceBytes, c.paceRate = base, bytes, rate
		c.paceNext = base + gap
	}
	return tx, ok
}

// paceBase is the time the gap of a paced packet sent now at rate counts
// from: the time it was due (paceNext), or, when that passed, no further
// back than the burst credit allows (docs/spec.md §3.5). The first paced
// packet earns no credit: the senders of an incast start together. A
// sender whose backlog was first seen at or before the packet was due
// (backlogFrom, cleared whenever an attempt finds nothing queued) was held
// by the pacer or its window all along, and this turn came late (a
// software driver's event loop turns tens of µs apart): it may make up
// that lateness, up to the controller's catch-up span and bytes (the
// packet that crosses the bytes may end past them, as with the burst).
// A sender whose queues were found empty since gets the burst only.
func (c *Conn) paceBase(now Time, rate uint64) Time {
	if c.paceNext == 0 {
		return now
	}
	burst := paceSpan(uint64(max(c.cc.Burst(), 0)), rate)
	if span, most := c.cc.CatchUp(); span > 0 && c.backlogFrom != 0 && c.backlogFrom <= c.paceNext {
		burst = max(burst, min(Time(span), paceSpan(uint64(most), rate)))
	}
	return max(c.paceNext, now-burst)
}

func (c *Conn) sendCtrl(now Time, cp *ctrlPkt, pref int, retx bool, buf []byte) (Transmit, bool) {
	var size int
	if cp.op == wire.OpRecvReady {
		size = cp.rr.Length()
	} else {
		size = wire.NackLen
	}
	p := c.pickPath(now, size, pref)
	if p == nil {
		return Transmit{}, false
	}
	h := c.hdr(cp.op)
	h.Path, h.PSN = p.id, p.next
	// A RECV_READY asks for no immediate ACK (docs/spec.md §3.1): the
	// peer acknowledges it in its next ACK or piggybacked on the DATA it
	// releases, within the ACK delay. A retransmission and a NACK ask.
	if cp.op != wire.OpRecvReady || retx {
		h.Flags = wire.FlagAckReq
	}
	if retx {
		h.Flags |= wire.FlagRetransmit
	}
	var b []byte
	if cp.op == wire.OpRecvReady {
		cp.rr.Header = h
		c.piggyback(now, &cp.rr.Piggyback)
		b = cp.rr.Append(buf[:0])
	} else {
		cp.nack.Header = h
		c.piggyback(now, &cp.nack.Piggyback)
		b = cp.nack.Append(buf[:0])
	}
	rec := p.push(now, recCtrl, h.Flags&wire.FlagAckReq != 0)
	rec.bytes, rec.ctrl = len(b), cp
	p.inflight += rec.bytes
	p.inflightPkts++
	c.inflight += rec.bytes
	p.stats.PacketsSent++
	return Transmit{Route: Route{Remote: c.remote, Plane: p.plane, Entropy: p.entropy}, N: len(b)}, true
}

// sendNewData sends the next segment of the head message of the next
// active flow: flows share the connection round-robin, and within a flow
// messages go one after another, in matching order (docs/spec.md §3.4).
func (c *Conn) sendNewData(now Time, buf []byte) (Transmit, bool) {
	for len(c.active) > 0 {
		if c.actRR >= len(c.active) {
			c.actRR = 0
		}
		f := c.active[c.actRR]
		for len(f.txq) > 0 && (f.txq[0].done || f.txq[0].allSent()) {
			f.txq[0] = nil
			f.txq = f.txq[1:]
		}
		if len(f.txq) == 0 {
			c.dropActive()
			continue
		}
		s := f.txq[0]
		n := int(min(uint64(c.seg), s.length-s.nextOff))
		tx, ok := c.sendData(now, s, s.nextOff, n, -1, false, buf)
		if !ok {
			return tx, false
		}
		s.started = true
		s.nextOff += uint64(n)
		s.outPkts++
		if s.allSent() {
			f.txq[0] = nil
			f.txq = f.txq[1:]
		}
		if len(f.txq) == 0 {
			c.dropActive()
		} else {
			c.actRR++
		}
		return tx, true
	}
	return Transmit{}, false
}

// dropActive removes the flow at actRR from the active list.
func (c *Conn) dropActive() {
	f := c.active[c.actRR]
	f.inActive = false
	copy(c.active[c.actRR:], c.active[c.actRR+1:])
	c.active[len(c.active)-1] = nil
	c.active = c.active[:len(c.active)-1]
	c.reapFlow(f)
}

func (c *Conn) sendData(now Time, s *sendMsg, off uint64, n int, pref int, retx bool, buf []byte) (Transmit, bool) {
	p := c.pickPath(now, dataHdr+n, pref)
	if p == nil {
		return Transmit{}, false
	}
	d := &c.ep.data
	d.Header = c.hdr(wire.OpData)
	d.Path, d.PSN = p.id, p.next
	if retx {
		d.Flags |= wire.FlagRetransmit | wire.FlagAckReq
	}
	if off+uint64(n) >= s.length {
		d.Flags |= wire.FlagAckReq
	}
	d.Flow, d.Msg, d.Index = s.flow.id, s.msg, s.index
	d.Timestamp = nowTS(now)
	d.Offset, d.MsgLen = off, s.length
	d.HasPiggy = false
	if n+wire.PiggyLen <= c.seg {
		// Only where the acknowledgement fits the peer's datagram
		// size: a full segment leaves it to an ACK.
		c.piggyback(now, &d.Piggyback)
	}
	b := d.AppendHeader(buf[:0])
	rec := p.push(now, recData, d.Flags&wire.FlagAckReq != 0)
	rec.bytes = dataHdr + n
	rec.msg, rec.off, rec.n = s, off, n
	p.inflight += rec.bytes
	p.inflightPkts++
	c.inflight += rec.bytes
	p.stats.PacketsSent++
	p.stats.BytesSent += uint64(rec.bytes)
	return Transmit{Route: Route{Remote: c.remote, Plane: p.plane, Entropy: p.entropy}, N: len(b),
		Payload: PayloadRef{Cookie: s.cookie, Offset: off, Len: n}}, true
}

// goneFlowReady reports whether cp announces a receive group of a flow
// whose state is gone (released or aborted): a lost copy of it is not sent
// again, since the group completed or failed already, and a late
// announcement could match a send of the peer to a buffer that is the
// caller's again (docs/spec.md §3.4).
func (c *Conn) goneFlowReady(cp *ctrlPkt) bool {
	return cp.op == wire.OpRecvReady && c.flows[cp.rr.Flow] == nil && c.isReleased(cp.rr.Flow)
}
