package transport

import (
	"github.com/metaroce/metaroce/transport/wire"
)

// flow is one ordered message stream of a connection (docs/spec.md §3.4).
// Both sides number the receive groups of a flow 0, 1, 2, … in posting
// order; the receiver announces each group with a RECV_READY and the sender
// matches its sends, in posting order, to the announced groups.
type flow struct {
	id uint32

	// Sender side.
	sends     []*sendMsg // posting order, until reported complete
	unmatched []*sendMsg // posted, not yet matched to a receive buffer
	// ready holds the announced receive groups readyNext, readyNext+1, …
	// without a gap (ready[i].msg == readyNext+i); early holds those
	// announced beyond a group whose RECV_READY has not arrived yet, by
	// msg. Both lie within MaxPendingRecvs of readyNext (onRecvReady), and
	// an announcement costs O(1) in any arrival order.
	ready     []readyGroup
	early     map[uint32]*readyGroup
	readyNext uint32 // msg of the next group to match; earlier ones are used up
	// txq holds the matched messages with bytes left to send, in matching
	// order. Only its head sends new data: a flow's messages complete one
	// after another instead of all at once at the end (before this rule,
	// 16 posted 256 KiB receives on a 50 Gb/s connection completed nothing
	// for 670 µs). Flows with a non-empty txq take turns (Conn.active).
	txq      []*sendMsg
	inActive bool // f is in its connection's active list
	released bool // ReleaseFlow was called: freed once idle (reapFlow)

	// Receiver side.
	recvs   []*recvGroup // posting order, until reported complete
	nextMsg uint32       // sequence number of the next posted group
	doneMsg uint32       // groups before this one are complete
	// closeLanded lists the groups that had landed behind an incomplete
	// one when this side closed the connection (closeLocal): reported
	// delivered, so late copies of their DATA are acknowledged.
	closeLanded []uint32
}

// landedGroups appends to dst the sequence numbers of f's posted receive
// groups that have landed but wait behind an earlier incomplete group
// (completeRecvs reports a landed group at the head at once).
func (f *flow) landedGroups(dst []uint32) []uint32 {
	for k, g := range f.recvs {
		if g.landed() {
			dst = append(dst, f.doneMsg+uint32(k))
		}
	}
	return dst
}

// sendMsg is one message queued by Send.
type sendMsg struct {
	flow   *flow
	length uint64
	tag    uint32
	cookie uint64

	matched  bool
	msg      uint32 // receive group it matched
	index    uint8  // buffer within the group
	nextOff  uint64 // first byte not yet sent for the first time
	started  bool   // the first packet left (a zero-byte message has one packet)
	outPkts  int    // packets sent or queued for retransmission, not yet acked
	done     bool   // every byte acknowledged, or failed
	err      error
	reported bool
}

func (s *sendMsg) allSent() bool {
	return s.started && s.nextOff >= s.length
}

// readyGroup is a RECV_READY the sender holds.
type readyGroup struct {
	msg     uint32
	n       int
	entries [wire.MaxRecvEntries]wire.RecvEntry
	used    [wire.MaxRecvEntries]bool
}

// recvGroup is one posted grouped receive.
type recvGroup struct {
	msg     uint32
	n       int
	entries [wire.MaxRecvEntries]recvEntry
}

// landed reports whether every buffer of g is complete: all its data is
// placed (and acknowledged), or the buffer failed on its own.
// started reports whether DATA of any buffer of g arrived.
func (g *recvGroup) started() bool {
	for i := 0; i < g.n; i++ {
		if g.entries[i].started {
			return true
		}
	}
	return false
}

func (g *recvGroup) landed() bool {
	for i := 0; i < g.n; i++ {
		if !g.entries[i].done {
			return false
		}
	}
	return true
}

type recvEntry struct {
	capacity uint64
	tag      uint32
	cookie   uint64
	length   uint64 // message length, known from its first DATA
	started  bool
	chunks   []uint64 // bitmap of placed segments
	nChunks  int
	placed   int // segments placed
	done     bool
	err      error
}

