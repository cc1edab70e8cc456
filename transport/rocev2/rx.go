package rocev2

// diff24 is a-b for 24-bit PSNs as a signed distance.
func diff24(a, b uint32) int32 { return int32((a-b)<<8) >> 8 }

// HandleDatagram processes a datagram from remote (the driver's handle) that
// arrived on plane with ECN codepoint ecn (3 = CE).
func (e *Endpoint) HandleDatagram(now int64, from uint32, plane uint8, ecn uint8, data []byte) Placement {
	var h Header
	pay, err := Parse(&h, data)
	if err != nil {
		e.stats.Malformed++
		return Placement{}
	}
	if h.Op == OpConnReq {
		e.connReq(from, &h)
		return Placement{}
	}
	c := e.conns[h.DstConn]
	if c == nil || c.remote != from {
		e.stats.UnknownConn++
		return Placement{}
	}
	if h.Op == OpConnRep {
		if !c.ready && c.dialer && int(h.QPs) == len(c.qps) {
			c.ready, c.peer = true, h.SrcConn
			e.emit(Event{Kind: EvConnected, Conn: c.id, Remote: c.remote})
		}
		return Placement{}
	}
	q := c.qp(h.QP)
	if q == nil {
		e.stats.Malformed++
		return Placement{}
	}
	switch h.Op {
	case OpData, OpCTS:
		return e.dataIn(now, q, &h, pay, ecn == 3)
	case OpAck:
		e.ack(now, q, h.PSN)
	case OpNak, OpRnr:
		e.stats.NaksReceived++
		e.ack(now, q, (h.PSN-1)&psnMask)
		d := diff24(h.PSN, q.una&psnMask)
		if d < 0 || uint32(d) >= q.max-q.una {
			return Placement{}
		}
		q.nxt = q.una + uint32(d)
		if h.Op == OpRnr {
			e.stats.RNRs++
			q.nextSend = now + e.cfg.RNRDelay
			q.lastProgress = now
		}
		e.activate(q)
	case OpCNP:
		e.stats.CNPsReceived++
		if q.rate != nil {
			q.rate.OnCNP(now)
		}
	}
	return Placement{}
}

func (e *Endpoint) connReq(from uint32, h *Header) {
	if !e.cfg.Listen || int(h.QPs) != e.cfg.QPsPerConn {
		e.stats.UnknownConn++
		return
	}
	key := [2]uint32{from, h.SrcConn}
	if id, ok := e.accepted[key]; ok {
		if c := e.conns[id]; c != nil {
			e.pushCtl(ctlItem{c: c, op: OpConnRep})
		}
		return
	}
	if len(e.conns) >= e.cfg.MaxConns {
		return
	}
	c := e.newConn(from, false)
	c.peer, c.ready = h.SrcConn, true
	e.accepted[key] = c.id
	e.emit(Event{Kind: EvAccepted, Conn: c.id, Remote: from})
	e.pushCtl(ctlItem{c: c, op: OpConnRep})
}

// ack retires every PSN up to and including psn.
func (e *Endpoint) ack(now int64, q *qp, psn uint32) {
	d := diff24(psn, q.una&psnMask)
	if d < 0 || uint32(d) >= q.max-q.una {
		return
	}
	k := int(d) + 1
	for i := 0; i < k; i++ {
		p := &q.descs[q.descHead+i]
		if p.last {
			m := p.msg
			m.stripes--
			if m.stripes == 0 && !m.done {
				m.done = true
				if !m.cts {
					e.emit(Event{Kind: EvSendDone, Conn: q.c.id, Remote: q.c.remote, Flow: m.flow, Cookie: m.cookie, Len: m.length, Tag: m.tag})
				}
			}
		}
		*p = pktDesc{}
	}
	q.descHead += k
	if q.descHead > 1024 && q.descHead*2 > len(q.descs) {
		q.descs = append(q.descs[:0], q.descs[q.descHead:]...)
		q.descHead = 0
	}
	q.una += uint32(k)
	if int32(q.nxt-q.una) < 0 {
		q.nxt = q.una
	}
	q.retries = 0
	q.lastProgress = now
	c := q.c
	for len(c.msgs) > 0 && c.msgs[0].done {
		c.msgs[0] = nil
		c.msgs = c.msgs[1:]
	}
}

func (e *Endpoint) dataIn(now int64, q *qp, h *Header, pay int, ce bool) Placement {
	if ce && e.cfg.DCQCN && now-q.lastCNP >= e.cfg.CC.CNPInterval && !q.cnpQueue {
		q.lastCNP = now
		q.cnpQueue = true
		e.pushCtl(ctlItem{c: q.c, q: q, op: OpCNP})
	}
	d := diff24(h.PSN, q.epsn&psnMask)
	switch {
	case d > 0:
		e.stats.OutOfOrder++
		if !q.nakSent {
			q.nakSent = true
			e.stats.NaksSent++
			e.pushCtl(ctlItem{c: q.c, q: q, op: OpNak, psn: q.epsn})
		}
		return Placement{}
	case d < 0:
		e.stats.Duplicates++
		e.queueAck(q)
		return Placement{}
	}
	if h.Op == OpCTS {
		e.onCTS(q.c, h.Flow, h.Msg)
		e.inOrder(q, h)
		return Placement{}
	}
	f := e.flow(q.c, h.Flow)
	idx := int(h.Msg - f.recvBase)
	if idx < 0 || idx >= len(f.recvs) {
		// Receiver not ready: no buffer posted for this message yet. Every
		// attempt at the expected PSN gets an RNR (the sender spaces them by
		// RNRDelay); the packets behind it are dropped without NAKs.
		q.nakSent = true
		e.pushCtl(ctlItem{c: q.c, q: q, op: OpRnr, psn: q.epsn})
		return Placement{}
	}
	r := f.recvs[idx]
	pl := Placement{}
	if !r.seen {
		r.seen, r.msgLen, r.tag = true, h.MsgLen, h.Tag
		if h.MsgLen > r.cap {
			r.err = ErrTooLarge
		}
	}
	if r.err == nil {
		pl = Placement{OK: true, Cookie: r.cookie, Offset: h.Offset, Len: pay}
		e.stats.PayloadPlaced += uint64(pay)
	}
	r.got += uint64(pay)
	if r.got == r.msgLen {
		r.done = true
	}
	for len(f.recvs) > 0 && f.recvs[0].done {
		r0 := f.recvs[0]
		e.emit(Event{Kind: EvRecvDone, Conn: q.c.id, Remote: q.c.remote, Flow: h.Flow, Cookie: r0.cookie, Len: r0.msgLen, Tag: r0.tag, Err: r0.err})
		f.recvs[0] = nil
		f.recvs = f.recvs[1:]
		f.recvBase++
	}
	e.inOrder(q, h)
	return pl
}

// inOrder accepts the expected PSN and acknowledges as the responder's
// coalescing allows.
func (e *Endpoint) inOrder(q *qp, h *Header) {
	q.epsn++
	q.nakSent = false
	q.unacked++
	if h.Flags&FlagAckReq != 0 || q.unacked >= e.cfg.AckEvery {
		e.queueAck(q)
	}
}

func (e *Endpoint) queueAck(q *qp) {
	if !q.ackQueue {
		q.ackQueue = true
		e.pushCtl(ctlItem{c: q.c, q: q, op: OpAck})
	}
}
