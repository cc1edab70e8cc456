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
		if tx, ok := c.poll(now, buf); ok {
			e.rr = (k + 1) % len(e.order)
			c.lastSent = now
			c.stats.PacketsSent++
			c.stats.BytesSent += uint64(tx.N + tx.Payload.Len)
			return tx, true
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

// anyRoute returns a route on an active path, rotating, for unsequenced
// packets (ACKs, handshake, close): spreading them over several reverse
// entropies means one dead route stalls nothing (docs/spec.md §3.6).
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
		c.helloDue = now + cfg.HandshakeRetry
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
		return c.sendHello(buf, wire.OpHelloAck), true
	}
	if c.ackDue || (c.ackAt != 0 && now >= c.ackAt) {
		a := &c.ep.ack
		a.Header = c.hdr(wire.OpAck)
		a.RateHint = c.ep.rateHint(now)
		if c.buildAck(now, a) {
			b := a.Append(buf[:0])
			c.stats.AcksSent++
			return Transmit{Route: c.anyRoute(), N: len(b)}, true
		}
	}
	// Probes: bad paths waiting to be re-tried, then a keepalive on an idle
	// connection so a dead peer is noticed without traffic.
	for _, p := range c.paths {
		if p.state == pathProbing && p.probeAt != 0 && now >= p.probeAt && p.outstanding() < wire.SackBits {
			p.probeAt = 0
			return c.sendProbe(now, p, buf), true
		}
	}
	if now-c.lastSent >= cfg.KeepAlive && now-c.lastRecv >= cfg.KeepAlive {
		if p := c.pickPath(wire.HeaderLen, -1); p != nil {
			return c.sendProbe(now, p, buf), true
		}
	}
	return c.pollSequenced(now, buf)
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
	h.Caps = 0
	h.Planes = uint8(cfg.Planes)
	h.Paths = uint8(cfg.PathsPerPlane)
	h.MaxDgram = uint16(min(cfg.MaxDatagram, 0xffff))
	h.Addr = cfg.Addr
	b := h.Append(buf[:0])
	return Transmit{Route: c.anyRoute(), N: len(b)}
}

func (c *Conn) sendProbe(now Time, p *txPath, buf []byte) Transmit {
	pr := wire.Probe{Header: c.hdr(wire.OpProbe)}
	pr.Flags = wire.FlagAckReq
	pr.Path = p.id
	pr.PSN = p.next
	rec := p.push()
	rec.kind, rec.sent, rec.bytes = recProbe, now, wire.HeaderLen
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
// window, preferring pref, otherwise the one with the most free window —
// which weights paths by their windows, so a path trimmed by ECN or reset
// by a timeout gets less. Ties rotate.
func (c *Conn) pickPath(bytes int, pref int) *txPath {
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
	bestFree := -1 << 62
	n := len(c.paths)
	for i := 0; i < n; i++ {
		p := c.paths[(c.pathRR+i)%n]
		if free, ok := fits(p); ok && free > bestFree {
			best, bestFree = p, free
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
		return Transmit{}, false
	}
	rate := c.cc.PacingRate()
	c.paceHeld = false
	if rate > 0 && now < c.paceNext {
		c.paceHeld = true
		return Transmit{}, false
	}
	var tx Transmit
	var ok bool
	switch {
	case len(c.ctrlQ) > 0:
		tx, ok = c.sendCtrl(now, c.ctrlQ[0], -1, false, buf)
		if ok {
			c.ctrlQ[0] = nil
			c.ctrlQ = c.ctrlQ[1:]
		}
	case len(c.retxQ) > 0:
		it := c.retxQ[0]
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
	if ok && rate > 0 {
		bytes := Time(tx.N + tx.Payload.Len)
		burst := Time(c.cc.Burst()) * Second / Time(rate)
		base := max(c.paceNext, now-burst)
		c.paceNext = base + bytes*Second/Time(rate)
	}
	return tx, ok
}

func (c *Conn) sendCtrl(now Time, cp *ctrlPkt, pref int, retx bool, buf []byte) (Transmit, bool) {
	var size int
	if cp.op == wire.OpRecvReady {
		size = cp.rr.Length()
	} else {
		size = wire.NackLen
	}
	p := c.pickPath(size, pref)
	if p == nil {
		return Transmit{}, false
	}
	h := c.hdr(cp.op)
	h.Path, h.PSN = p.id, p.next
	h.Flags = wire.FlagAckReq
	if retx {
		h.Flags |= wire.FlagRetransmit
	}
	var b []byte
	if cp.op == wire.OpRecvReady {
		cp.rr.Header = h
		b = cp.rr.Append(buf[:0])
	} else {
		cp.nack.Header = h
		b = cp.nack.Append(buf[:0])
	}
	rec := p.push()
	rec.kind, rec.sent, rec.bytes, rec.ctrl = recCtrl, now, len(b), cp
	p.inflight += rec.bytes
	p.inflightPkts++
	c.inflight += rec.bytes
	p.stats.PacketsSent++
	return Transmit{Route: Route{Remote: c.remote, Plane: p.plane, Entropy: p.entropy}, N: len(b)}, true
}

// sendNewData sends the next segment of the active messages, round-robin
// across them so that flows share the connection.
func (c *Conn) sendNewData(now Time, buf []byte) (Transmit, bool) {
	for len(c.active) > 0 {
		if c.actRR >= len(c.active) {
			c.actRR = 0
		}
		s := c.active[c.actRR]
		if s.done || s.allSent() {
			c.active = append(c.active[:c.actRR], c.active[c.actRR+1:]...)
			continue
		}
		n := int(min(uint64(c.seg), s.length-s.nextOff))
		tx, ok := c.sendData(now, s, s.nextOff, n, -1, false, buf)
		if !ok {
			return tx, false
		}
		s.started = true
		s.nextOff += uint64(n)
		s.outPkts++
		if s.allSent() {
			c.active = append(c.active[:c.actRR], c.active[c.actRR+1:]...)
		} else {
			c.actRR++
		}
		return tx, true
	}
	return Transmit{}, false
}

func (c *Conn) sendData(now Time, s *sendMsg, off uint64, n int, pref int, retx bool, buf []byte) (Transmit, bool) {
	p := c.pickPath(dataHdr+n, pref)
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
	b := d.AppendHeader(buf[:0])
	rec := p.push()
	rec.kind, rec.sent, rec.bytes = recData, now, dataHdr+n
	rec.msg, rec.off, rec.n = s, off, n
	p.inflight += rec.bytes
	p.inflightPkts++
	c.inflight += rec.bytes
	p.stats.PacketsSent++
	p.stats.BytesSent += uint64(rec.bytes)
	return Transmit{Route: Route{Remote: c.remote, Plane: p.plane, Entropy: p.entropy}, N: len(b),
		Payload: PayloadRef{Cookie: s.cookie, Offset: off, Len: n}}, true
}