// getFlow returns flow id, creating it if create is set. Only the user's
// calls (Send, PostRecv) and a RECV_READY the caller has checked create,
// so create also refuses a released flow id, with reuseErr, whether or not
// its state is still there: a released flow that still has work in
// progress keeps its state until that completes (reapFlow), but it takes
// no new sends or receives (docs/spec.md §3.4, "Releasing a flow"), or it
// would be kept alive and used after its owner let it go.
func (c *Conn) getFlow(id uint32, create bool) (*flow, error) {
	if create && c.isReleased(id) {
		return nil, c.reuseErr(id)
	}
	f := c.flows[id]
	if f == nil && create {
		if len(c.flows) >= c.ep.cfg.MaxFlowsPerConn {
			return nil, c.errf(ErrLimit, "flow %d would be one more than MaxFlowsPerConn (%d) on this connection; release the flows no longer used (ReleaseFlow), or raise MaxFlowsPerConn on both sides", id, c.ep.cfg.MaxFlowsPerConn)
		}
		f = &flow{id: id}
		c.flows[id] = f
	}
	return f, nil
}

func (c *Conn) usable() error {
	switch c.state {
	case stateClosing, stateClosed:
		return c.errf(ErrClosed, "connection is closing")
	}
	if c.peerClosed {
		return c.errf(ErrPeerClosed, "no new sends or receives on it")
	}
	return nil
}

// send queues a message (Endpoint.Send).
func (c *Conn) send(now Time, fid uint32, length uint64, tag uint32, cookie uint64) error {
	if err := c.usable(); err != nil {
		return err
	}
	if length > wire.MaxMessageLen {
		return c.errf(ErrInvalid, "message of %d bytes exceeds the %d-byte limit", length, uint64(wire.MaxMessageLen))
	}
	f, err := c.getFlow(fid, true)
	if err != nil {
		return err
	}
	if len(f.sends) >= c.ep.cfg.MaxPendingSends {
		return c.errf(ErrLimit, "flow %d holds MaxPendingSends (%d) sends already; wait for some to complete before queueing more, or raise MaxPendingSends", fid, c.ep.cfg.MaxPendingSends)
	}
	s := &sendMsg{flow: f, length: length, tag: tag, cookie: cookie}
	f.sends = append(f.sends, s)
	f.unmatched = append(f.unmatched, s)
	c.match(now, f)
	return nil
}

// postRecv posts a receive group (Endpoint.PostRecv) and queues its
// RECV_READY.
func (c *Conn) postRecv(now Time, fid uint32, bufs []RecvBuf) error {
	if err := c.usable(); err != nil {
		return err
	}
	if len(bufs) == 0 || len(bufs) > wire.MaxRecvEntries {
		return c.errf(ErrInvalid, "a receive group holds 1 to %d buffers, got %d", wire.MaxRecvEntries, len(bufs))
	}
	for _, b := range bufs {
		if b.Cap > wire.MaxMessageLen {
			return c.errf(ErrInvalid, "receive capacity %d exceeds the %d-byte limit", b.Cap, uint64(wire.MaxMessageLen))
		}
	}
	f, err := c.getFlow(fid, true)
	if err != nil {
		return err
	}
	if len(f.recvs) >= c.ep.cfg.MaxPendingRecvs {
		return c.errf(ErrLimit, "flow %d holds MaxPendingRecvs (%d) receives posted already; wait for some to complete before posting more, or raise MaxPendingRecvs on both sides", fid, c.ep.cfg.MaxPendingRecvs)
	}
	g := &recvGroup{msg: f.nextMsg, n: len(bufs)}
	f.nextMsg++
	rr := &ctrlPkt{op: wire.OpRecvReady}
	rr.rr.Flow = fid
	rr.rr.Msg = g.msg
	rr.rr.N = len(bufs)
	for i, b := range bufs {
		g.entries[i] = recvEntry{capacity: b.Cap, tag: b.Tag, cookie: b.Cookie}
		rr.rr.Entries[i] = wire.RecvEntry{Capacity: b.Cap, Tag: b.Tag}
	}
	f.recvs = append(f.recvs, g)
	c.ctrlQ = append(c.ctrlQ, rr)
	if c.ep.cfg.InboundRate > 0 {
		// Receiver-driven incast control (docs/spec.md §3.5): the sender
		// learns its fair share from the acknowledgement this makes
		// due: piggybacked on this RECV_READY, and applied before it,
		// or in an ACK that leaves before it, so its first packets are
		// already paced at the share instead of a full initial window.
		c.lastPost, c.postIdle = now, false
		c.ep.markActive()
		c.hintDue = true
		c.ackDue = true
	}
	return nil
}

