package transport

import (
	"fmt"

	"github.com/metaroce/metaroce/transport/cc"
	"github.com/metaroce/metaroce/transport/wire"
)

type connState uint8

const (
	stateDialing connState = iota
	stateEstablished
	stateClosing // CLOSE sent, waiting for the reply
	stateClosed
)

func (s connState) String() string {
	return [...]string{"dialing", "established", "closing", "closed"}[s]
}

// Conn is one MetaRoCE connection: many ordered flows above, many paths
// below, one congestion controller (docs/spec.md §3). It is reached through
// its Endpoint's methods.
type Conn struct {
	ep       *Endpoint
	id       ConnID
	remote   RemoteID
	state    connState
	accepted bool

	localTok uint64
	peerConn uint32
	peerTok  uint64
	seg      int // DATA payload bytes per packet, agreed by both sides
	ackRecs  int // most records one ACK may carry: what fits the peer's max_dgram (§2.5)

	paths   []*txPath          // our paths, indexed by path id
	rxPaths map[uint16]*rxPath // the peer's paths, by the peer's path id
	rxOrder []*rxPath
	probing int // paths in pathProbing: poll and nextTimeout skip the probe scan when 0
	ackRR   int // rotates ACKs over our paths (reverse entropies for the peer)
	ctrlRR  int // rotates sequenced control packets over our paths
	pathRR  int

	cc *cc.AIMD
	// peerFwd: the peer announced wire.CapFwdDelay, so the forward delays
	// go both ways (docs/spec.md §2.5): our ACK records carry the delay
	// fwd measures on its DATA, and the delays in its records pace us.
	peerFwd bool
	fwd     fwdDelay

	flows map[uint32]*flow
	// released holds the flow ids released by ReleaseFlow or AbortFlow or
	// aborted by the peer, and how: those whose flow still has state, and
	// the latest maxTombstones of the others, which releasedOrder lists
	// oldest first, in the order their state went.
	released      map[uint32]tomb
	releasedOrder []uint32

	// Sequenced work waiting for a path, in priority order.
	ctrlQ    []*ctrlPkt // RECV_READY and NACK packets never sent yet
	retxQ    []retxItem // content of lost packets
	active   []*flow    // flows with matched messages left to send, served round-robin
	actRR    int
	inflight int // bytes in flight on all paths

	// Pacing (docs/spec.md §3.5): the earliest time the next sequenced
	// packet may leave. The last paced packet, of paceBytes bytes, was
	// charged the gap from paceFrom to paceNext at paceRate bytes/s; a
	// rate that rises before paceNext shortens the gap to what the new
	// rate implies for that packet (repace).
	paceNext  Time
	paceFrom  Time
	paceBytes uint64
	paceRate  uint64
	paceHeld  bool // the last attempt to send was held back by the pacer
	// backlogFrom is when an attempt to send first found something
	// queued since one last found nothing (0: none queued then); paceBase
	// allows catch-up only to a backlog that began before the packet was
	// due.
	backlogFrom Time

	// Handshake, close and liveness timers.
	created    Time
	helloDue   Time // dialing: next HELLO
	helloTries int  // HELLOs sent so far
	helloAck   bool // accepted: a HELLO_ACK is owed
	// Handshake RTT sample (minrtt.go): when our first HELLO or
	// HELLO_ACK left, how many left, and whether the answer was seen.
	hsSent     Time
	hsTries    int
	hsAnswered bool
	minRTT     Time // least RTT sampled, ns; 0: none yet
	// nearHinted: the latest starting hint counted only the near
	// senders (nearStarting), so the first DATA is acknowledged at once.
	nearHinted bool
	deadline   Time // dialing: handshake deadline; closing: give-up time
	closeDue   Time
	closeTries int
	closeRsn   wire.CloseReason
	peerClosed bool // the peer sent CLOSE; we linger until graceEnd
	graceEnd   Time
	lastRecv   Time // last valid packet from the peer
	lastSent   Time
	lastData   Time // last DATA received (rate-hint activity)
	lastPost   Time // last receive posted (rate-hint activity)
	// postIdle: the peer acknowledged the RECV_READY of our latest post
	// without DATA, so it has nothing to send into it yet and the post
	// no longer counts it as a sender (activeSenders).
	postIdle bool
	// peerHints: the peer has sent a rate hint, so it counts its senders
	// (docs/spec.md §3.5) and wants to hear at once that a RECV_READY of
	// its finds nothing of ours to release.
	peerHints bool
	// idleDue: the next ACK we send carries FlagIdle: a RECV_READY of the
	// peer found nothing of ours to release (onRecvReady).
	idleDue bool
	lastAck Time // last ACK that acknowledged something
	// ackedSent is the send time of the newest packet acknowledged on any
	// path: a packet sent before it and still outstanding on another path
	// is overdue (txPath.deadline).
	ackedSent Time
	// unsampled is the overtaken-packet deadline (2·srtt + 4·rttvar) of
	// the slowest path with an RTT sample, used by the paths without one
	// (txPath.deadline); 0 before any sample. unsampledBy is that path.
	unsampled   Time
	unsampledBy int
	ackDue      bool
	hintDue     bool // an ACK must go even with nothing to acknowledge, for its rate hint
	hintIdle    bool // the peer's latest rate hint arrived with nothing to send
	ackAt       Time // when a held-back ACK must go
	ackFirst    bool // the due acknowledgement goes as an ACK before any sequenced packet
	tailDue     bool // some path's tailDue is set: poll sends its tail probe

	// timerRan is when onTimeout last ran. A time at or before it from
	// which poll sends a packet (ACK, pacing, HELLO, CLOSE) has already
	// woken the driver, which sends the packet as soon as its NIC takes
	// one: nextTimeout leaves such a time out (sendTimer), as it does an
	// expired tail-probe timer (txPath.tailDue).
	timerRan Time

	peerPlanes int
	peerPaths  int
	peerAddr   []byte

	stats ConnStats

	// Timer heap bookkeeping (timerq.go).
	due   Time // cached nextTimeout while in the heap
	tidx  int  // index in Endpoint.tq, -1 when absent
	dirty bool // in Endpoint.dirty
}

