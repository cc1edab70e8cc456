package transport

import (
	"slices"

	"github.com/metaroce/metaroce/transport/wire"
)

// Aborting flows. An owner that gives up on a flow while operations are
// still in flight (the NCCL plugin's comm closed by an abort) must get its
// buffers back at once without disturbing the other flows of the
// connection, which other users share. AbortFlow fails the flow's
// operations on this side, forgets the flow, and tells the peer with a
// NACK FLOW_ABORTED, on which the peer fails its side of the flow too
// (docs/spec.md §3.4, "Aborting a flow").

// AbortFlow ends flow on connection id at once: every outstanding send and
// receive of it fails with ErrFlowAborted (but those that had finished,
// which complete, docs/spec.md §3.4), none of its packets is sent again,
// no more of its data is placed, and the flow id is released. The peer
// learns of it from a NACK FLOW_ABORTED and fails its side of the flow,
// but for its sends to the receive groups that the NACK says this side
// delivered, which complete (docs/spec.md §2.7, §3.4).
// When AbortFlow returns, no buffer of the flow is read or written again.
// Aborting a flow that was released or never used still tells the peer.
func (e *Endpoint) AbortFlow(now Time, id ConnID, flow uint32) error {
	c := e.conns[id]
	if c == nil {
		return &ConnError{Conn: id, Err: ErrUnknownConn}
	}
	switch c.state {
	case stateClosing, stateClosed:
		return nil // its operations have failed already
	}
	e.touch(c)
	if t, ok := c.released[flow]; ok && t.end != flowReleased {
		return nil // aborted already, here or by the peer: it knows
	}
	// What this side knows of the flow's receive groups: its state, or
	// the tombstone of a release. An id it has no record of was never
	// used here, or was forgotten (maxTombstones): the NACK then says
	// nothing of them, and the peer fails what is unacknowledged.
	_, known := c.released[flow]
	known = known || c.flows[flow] != nil
	c.abortFlow(flow, flowAborted, c.errf(ErrFlowAborted, "flow %d aborted locally", flow))
	// One NACK per aborted flow id (above), so the queue stays bounded
	// like the NACKs a peer draws. A dialing connection sends it once
	// established, as it does its other queued control packets: the
	// peer may post on the flow meanwhile, and must learn of the abort.
	nk := wire.Nack{Reason: wire.NackFlowAborted, Flow: flow}
	if known {
		nk.Msg, nk.Value = c.released[flow].delivered()
	}
	c.ctrlQ = append(c.ctrlQ, &ctrlPkt{op: wire.OpNack, nack: nk})
	c.checkPeerClosed(now)
	return nil
}

// abortFlow fails flow id's operations with err, drops its queued packets
// and releases it (how: end).
func (c *Conn) abortFlow(id uint32, end flowEnd, err error) {
	c.tombstone(id, end)
	f := c.flows[id]
	if f == nil {
		return
	}
	t := c.released[id]
	t.doneMsg = f.doneMsg
	t.landed = f.landedGroups(nil)
	c.released[id] = t
	c.failFlow(f, err)
	c.active = slices.DeleteFunc(c.active, func(g *flow) bool { return g == f })
	c.actRR = 0
	// Lost packets of its sends are skipped when their turn comes (their
	// messages are done); announcements of its receive groups not sent
	// yet go now, so that the peer matches no send to them.
	c.ctrlQ = slices.DeleteFunc(c.ctrlQ, func(cp *ctrlPkt) bool { return cp.op == wire.OpRecvReady && cp.rr.Flow == id })
	f.released = true
	c.reapFlow(f)
}

// delivered returns the msg and value of the NACK FLOW_ABORTED for an
// aborted flow's tombstone t (docs/spec.md §2.7, §3.4): the receive groups
// the aborting side delivered, which are those it reported complete and
// whose late DATA it still acknowledges (landedBefore): all groups before
// doneMsg, and the landed ones beyond it, of which the value's bitmap
// holds the first wire.AbortLandedBits groups after doneMsg. A group
// landed farther ahead (more than 63 groups behind an incomplete one) is
// not named; the peer's send to it completes only if its ACKs arrived.
func (t tomb) delivered() (msg uint32, value uint64) {
	value = wire.AbortDelivered
	for _, m := range t.landed {
		if k := m - t.doneMsg; k >= 1 && k <= wire.AbortLandedBits {
			value |= 1 << (k - 1)
		}
	}
	return t.doneMsg, value
}

// onFlowAborted handles a NACK FLOW_ABORTED: the peer aborted the flow.
// The sends matched to receive groups that the peer says it delivered
// (wire.Nack.Delivered) complete successfully even though their ACKs have
// not all arrived (lost, or overtaken by the NACK): the peer reported
// those receives complete, and failing the sends would leave the two
// sides disagreeing on whether the message was delivered (docs/spec.md
// §3.4). Every other outstanding operation of the flow fails. A NACK from
// an older peer, without wire.AbortDelivered, completes nothing.
func (c *Conn) onFlowAborted(n *wire.Nack) {
	if c.isReleased(n.Flow) && c.flows[n.Flow] == nil {
		return // already gone here (a retransmitted NACK, or released)
	}
	if f := c.flows[n.Flow]; f != nil {
		for _, s := range f.sends {
			if s.matched && !s.done && n.Delivered(s.msg) {
				s.done = true
			}
		}
	}
	c.abortFlow(n.Flow, flowAbortedByPeer, c.errf(ErrFlowAborted, "the peer aborted flow %d", n.Flow))
}