// match pairs unmatched sends with announced receive buffers, in posting
// order: the oldest send takes the buffer of the oldest announced group whose
// tag equals its own (docs/spec.md §3.4, as NCCL's grouped receives).
func (c *Conn) match(now Time, f *flow) {
	// Only the group numbered readyNext may take the next send: a later
	// group's RECV_READY can overtake an earlier one on another path.
	for len(f.unmatched) > 0 && len(f.ready) > 0 {
		s := f.unmatched[0]
		g := &f.ready[0]
		idx := -1
		for i := 0; i < g.n; i++ {
			if !g.used[i] && g.entries[i].Tag == s.tag {
				idx = i
				break
			}
		}
		reason := wire.NackReason(0)
		var value uint64
		if idx < 0 {
			// No buffer with this tag: fail the send and the first free
			// buffer, so neither side waits forever.
			for i := 0; i < g.n; i++ {
				if !g.used[i] {
					idx = i
					break
				}
			}
			reason, value = wire.NackTagMismatch, uint64(s.tag)
			s.err = c.errf(ErrTagMismatch, "flow %d message %d: tag %d matches no posted buffer", f.id, g.msg, s.tag)
		} else if s.length > g.entries[idx].Capacity {
			reason, value = wire.NackTooLarge, s.length
			s.err = c.errf(ErrMessageTooLarge, "flow %d message %d: %d bytes sent, receiver posted %d", f.id, g.msg, s.length, g.entries[idx].Capacity)
		}
		g.used[idx] = true
		f.unmatched = f.unmatched[1:]
		s.matched, s.msg, s.index = true, g.msg, uint8(idx)
		if s.err != nil {
			s.done = true
			c.ctrlQ = append(c.ctrlQ, &ctrlPkt{op: wire.OpNack, nack: wire.Nack{Reason: reason, Index: uint8(idx), Flow: f.id, Msg: g.msg, Value: value}})
		} else {
			f.txq = append(f.txq, s)
			c.idleDue = false // DATA goes after all
			if !f.inActive {
				c.judgeRestart(now)
				f.inActive = true
				c.active = append(c.active, f)
			}
		}
		full := true
		for i := 0; i < g.n; i++ {
			if !g.used[i] {
				full = false
			}
		}
		if full {
			f.ready[0] = readyGroup{}
			f.ready = f.ready[1:]
			f.readyNext++
		}
	}
	c.completeSends(f)
}

