package transport

import (
	"slices"

	"github.com/metaroce/metaroce/transport/wire"
)

// HandleDatagram processes one received datagram. For a DATA packet whose
// payload is to be placed, the returned Placement says where; everything
// else is acted on inside the core. Malformed, forged, stale and duplicate
// input is dropped and counted (Counters) and acted on no further (docs/spec.md
// §3), except that a stale or duplicate DATA of a known connection still
// counts as the peer's activity (the time of its last DATA, which the rate
// hints use): a retransmitted copy shows the peer is sending.
//
// now is the datagram's arrival time, and must not be earlier than its
// arrival: the acknowledgement's delay field counts from it (§2.5), and a
// sender subtracts that delay from its RTT sample, so an arrival time taken
// before the read that returned the datagram makes the peer's samples
// short by as much (down to nanoseconds on a loaded host). A driver that
// reads in batches takes the time after each read.
func (e *Endpoint) HandleDatagram(now Time, d Datagram) Placement {
	h := &e.hdr
	if _, err := wire.ParseHeader(h, d.Data); err != nil {
		e.drop(DropMalformed)
		return Placement{}
	}
	if h.Op == wire.OpHello {
		e.onHello(now, d)
		return Placement{}
	}
	if h.Op == wire.OpNack && h.DstConn == 0 {
		e.onUnknownConnNack(now, d)
		return Placement{}
	}
	c := e.conns[ConnID(h.DstConn)]
	if c == nil {
		e.drop(DropUnknownConn)
		if h.Op.Sequenced() {
			e.nackUnknown(now, d, h)
		}
		return Placement{}
	}
	if h.Token != c.localTok {
		e.drop(DropBadToken)
		return Placement{}
	}
	e.touch(c)
	if c.accepted {
		c.onHandshakeAnswer(now)
	}
	switch h.Op {
	case wire.OpHelloAck:
		hl := &e.hello
		if _, err := wire.ParseHello(hl, d.Data); err != nil {
			e.drop(DropMalformed)
			return Placement{}
		}
		c.lastRecv = now
		if c.state == stateDialing {
			c.onHandshakeAnswer(now)
			// Acknowledge the HELLO_ACK at once: the ACK gives the
			// responder its handshake RTT sample (minrtt.go).
			c.hintDue, c.ackDue = true, true
			c.established(hl)
			c.deadline = 0
			e.emit(Event{Kind: EvConnected, Conn: c.id, Remote: c.remote})
		}
		return Placement{}
	case wire.OpAck:
		a := &e.ack
		if _, err := wire.ParseAck(a, d.Data); err != nil {
			e.drop(DropMalformed)
			return Placement{}
		}
		c.lastRecv = now
		c.onAck(now, a)
		return Placement{}
	case wire.OpClose:
		cl := &e.close
		if _, err := wire.ParseClose(cl, d.Data); err != nil {
			e.drop(DropMalformed)
			return Placement{}
		}
		c.lastRecv = now
		c.onPeerClose(now, cl)
		return Placement{}
	}
	if c.state != stateEstablished && c.state != stateClosing {
		e.drop(DropStale)
		return Placement{}
	}
	// Sequenced packets: parse the whole packet before its PSN counts, so a
	// malformed packet cannot consume a sequence number.
	var ts uint32
	var pg *wire.Piggyback
	switch h.Op {
	case wire.OpData:
		if _, err := wire.ParseData(&e.data, d.Data); err != nil {
			e.drop(DropMalformed)
			return Placement{}
		}
		ts = e.data.Timestamp
		pg = &e.data.Piggyback
	case wire.OpRecvReady:
		if _, err := wire.ParseRecvReady(&e.rr2, d.Data); err != nil {
			e.drop(DropMalformed)
			return Placement{}
		}
		pg = &e.rr2.Piggyback
	case wire.OpNack:
		if _, err := wire.ParseNack(&e.nack, d.Data); err != nil {
			e.drop(DropMalformed)
			return Placement{}
		}
		pg = &e.nack.Piggyback
	case wire.OpProbe:
		if _, err := wire.ParseProbe(&e.probe, d.Data); err != nil {
			e.drop(DropMalformed)
			return Placement{}
		}
		pg = &e.probe.Piggyback
	default:
		// One-sided Write is reserved in version 1.
		e.drop(DropMalformed)
		return Placement{}
	}
	c.lastRecv = now
	if pg.HasPiggy {
		// The piggybacked acknowledgement goes first (docs/spec.md
		// §3.1): it counts even when the packet itself is a duplicate,
		// and a rate hint it carries paces the DATA that a RECV_READY
		// carrying it releases, as a separate ACK sent before it would.
		c.onPiggy(now, pg)
		if c.state == stateClosed {
			return Placement{}
		}
	}
	if c.state == stateClosing && h.Op == wire.OpData {
		// Close failed every posted receive, so DATA arriving now is
		// thrown away: acknowledging it would complete the peer's send
		// for data that never landed. It is neither recorded nor
		// acknowledged, and the peer's send fails with ErrClosed when
		// our CLOSE arrives (docs/spec.md §3.3). A copy of DATA of a
		// group that completed before the close is acknowledged as a
		// stale duplicate: its data did land.
		if !c.completedBeforeClose(&e.data) {
			e.drop(DropClosing)
			return Placement{}
		}
		if c.onSequenced(now, h, d.ECN, ts, true) {
			e.drop(DropStale)
		}
		return Placement{}
	}
	if h.Op == wire.OpData && c.discardedByAbort(&e.data) {
		e.drop(DropAborted)
		return Placement{}
	}
	c.stats.PacketsRecv++
	if d.ECN == CE {
		c.stats.CERecv++
	}
	if h.Op == wire.OpData && now >= e.hintSkip {
		e.hintRx++
		e.hintBytes += uint64(len(d.Data))
		if d.ECN == CE {
			e.hintCE++
		}
	}
	if !c.onSequenced(now, h, d.ECN, ts, h.Op == wire.OpData) || c.state == stateClosing {
		// A closing connection still acknowledges control packets,
		// and DATA that arrived before the close (above), so that the
		// peer's sends whose data arrived complete, but acts on none.
		return Placement{}
	}
	switch h.Op {
	case wire.OpData:
		return c.place(now, &e.data)
	case wire.OpRecvReady:
		c.onRecvReady(now, &e.rr2)
	case wire.OpNack:
		c.onNack(&e.nack)
	}
	return Placement{}
}