// ID returns the connection id.
func (c *Conn) ID() ConnID { return c.id }

func (c *Conn) errf(base error, format string, args ...any) error {
	return &ConnError{Conn: c.id, Remote: c.remote, Err: base, Detail: fmt.Sprintf(format, args...)}
}

// setupPaths creates Planes × PathsPerPlane paths, each on a distinct
// entropy of its plane's pool.
func (c *Conn) setupPaths(now Time) {
	cfg := &c.ep.cfg
	for p := 0; p < cfg.Planes; p++ {
		for k := 0; k < cfg.PathsPerPlane; k++ {
			id := len(c.paths)
			tp := &txPath{id: uint16(id), plane: uint8(p)}
			tp.entropy = c.freshEntropy(uint8(p))
			tp.srtt = cfg.InitialRTT
			tp.rttvar = cfg.InitialRTT / 2
			tp.setRTO(cfg)
			tp.state = pathActive
			c.paths = append(c.paths, tp)
			c.cc.AddPath(int64(now), id)
		}
	}
}

// freshEntropy picks a source-port index of plane p that no other path of c
// uses, at random so that a re-tried path lands on a new ECMP route with
// probability (pool-used)/pool.
func (c *Conn) freshEntropy(p uint8) uint16 {
	pool := c.ep.cfg.EntropiesPerPlane
	for tries := 0; ; tries++ {
		e := uint16(c.ep.rng.IntN(pool))
		clash := false
		for _, tp := range c.paths {
			if tp.plane == p && tp.entropy == e {
				clash = true
				break
			}
		}
		if !clash || tries > 4*pool {
			return e
		}
	}
}

// established finishes the handshake: the peer's parameters are known.
func (c *Conn) established(h *wire.Hello) {
	c.peerConn = h.SrcConn
	c.peerTok = h.SrcTok
	c.peerPlanes = int(h.Planes)
	c.peerPaths = int(h.Paths)
	c.peerFwd = h.Caps&wire.CapFwdDelay != 0
	dg := min(c.ep.cfg.MaxDatagram, int(h.MaxDgram))
	c.seg = dg - dataHdr
	if c.seg < 1 {
		c.seg = 1
	}
	// An ACK must fit the peer's max_dgram too (docs/spec.md §2.5): at
	// the minimum of 576 bytes that is 10 records, not 16.
	c.ackRecs = wire.AckRecordsFit(dg)
	c.peerAddr = append(c.peerAddr[:0], h.Addr...)
	c.state = stateEstablished
	// Index the connection for NACK UNKNOWN_CONN (onUnknownConnNack,
	// docs/spec.md §3.3). Two connections share a key only if a peer
	// reuses another's secret token; the first keeps the entry.
	if k := (peerID{c.peerConn, c.peerTok}); c.ep.byPeerID[k] == nil {
		c.ep.byPeerID[k] = c
	}
}