// onRecvReady stores an announced receive group (a new sequenced packet, so
// duplicates were already filtered by the path layer).
//
// The path layer has already acknowledged the packet, so the peer will not
// send it again: an announcement this side cannot hold must not be dropped,
// or the flow would wait for ever for the group. A peer that takes this
// side beyond MaxFlowsPerConn, or announces a group MaxPendingRecvs or more
// ahead of the next one to match (it can have at most MaxPendingRecvs
// receives posted per flow, and every group from readyNext on is still
// posted), fails the connection with an ErrLimit error naming the bound
// (docs/spec.md §3.4). The second bound also keeps the peer from making us
// hold, or sort, groups up to 2^31 ahead.
func (c *Conn) onRecvReady(now Time, r *wire.RecvReady) {
	cfg := &c.ep.cfg
	f := c.flows[r.Flow]
	if f == nil {
		if c.isReleased(r.Flow) {
			// A late copy for a released flow (§3.4): dropped.
			c.ep.drop(DropStale)
			return
		}
		if len(c.flows) >= cfg.MaxFlowsPerConn {
			c.peerExceeded(now, "it announced a receive on flow %d beyond MaxFlowsPerConn (%d flows on this connection); configure both sides with the same limit and release flows on both", r.Flow, cfg.MaxFlowsPerConn)
			return
		}
		f, _ = c.getFlow(r.Flow, true)
	}
	// RECV_READYs travel on different paths, so they arrive out of order,
	// and a spurious retransmission (a new PSN) arrives twice: groups
	// already used up or already held are ignored.
	// They count as dropped: DropStale for a group already used up,
	// DropDuplicate for one already held (Counters).
	k := int32(r.Msg - f.readyNext)
	switch {
	case k < 0:
		c.ep.drop(DropStale)
		return
	case int(k) >= cfg.MaxPendingRecvs:
		c.peerExceeded(now, "it announced receive group %d of flow %d while group %d is the next to match, more than MaxPendingRecvs (%d) ahead", r.Msg, r.Flow, f.readyNext, cfg.MaxPendingRecvs)
		return
	case int(k) < len(f.ready):
		c.ep.drop(DropDuplicate)
		return
	case int(k) > len(f.ready):
		// Beyond a group not announced yet: held aside, and nothing
		// can match before the missing groups arrive.
		if f.early[r.Msg] != nil {
			c.ep.drop(DropDuplicate)
			return
		}
		if f.early == nil {
			f.early = make(map[uint32]*readyGroup)
		}
		f.early[r.Msg] = &readyGroup{msg: r.Msg, n: r.N, entries: r.Entries}
	default:
		f.ready = append(f.ready, readyGroup{msg: r.Msg, n: r.N, entries: r.Entries})
		for len(f.early) > 0 {
			next := f.readyNext + uint32(len(f.ready))
			g := f.early[next]
			if g == nil {
				break
			}
			delete(f.early, next)
			f.ready = append(f.ready, *g)
		}
		c.match(now, f)
	}
	if c.peerHints && len(f.unmatched) == 0 && !f.releases(r.Msg) {
		// Nothing of ours goes into the announced receive, and nothing
		// waits for an earlier group: say so at once, in an ACK with
		// FlagIdle (docs/spec.md §3.1, §3.5), rather than after the
		// AckDelay that waits for DATA to carry the acknowledgement, so
		// that the receiver, which counts its senders for its rate
		// hints, stops counting us and does not hold back the peers
		// that are sending to it. Only a peer that gives hints (it has
		// sent one) counts its senders; others get no extra ACK.
		c.ackDue, c.idleDue = true, true
	}
}

// releases reports whether a send of f was matched to a buffer of the
// announced receive group msg, which f holds or has used up.
func (f *flow) releases(msg uint32) bool {
	k := int32(msg - f.readyNext)
	if k < 0 {
		return true // used up: every buffer of it was matched
	}
	if int(k) >= len(f.ready) {
		return false // held early: nothing can match it yet
	}
	g := &f.ready[k]
	for i := 0; i < g.n; i++ {
		if g.used[i] {
			return true
		}
	}
	return false
}

// completeSends reports finished sends of f in posting order.
func (c *Conn) completeSends(f *flow) {
	n := 0
	for _, s := range f.sends {
		if !s.done {
			break
		}
		if !s.reported {
			s.reported = true
			c.ep.emit(Event{Kind: EvSendDone, Conn: c.id, Remote: c.remote, Flow: f.id, Cookie: s.cookie, Len: s.length, Tag: s.tag, Err: s.err})
		}
		n++
	}
	if n > 0 {
		clear(f.sends[:n])
		f.sends = f.sends[n:]
		c.reapFlow(f)
	}
}

// onPktAcked records that one packet of s was acknowledged.
func (c *Conn) onPktAcked(s *sendMsg) {
	s.outPkts--
	if s.outPkts == 0 && s.allSent() && !s.done {
		s.done = true
		c.completeSends(s.flow)
	}
}

