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
// learns of it from a NACK FLOW_ABORTED and fails its side of the flow.
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
	c.abortFlow(flow, flowAborted, c.errf(ErrFlowAborted, "flow %d aborted locally", flow))
	// One NACK per aborted flow id (above), so the queue stays bounded
	// like the NACKs a peer draws. A dialing connection sends it once
	// established, as it does its other queued control packets: the
	// peer may post on the flow meanwhile, and must learn of the abort.
	c.ctrlQ = append(c.ctrlQ, &ctrlPkt{op: wire.OpNack, nack: wire.Nack{Reason: wire.NackFlowAborted, Flow: flow}})
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
	for k, g := range f.recvs {
		if g.landed() {
			t.landed = append(t.landed, f.doneMsg+uint32(k))
		}
	}
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

// onFlowAborted handles a NACK FLOW_ABORTED: the peer aborted the flow.
func (c *Conn) onFlowAborted(flow uint32) {
	if c.isReleased(flow) && c.flows[flow] == nil {
		return // already gone here (a retransmitted NACK, or released)
	}
	c.abortFlow(flow, flowAbortedByPeer, c.errf(ErrFlowAborted, "the peer aborted flow %d", flow))
}