// fail ends the connection at once with err: every outstanding operation
// fails with it and EvClosed carries it.
func (c *Conn) fail(now Time, err error) {
	if c.state == stateClosed {
		return
	}
	c.failOps(err)
	c.state = stateClosed
	fin := &FinalStats{}
	fin.Conn, _ = c.ep.Stats(c.id)
	for i := 0; ; i++ {
		ps, ok := c.ep.PathStats(c.id, i)
		if !ok {
			break
		}
		fin.Paths = append(fin.Paths, ps)
	}
	c.ep.emit(Event{Kind: EvClosed, Conn: c.id, Remote: c.remote, Err: err, Final: fin})
	c.ep.removeConn(c)
}

// peerExceeded fails c because the peer made it exceed one of its bounds
// with a packet the path layer has already acknowledged (docs/spec.md
// §3.4): dropping the packet alone would leave the flow waiting for ever
// for what it announced. The drop is counted (DropPeerLimit), the peer is
// told with a CLOSE of reason ERROR, and every operation fails with an
// ErrLimit error whose detail names the bound.
func (c *Conn) peerExceeded(now Time, format string, args ...any) {
	c.ep.drop(DropPeerLimit)
	err := c.errf(ErrLimit, "the peer exceeded this side's limit: "+format, args...)
	c.closeRsn = wire.CloseError
	c.ep.ctrlClose(c, false)
	c.fail(now, err)
}

// failOps fails every queued send and posted receive with err.
func (c *Conn) failOps(err error) {
	for _, fid := range c.flowIDs() {
		c.failFlow(c.flows[fid], err)
	}
	clear(c.active)
	c.active = c.active[:0]
	c.retxQ = c.retxQ[:0]
	c.ctrlQ = c.ctrlQ[:0]
}

// failFlow ends every outstanding operation of f with err, but those that
// had finished and waited only behind an earlier one (docs/spec.md §3.4):
// a send whose every byte was acknowledged, a receive group whose every
// buffer is complete. A failed send is marked done, so that none of its
// packets is sent again. f leaves the active list; the caller drops the
// connection's queues or, for one flow, its entries in them.
func (c *Conn) failFlow(f *flow, err error) {
	for _, s := range f.sends {
		if s.reported {
			continue
		}
		s.reported = true
		if !s.done {
			s.done, s.err = true, err
		}
		c.ep.emit(Event{Kind: EvSendDone, Conn: c.id, Remote: c.remote, Flow: f.id, Cookie: s.cookie, Len: s.length, Tag: s.tag, Err: s.err})
	}
	clear(f.sends)
	f.sends = f.sends[:0]
	clear(f.unmatched)
	f.unmatched = f.unmatched[:0]
	for _, g := range f.recvs {
		landed := g.landed()
		for i := 0; i < g.n; i++ {
			en := &g.entries[i]
			if landed {
				c.ep.emit(Event{Kind: EvRecvDone, Conn: c.id, Remote: c.remote, Flow: f.id, Cookie: en.cookie, Len: en.length, Tag: en.tag, Err: en.err})
				continue
			}
			c.ep.emit(Event{Kind: EvRecvDone, Conn: c.id, Remote: c.remote, Flow: f.id, Cookie: en.cookie, Err: err})
		}
	}
	clear(f.recvs)
	f.recvs = f.recvs[:0]
	clear(f.txq)
	f.txq = f.txq[:0]
	f.inActive = false
}

// flowIDs returns flow ids in ascending order so that failure events come
// out in a deterministic order.
func (c *Conn) flowIDs() []uint32 {
	ids := make([]uint32, 0, len(c.flows))
	for id := range c.flows {
		ids = append(ids, id)
	}
	for i := 1; i < len(ids); i++ {
		for j := i; j > 0 && ids[j] < ids[j-1]; j-- {
			ids[j], ids[j-1] = ids[j-1], ids[j]
		}
	}
	return ids
}