// place handles a DATA packet for this connection and returns where its
// payload goes (docs/spec.md §3.4).
func (c *Conn) place(now Time, d *wire.Data) Placement {
	if c.lastData == 0 || now-c.lastData >= c.ep.activeFor {
		c.ep.markActive()
	}
	c.lastData = now
	if c.nearHinted {
		// Its starting hint counted only the near senders; the far
		// ones' DATA arrives one near RTT from now, and this ACK's hint
		// must reach the sender before then (minrtt.go).
		c.nearHinted = false
		c.hintDue, c.ackDue = true, true
	}
	c.stats.BytesRecv += uint64(len(d.Payload))
	f := c.flows[d.Flow]
	if f == nil || int32(d.Msg-f.doneMsg) < 0 {
		if f != nil || c.isReleased(d.Flow) {
			// DATA of a completed group, a spurious or late copy:
			// dropped without a NACK (§3.4). A released flow is
			// freed only once all its receives completed, so late
			// DATA for one whose state is gone is stale too.
			c.ep.drop(DropStale)
			return Placement{}
		}
		c.ep.drop(DropNotReady)
		c.queueNack(wire.NackNotReady, d.Flow, d.Msg, d.Index, d.Offset)
		return Placement{}
	}
	k := int(d.Msg - f.doneMsg)
	if k >= len(f.recvs) {
		c.ep.drop(DropNotReady)
		c.queueNack(wire.NackNotReady, d.Flow, d.Msg, d.Index, d.Offset)
		return Placement{}
	}
	g := f.recvs[k]
	if int(d.Index) >= g.n {
		// No such buffer in the group: a placement outside what was
		// posted, NACKed BAD_OFFSET like the others (§3.4).
		c.ep.drop(DropBadPlacement)
		c.queueNack(wire.NackBadOffset, d.Flow, d.Msg, d.Index, d.Offset)
		return Placement{}
	}
	en := &g.entries[d.Index]
	if en.done {
		c.ep.drop(DropStale)
		return Placement{}
	}
	// Every packet of a message must agree on its length and sit on a
	// segment boundary with exactly the segment's length. The first DATA
	// accepted sets the length: one that is itself a bad placement is
	// dropped alone and leaves the buffer unstarted, so that a corrupted
	// or forged first packet cannot impose a length every genuine one
	// then disagrees with.
	seg := uint64(c.seg)
	length := en.length
	if !en.started {
		length = d.MsgLen
	}
	want := min(seg, length-min(d.Offset, length))
	if d.MsgLen != length || d.Offset%seg != 0 || uint64(len(d.Payload)) != want ||
		(d.Offset >= length && length != 0) {
		c.ep.drop(DropBadPlacement)
		c.queueNack(wire.NackBadOffset, d.Flow, d.Msg, d.Index, d.Offset)
		return Placement{}
	}
	// A well-formed first DATA of a message longer than the buffer fails
	// the buffer. Past that, a DATA that agrees with its message lies
	// within the capacity; the check below only guards the write.
	if !en.started {
		if length > en.capacity {
			en.err = c.errf(ErrMessageTooLarge, "flow %d message %d: %d bytes arriving, %d posted", d.Flow, d.Msg, d.MsgLen, en.capacity)
			en.done = true
			// The receiver reports this as an offset outside its buffer:
			// NackTooLarge is the sender's word (it fails its own message).
			c.queueNack(wire.NackBadOffset, d.Flow, d.Msg, d.Index, d.MsgLen)
			c.completeRecvs(f)
			c.ep.drop(DropBadPlacement)
			return Placement{}
		}
	}
	if d.Offset+uint64(len(d.Payload)) > en.capacity {
		c.ep.drop(DropBadPlacement)
		c.queueNack(wire.NackBadOffset, d.Flow, d.Msg, d.Index, d.Offset)
		return Placement{}
	}
	if !en.started {
		en.started = true
		en.length = length
		en.nChunks = int((length + seg - 1) / seg)
		if en.nChunks == 0 {
			en.nChunks = 1
		}
		en.chunks = make([]uint64, (en.nChunks+63)/64)
	}
	ch := int(d.Offset / seg)
	if en.chunks[ch>>6]&(1<<(ch&63)) != 0 {
		c.ep.drop(DropDuplicate)
		return Placement{}
	}
	en.chunks[ch>>6] |= 1 << (ch & 63)
	en.placed++
	pl := Placement{OK: len(d.Payload) > 0, Cookie: en.cookie, Offset: d.Offset, Payload: d.Payload}
	if en.placed == en.nChunks {
		en.done = true
		en.chunks = nil
		// The peer's send completes only with the acknowledgement of
		// every packet of it, so the packet that completes a message is
		// acknowledged at once, like one that asks (docs/spec.md §3.1):
		// the last packet sent asks, but a packet of the message on
		// another path may arrive after it and would otherwise wait for
		// the ACK delay. Not while the flow's next message is arriving
		// already: the peer is streaming, its window and not this
		// completion paces it, and the next message's packets bring an
		// ACK soon; an ACK per message there cost 0.2% of the reverse
		// link's DATA in the simulator's failure scenario.
		if k+1 >= len(f.recvs) || !f.recvs[k+1].started() {
			c.ackDue = true
		}
		c.completeRecvs(f)
	}
	return pl
}

