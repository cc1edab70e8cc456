package transport

import "slices"

// Releasing flows. A connection that outlives its users (the NCCL plugin
// shares one connection per peer among all comms to that peer) would
// otherwise keep every flow it ever carried until it reached
// MaxFlowsPerConn and refused new ones. ReleaseFlow lets the owner of a
// flow say it is finished with it: the flow's state goes as soon as
// nothing of it is in progress on this side. Each side releases on its
// own; a flow id, once released, must not be used again by either side.

// maxTombstones bounds how many released flow ids whose state is gone a
// connection remembers, so that a late duplicate RECV_READY or DATA of a
// released flow is dropped instead of bringing the flow back; older ids
// are forgotten first. The id of a released flow still in progress is
// never forgotten: its state is still in the flow table, and without the
// tombstone a Send or PostRecv on the id would join the old flow, and once
// the old flow was freed a new one on the id would take the old one's
// late DATA into its own buffers. Those ids are at most MaxFlowsPerConn,
// so that the tombstones stay at most maxTombstones + MaxFlowsPerConn;
// such an id joins the forgettable ones, as the newest, when its flow is
// freed (reapFlow).
const maxTombstones = 1024

// ReleaseFlow releases flow on connection id: once it has no send, receive
// or matched message in progress, its state is freed, now or when the last
// one completes. Announced receive groups of the peer that no send matched
// are dropped with it. A flow id that was never used is simply remembered
// as released. Using a released flow id again is an error (ErrInvalid). On
// a closing connection the state stays until the connection is gone
// (reapFlow).
func (e *Endpoint) ReleaseFlow(now Time, id ConnID, flow uint32) error {
	c := e.conns[id]
	if c == nil {
		return &ConnError{Conn: id, Err: ErrUnknownConn}
	}
	e.touch(c)
	if c.isReleased(flow) {
		return nil
	}
	c.tombstone(flow, flowReleased)
	if f := c.flows[flow]; f != nil {
		f.released = true
		c.reapFlow(f)
	}
	return nil
}

// isReleased reports whether flow was released (and is still remembered).
func (c *Conn) isReleased(flow uint32) bool {
	_, ok := c.released[flow]
	return ok
}

// flowEnd says how a flow id came to be released, for the error that
// refuses its reuse.
type flowEnd uint8

const (
	flowReleased      flowEnd = iota // ReleaseFlow
	flowAborted                      // AbortFlow
	flowAbortedByPeer                // a NACK FLOW_ABORTED
)

// tomb is what a connection remembers of a released flow id.
type tomb struct {
	end flowEnd
	// doneMsg and landed, for an aborted flow, say which of its receive
	// groups completed: every message below doneMsg, and those in
	// landed (full when the abort came, behind one that was not). Late
	// DATA of those is a stale copy and is acknowledged; DATA of any
	// other group of the flow was thrown away with it and must not be,
	// or the peer would report its send delivered (docs/spec.md §3.4).
	// A flow released with ReleaseFlow is freed only once all its
	// receives completed, so all of its late DATA is stale; doneMsg
	// records how many, kept if the flow is aborted after.
	doneMsg uint32
	landed  []uint32
}

// landedBefore reports whether message msg of the released flow id had
// landed when the flow's state went; false for an id not remembered.
func (c *Conn) landedBefore(flow, msg uint32) bool {
	t, ok := c.released[flow]
	switch {
	case !ok:
		return false
	case t.end == flowReleased:
		return true
	}
	return int32(msg-t.doneMsg) < 0 || slices.Contains(t.landed, msg)
}

// reuseErr is the error of a send or receive on a released flow id.
func (c *Conn) reuseErr(flow uint32) error {
	switch c.released[flow].end {
	case flowAborted:
		return c.errf(ErrInvalid, "flow %d was aborted", flow)
	case flowAbortedByPeer:
		return c.errf(ErrFlowAborted, "the peer aborted flow %d", flow)
	}
	return c.errf(ErrInvalid, "flow %d was released", flow)
}

// tombstone remembers flow as released (how: end). A flow released twice
// keeps its first end, but that an abort overrides a release: the abort
// fails receives that the release would have waited for. The tombstone
// may be forgotten (buryTomb) only once the flow has no state: at once
// for a flow without any, or when reapFlow frees it.
func (c *Conn) tombstone(flow uint32, end flowEnd) {
	if c.released == nil {
		c.released = make(map[uint32]tomb)
	}
	if t, ok := c.released[flow]; ok {
		if t.end == flowReleased && end != flowReleased {
			// A released flow's groups before doneMsg were all
			// delivered, and stay so after the abort.
			c.released[flow] = tomb{end: end, doneMsg: t.doneMsg}
		}
		return
	}
	c.released[flow] = tomb{end: end}
	if c.flows[flow] == nil {
		c.buryTomb(flow)
	}
}

// buryTomb queues the tombstone of flow, whose state is gone, as the
// newest of those that may be forgotten, and forgets the oldest beyond
// maxTombstones.
func (c *Conn) buryTomb(flow uint32) {
	c.releasedOrder = append(c.releasedOrder, flow)
	if len(c.releasedOrder) > maxTombstones {
		delete(c.released, c.releasedOrder[0])
		c.releasedOrder = c.releasedOrder[1:]
	}
}

// reapFlow frees a released flow once nothing of it is in progress.
//
// A closing connection frees no flow: Close failed the receive groups it
// had not completed, and only the flow's doneMsg and closeLanded tell
// those apart from the groups that landed (completedBeforeClose). A
// tombstone of ReleaseFlow says that every group of the flow completed,
// so a late copy of DATA of a failed group would then be acknowledged as
// stale, and the peer's send completed for data thrown away (docs/spec.md
// §3.3). The connection forgets its flows when it is gone.
func (c *Conn) reapFlow(f *flow) {
	if c.state == stateClosing || c.state == stateClosed {
		return
	}
	if !f.released || len(f.sends) > 0 || len(f.unmatched) > 0 || len(f.txq) > 0 || f.inActive || len(f.recvs) > 0 {
		return
	}
	if c.flows[f.id] == f {
		delete(c.flows, f.id)
		// The tombstone keeps how many receive groups completed, for
		// the NACK FLOW_ABORTED of a later abort (AbortFlow) and for
		// the late DATA it acknowledges (landedBefore).
		t, ok := c.released[f.id]
		if ok && t.end == flowReleased {
			t.doneMsg = f.doneMsg
			c.released[f.id] = t
		}
		if ok {
			c.buryTomb(f.id)
		}
	}
}