// closeLocal starts an orderly close initiated by this side.
func (c *Conn) closeLocal(now Time, r wire.CloseReason) {
	switch c.state {
	case stateClosed, stateClosing:
		return
	case stateDialing:
		// Sends and receives may be queued before the handshake
		// completes; they fail with ErrClosed as Close promises. The
		// connection itself ends without error (an orderly local
		// close), but fail's error would otherwise reach them as nil,
		// which reports a send or receive complete that never moved.
		c.failOps(c.errf(ErrClosed, "closed locally before the handshake completed"))
		c.fail(now, nil)
		return
	}
	// Close reports the receive groups that had landed behind an
	// incomplete one as delivered (failFlow), but doneMsg stays below
	// them: remember them, so that late copies of their DATA are
	// acknowledged as stale (completedBeforeClose) and the peer's sends
	// complete too, instead of failing with ErrClosed while this side
	// reported the data delivered (docs/spec.md §3.3, §3.4).
	for _, f := range c.flows {
		f.closeLanded = f.landedGroups(nil)
	}
	c.failOps(c.errf(ErrClosed, "closed locally"))
	c.state = stateClosing
	c.closeRsn = r
	c.closeDue = now
	c.closeTries = 0
	c.deadline = now + 4*c.ep.cfg.HandshakeRetry
}

// onPeerClose handles a CLOSE from the peer.
func (c *Conn) onPeerClose(now Time, cl *wire.Close) {
	if cl.Flags&wire.FlagReply != 0 {
		if c.state == stateClosing {
			c.fail(now, nil)
		}
		return
	}
	if c.state == stateClosing {
		// Both sides closed at once: the reply below completes the peer;
		// we are done too.
		c.fail(now, nil)
		c.ep.ctrlClose(c, true)
		return
	}
	if c.peerClosed {
		return
	}
	if cl.Reason == wire.CloseIdleTimeout {
		// The peer heard nothing from us for its IdleTimeout and has
		// forgotten the connection: it acknowledges nothing more, so
		// lingering for its ACKs is pointless, and it wants no reply.
		// Our packets do not reach it (a one-way failure) or this side
		// stalled: a failure of the path to the peer, as ErrPeerDead
		// says, not a peer that closed (ErrPeerClosed) or exited.
		c.fail(now, c.errf(ErrPeerDead, "the peer heard nothing from this side for its idle timeout and gave the connection up: this side's packets do not reach it (the network failed in that direction only) or this side stalled"))
		return
	}
	// Linger before failing what is still outstanding: the ACKs the peer
	// sent just before its CLOSE may arrive after it on another path, and
	// they complete sends whose data the peer already has. When those ACKs
	// were lost, only a retransmission answered by the closing peer
	// completes such a send, and the peer keeps answering for as long as
	// it lingers (4 × HandshakeRetry, closeLocal). The grace is half of
	// that, which leaves room for a retry of a lost CLOSE before the peer
	// forgets the connection (past it, our retransmissions would meet an
	// unknown connection and fail as ErrPeerDead). With twice MinRTO alone,
	// a send whose data had landed failed with ErrClosed after a
	// retransmission or two were lost too (mrbench at 50% loss, one run in
	// six).
	c.peerClosed = true
	c.closeRsn = cl.Reason
	c.graceEnd = now + max(2*c.ep.cfg.MinRTO, 4*Time(c.cc.SRTT()), 2*c.ep.cfg.HandshakeRetry)
	c.checkPeerClosed(now)
}

// checkPeerClosed ends a connection the peer closed once nothing is
// outstanding or the grace period is over.
func (c *Conn) checkPeerClosed(now Time) {
	if !c.peerClosed || c.state == stateClosed {
		return
	}
	if now < c.graceEnd && c.hasWork() {
		return
	}
	err := c.errf(ErrPeerClosed, "reason %v", c.closeRsn)
	// The reply goes only now: until it arrives the peer keeps
	// acknowledging, which is what completes our last sends.
	c.ep.ctrlClose(c, true)
	c.fail(now, err)
}

// hasWork reports whether any send or receive is still outstanding.
func (c *Conn) hasWork() bool {
	for _, f := range c.flows {
		if len(f.sends) > 0 || len(f.recvs) > 0 {
			return true
		}
	}
	return false
}

// ConnState names the connection state for statistics.
func (c *Conn) String() string {
	return fmt.Sprintf("conn %d (peer %d, %v)", c.id, c.remote, c.state)
}