// completeRecvs reports finished receive groups of f in posting order; a
// group is finished when every buffer in it is.
func (c *Conn) completeRecvs(f *flow) {
	n := 0
	for _, g := range f.recvs {
		if !g.landed() {
			break
		}
		for i := 0; i < g.n; i++ {
			en := &g.entries[i]
			c.ep.emit(Event{Kind: EvRecvDone, Conn: c.id, Remote: c.remote, Flow: f.id, Cookie: en.cookie, Len: en.length, Tag: en.tag, Err: en.err})
		}
		n++
	}
	if n > 0 {
		clear(f.recvs[:n])
		f.recvs = f.recvs[n:]
		f.doneMsg += uint32(n)
		c.reapFlow(f)
	}
}

// onNack handles a sequenced NACK from the peer.
func (c *Conn) onNack(n *wire.Nack) {
	if n.Reason == wire.NackFlowAborted {
		c.onFlowAborted(n)
		return
	}
	f := c.flows[n.Flow]
	if f == nil {
		return
	}
	switch n.Reason {
	case wire.NackTooLarge, wire.NackTagMismatch:
		// The sender refused our buffer: fail that receive.
		k := int(n.Msg - f.doneMsg)
		if int32(n.Msg-f.doneMsg) < 0 || k >= len(f.recvs) {
			return
		}
		g := f.recvs[k]
		if int(n.Index) >= g.n {
			return
		}
		en := &g.entries[n.Index]
		if en.done {
			return
		}
		base := ErrMessageTooLarge
		detail := "flow %d message %d: peer's message of %d bytes does not fit the posted buffer"
		if n.Reason == wire.NackTagMismatch {
			base = ErrTagMismatch
			detail = "flow %d message %d: peer sent tag %d, which matches no posted buffer"
		}
		en.err = c.errf(base, detail, n.Flow, n.Msg, n.Value)
		en.done = true
		en.chunks = nil
		c.completeRecvs(f)
	case wire.NackNotReady, wire.NackBadOffset:
		// A correct sender never sends ahead of RECV_READY nor off a
		// segment boundary; count it (stats) and carry on.
		c.stats.NacksRecv++
	}
}

// queueNack queues a sequenced NACK, bounded so a misbehaving peer cannot
// grow our queues: at most 4 × MaxPendingRecvs packets wait, to be sent
// for the first time (ctrlQ) or again (retxQ), when one more is refused
// (docs/spec.md §3.4, "NACKs and their directions"). The retransmissions
// count too: new control packets leave before them (§3.2, queue order),
// so a peer that draws NACKs as fast as they leave and loses or reports
// lost what it drew would otherwise keep the retransmission queue from
// ever draining, and grow it without bound. The NACKs queued here
// (NOT_READY, BAD_OFFSET) only inform their receiver, which counts them
// and carries on.
func (c *Conn) queueNack(r wire.NackReason, fid, msg uint32, idx uint8, v uint64) {
	if len(c.ctrlQ)+len(c.retxQ) >= 4*c.ep.cfg.MaxPendingRecvs {
		return
	}
	c.ctrlQ = append(c.ctrlQ, &ctrlPkt{op: wire.OpNack, nack: wire.Nack{Reason: r, Index: idx, Flow: fid, Msg: msg, Value: v}})
}

// judgeRestart decides, once, whether data that becomes ready to send now
// restarts the connection after idling (docs/spec.md §3.5, "Restart after
// idling"): only when the peer's latest hint arrived while nothing was
// ready and nothing is in flight or queued, and cc.AIMD.Restart finds the
// hint stale. Judging when the data becomes ready, not when the pacer
// releases its first packet, keeps a hint fresh that arrived in the very
// RECV_READY that made the data ready, however late the event loop then
// transmits, and keeps a message queued behind the pacer's last gap paced.
func (c *Conn) judgeRestart(now Time) {
	if c.hintIdle && c.inflight == 0 && len(c.ctrlQ) == 0 && len(c.retxQ) == 0 && len(c.active) == 0 {
		c.cc.Restart(int64(now))
	}
	c.hintIdle = false
}