// onAck applies an ACK: its records to our paths, its rate hint to the
// controller.
func (c *Conn) onAck(now Time, a *wire.Ack) {
	c.stats.AcksRecv++
	c.cc.OnRateHint(int64(now), uint64(a.RateHint)*1000/8)
	c.peerHints = c.peerHints || a.RateHint != 0
	c.hintIdle = len(c.active) == 0
	c.stats.RateHint = uint64(a.RateHint) * 1000 / 8
	var rrSent Time // the newest RECV_READY the records newly acknowledge
	rrAcked := false
	for i := 0; i < a.N; i++ {
		r := &a.Records[i]
		if int(r.Path) >= len(c.paths) {
			continue
		}
		if t, ok := c.onAckRecord(now, c.paths[r.Path], r); ok {
			rrSent, rrAcked = max(rrSent, t), true
		}
	}
	if rrAcked && a.Flags&wire.FlagIdle != 0 {
		c.onIdleAnswer(rrSent)
	}
	c.repace(c.cc.PacingRate())
	c.checkPeerClosed(now)
}

// onHello handles a handshake request (docs/spec.md §3.3).
func (e *Endpoint) onHello(now Time, d Datagram) {
	hl := &e.hello
	if _, err := wire.ParseHello(hl, d.Data); err != nil {
		e.drop(DropMalformed)
		return
	}
	if !e.cfg.Listen || e.cfgErr != nil {
		// An endpoint with an invalid configuration does not accept
		// either (NewEndpoint): its HELLO_ACK could announce what the
		// peer refuses, and its timers could overflow.
		e.drop(DropNotListening)
		return
	}
	if hl.DstConn != 0 || hl.Token != 0 {
		e.drop(DropMalformed)
		return
	}
	if c := e.byPeer[hl.SrcTok]; c != nil {
		// A retransmitted HELLO: our HELLO_ACK was lost.
		if c.peerConn == hl.SrcConn && c.state == stateEstablished {
			c.helloAck = true
			c.lastRecv = now
			e.touch(c)
		} else {
			e.drop(DropBadToken)
		}
		return
	}
	c, err := e.newConn(now, d.From)
	if err != nil {
		e.drop(DropConnLimit)
		return
	}
	c.accepted = true
	c.setupPaths(now)
	c.established(hl)
	c.helloAck = true
	e.byPeer[hl.SrcTok] = c
	e.emit(Event{Kind: EvAccepted, Conn: c.id, Remote: c.remote, Addr: append([]byte(nil), hl.Addr...)})
}

