package rocev2

// PollTransmit writes the next datagram into buf (which must hold at least
// DataHeaderLen bytes): control packets first, then DATA from the active
// QPs in round-robin order, each only when its DCQCN pacer allows.
func (e *Endpoint) PollTransmit(now int64, buf []byte) (Transmit, bool) {
	for e.ctlHead < len(e.ctl) {
		it := e.ctl[e.ctlHead]
		e.ctl[e.ctlHead] = ctlItem{}
		e.ctlHead++
		if e.ctlHead == len(e.ctl) {
			e.ctl, e.ctlHead = e.ctl[:0], 0
		}
		if tx, ok := e.control(it, buf); ok {
			return tx, true
		}
	}
	n := len(e.active)
	for i := 0; i < n; i++ {
		if e.rr >= len(e.active) {
			e.rr = 0
		}
		q := e.active[e.rr]
		if q.c.closed || !q.hasData() {
			// Drop it from the active set; order of the rest is kept.
			q.inActive = false
			e.active = append(e.active[:e.rr], e.active[e.rr+1:]...)
			continue
		}
		e.rr++
		if !q.c.ready {
			continue
		}
		if q.nextSend > now {
			if !q.paceArmed {
				q.paceArmed = true
				e.arm(timer{at: q.nextSend, q: q, kind: tmPace})
			}
			continue
		}
		return e.data(now, q, buf), true
	}
	return Transmit{}, false
}

func (e *Endpoint) route(c *conn, q *qp) Route {
	r := Route{Remote: c.remote}
	if q != nil {
		r.Plane, r.Entropy = q.plane, q.entropy
	} else if len(c.qps) > 0 {
		r.Plane, r.Entropy = c.qps[0].plane, c.qps[0].entropy
	}
	return r
}

func (e *Endpoint) control(it ctlItem, buf []byte) (Transmit, bool) {
	c := it.c
	if c.closed {
		return Transmit{}, false
	}
	h := Header{Op: it.op, DstConn: c.peer}
	switch it.op {
	case OpConnReq:
		if c.ready {
			return Transmit{}, false
		}
		h.DstConn, h.SrcConn, h.QPs = 0, c.id, uint32(len(c.qps))
	case OpConnRep:
		h.SrcConn, h.QPs = c.id, uint32(len(c.qps))
	case OpAck:
		q := it.q
		q.ackQueue = false
		q.unacked = 0
		h.QP, h.PSN = q.idx, (q.epsn-1)&psnMask
	case OpNak, OpRnr:
		h.QP, h.PSN = it.q.idx, it.psn&psnMask
	case OpCNP:
		it.q.cnpQueue = false
		h.QP = it.q.idx
		e.stats.CNPsSent++
	}
	n := h.Put(buf)
	return Transmit{Route: e.route(c, it.q), N: n}, true
}

// data sends the packet at q.nxt: a retransmission if it was sent before,
// otherwise the next piece of the head stripe.
func (e *Endpoint) data(now int64, q *qp, buf []byte) Transmit {
	var d pktDesc
	if q.nxt != q.max {
		d = q.descs[q.descHead+int(q.nxt-q.una)]
		e.stats.Retransmits++
	} else {
		s := &q.pending[q.pendHead]
		n := min(uint64(e.cfg.MTU), s.end-s.off)
		d = pktDesc{msg: s.msg, off: s.off, n: uint32(n)}
		s.off += n
		if s.off == s.end {
			d.last = true
			q.pending[q.pendHead] = stripe{}
			q.pendHead++
			if q.pendHead == len(q.pending) {
				q.pending, q.pendHead = q.pending[:0], 0
			}
		}
		if q.una == q.max {
			q.lastProgress = now
		}
		q.descs = append(q.descs, d)
		q.max++
	}
	psn := q.nxt
	q.nxt++
	h := Header{Op: OpData, QP: q.idx, DstConn: q.c.peer, PSN: psn & psnMask,
		Flow: d.msg.flow, Msg: d.msg.seq, Offset: d.off, MsgLen: d.msg.length, Tag: d.msg.tag}
	if d.msg.cts {
		h.Op = OpCTS
	}
	if d.last || q.nxt == q.max && !q.hasData() {
		h.Flags |= FlagAckReq
	}
	n := h.Put(buf)
	if !d.msg.cts {
		e.stats.DataSent++
	}
	if q.rate != nil {
		size := n + int(d.n)
		r := q.rate.Rate(now)
		if q.nextSend < now {
			q.nextSend = now
		}
		q.nextSend += int64(float64(size) * 1e9 / float64(r))
		q.rate.OnSent(now, size)
	}
	e.armRTO(q, q.lastProgress+e.cfg.RTO())
	return Transmit{Route: e.route(q.c, q), N: n, PayloadLen: int(d.n)}
}