// nackUnknownConn tells the sender of a sequenced packet that names no
// connection of ours, at most once per 100 µs so a flood gets no
// amplification (docs/spec.md §3.3).
func (e *Endpoint) nackUnknown(now Time, d Datagram, h *wire.Header) {
	if now < e.nackNext || len(e.ctrl) >= 64 {
		return
	}
	e.nackNext = now + 100*Microsecond
	o := ctrlOut{route: Route{Remote: d.From, Plane: d.Plane}}
	o.nack.Token = h.Token
	o.nack.Reason = wire.NackUnknownConn
	o.nack.Value = uint64(h.DstConn)
	e.ctrl = append(e.ctrl, o)
}

// onUnknownConnNack fails the connection the peer no longer knows: the NACK
// echoes the connection id and token we used, which only the peer could
// know. The NACK carries no token of ours, so anyone may send it: the
// connection is found through the byPeerID index, in constant time, not
// by a scan of every connection (docs/spec.md §3.3).
func (e *Endpoint) onUnknownConnNack(now Time, d Datagram) {
	n := &e.nack
	if _, err := wire.ParseNack(n, d.Data); err != nil || n.Reason != wire.NackUnknownConn {
		e.drop(DropMalformed)
		return
	}
	if n.Value <= 0xffffffff {
		c := e.byPeerID[peerID{uint32(n.Value), n.Token}]
		if c != nil && c.state == stateEstablished {
			c.fail(now, c.errf(ErrPeerDead, "the peer no longer knows this connection: it restarted or closed it"))
			return
		}
	}
	e.drop(DropUnknownConn)
}

// completedBeforeClose reports whether DATA d, arriving while c is
// closing, belongs to a receive group that had completed before the
// close: a late copy of data that landed (docs/spec.md §3.3). That is a
// group before the flow's doneMsg, or one that had landed behind an
// earlier incomplete group (closeLanded), which the close reported
// delivered too.
func (c *Conn) completedBeforeClose(d *wire.Data) bool {
	if f := c.flows[d.Flow]; f != nil {
		return int32(d.Msg-f.doneMsg) < 0 || slices.Contains(f.closeLanded, d.Msg)
	}
	return c.landedBefore(d.Flow, d.Msg)
}

// discardedByAbort reports whether d belongs to a receive group of an
// aborted flow that had not landed when the abort came. Such DATA is
// dropped before its PSN counts, neither recorded nor acknowledged: an
// acknowledgement would complete the peer's send for data thrown away.
// The peer resends it until the NACK FLOW_ABORTED reaches it and fails
// the send (docs/spec.md §3.4).
func (c *Conn) discardedByAbort(d *wire.Data) bool {
	if c.flows[d.Flow] != nil {
		return false
	}
	t, ok := c.released[d.Flow]
	return ok && t.end != flowReleased && !c.landedBefore(d.Flow, d.Msg)
}
