package transport

import (
	"github.com/metaroce/metaroce/transport/wire"
)

type pathState uint8

const (
	pathActive  pathState = iota // carries data
	pathProbing                  // bad: on a fresh entropy, waiting for a probe to be acknowledged
)

type recKind uint8

const (
	recData recKind = iota
	recCtrl
	recProbe
)

type recState uint8

const (
	recOut   recState = iota // in flight
	recAcked                 // acknowledged
	recLost                  // declared lost; its content was queued again
)

// txRec remembers one sequenced packet until it is acknowledged or lost.
type txRec struct {
	psn    wire.PSN
	kind   recKind
	state  recState
	ackReq bool // it asked for an immediate acknowledgement (FlagAckReq)
	tail   bool // a tail probe: its acknowledgement overtakes no other path's packets
	sent   Time
	bytes  int // on the wire
	msg    *sendMsg
	off    uint64
	n      int
	ctrl   *ctrlPkt
}

// retxItem is the content of a lost packet waiting for a path.
type retxItem struct {
	kind recKind
	msg  *sendMsg
	off  uint64
	n    int
	ctrl *ctrlPkt
	pref int // the path that lost it (docs/spec.md §3.2: retransmit on the same path unless it is bad); -1 for any
}

// ctrlPkt is a sequenced control packet (RECV_READY or NACK).
type ctrlPkt struct {
	op   wire.Opcode
	rr   wire.RecvReady
	nack wire.Nack
}

// txPath is the sending half of one path: sequence numbers, outstanding
// packets, RTT estimate and health (docs/spec.md §3.1, §3.2, §3.6).
//
// Invariant: every PSN in [una, next) has a record in recs at index
// psn&(len(recs)-1), next-una ≤ wire.SackBits, and the record at una, if any,
// is recOut (una skips acknowledged and lost records).
type txPath struct {
	id      uint16
	plane   uint8
	entropy uint16
	state   pathState

	next wire.PSN
	una  wire.PSN
	recs []txRec
	// Copies of what the timers read of the records at una and next-1,
	// each a cache miss away in recs: deadline and tailProbeAt run for
	// every path on every touch of the connection. unaSent is the send
	// time of the oldest outstanding record (while next != una); the
	// newest record was sent at newestSent, asked for an immediate
	// acknowledgement if newestAckReq, and is outstanding and no probe
	// while newestTail.
	unaSent      Time
	newestSent   Time
	newestTail   bool
	newestAckReq bool

	inflight     int // bytes of recOut records
	inflightPkts int

	srtt, rttvar Time
	hasRTT       bool
	backoff      uint
	rtoV         Time // rto(cfg), cached by setRTO: deadline runs for every path on every touch
	ptoV         Time // max(2·srtt, srtt + 4·rttvar), cached by setRTO (tailProbeAt)
	timeouts     int  // consecutive

	lastCE  uint32
	fq      Time // forward queueing delay its ACK records report, averaged with gain 1/2 (docs/spec.md §3.5)
	hasFq   bool // fq holds a sample
	probeAt Time // probing: when to send the next probe (0 = one is out)
	// quickProbes counts the probes sent at once after an overtaken
	// probe (timers.go) since a probe of the path was last answered,
	// which resets it. From maxQuickProbes on, the path probes once per
	// ProbeInterval while no path of its plane is active; it also counts
	// the quick probes made while one was, so it may exceed
	// maxQuickProbes.
	quickProbes int

	// tailDue is set when the tail-probe timer expired (tailProbeAt) and
	// cleared when the probe leaves or is no longer wanted: an expired
	// timer leaves the connection's deadline, so a driver whose NIC is
	// busy is not woken again and again for a probe it cannot send yet.
	tailDue bool

	// suspect is set when the overtaken rule declared the path's oldest
	// packet lost alone (onTailLoss) and cleared by any acknowledgement
	// on the path: a second overtaken packet with no acknowledgement in
	// between shows a dead route, even when the path carries packets too
	// sparsely (RECV_READYs, a stalled flow) for two of them to be
	// overtaken at once.
	suspect    bool
	suspectPSN wire.PSN // the packet onTailLoss declared lost; its late acknowledgement clears suspect too

	// rtoFloor is the path's adaptive extra floor under the RTO, raised
	// by spurious timeouts and decayed without them (spurious.go); 0 until
	// the first spurious timeout.
	rtoFloor   Time
	floorSince Time // when rtoFloor last rose or decayed
	lastTO     timeoutRec

	stats PathStats
}

func (p *txPath) outstanding() uint32 { return uint32(p.next - p.una) }

func (p *txPath) rec(psn wire.PSN) *txRec { return &p.recs[int(uint32(psn))&(len(p.recs)-1)] }

// push records a packet of kind about to be sent at now with PSN p.next
// and returns it.
func (p *txPath) push(now Time, kind recKind, ackReq bool) *txRec {
	if int(p.outstanding()) == len(p.recs) {
		n := max(16, 2*len(p.recs))
		nr := make([]txRec, n)
		for q := p.una; q != p.next; q++ {
			nr[int(uint32(q))&(n-1)] = *p.rec(q)
		}
		p.recs = nr
	}
	r := p.rec(p.next)
	*r = txRec{psn: p.next, kind: kind, sent: now, ackReq: ackReq}
	if p.una == p.next {
		p.unaSent = now
	}
	p.newestSent, p.newestTail, p.newestAckReq = now, kind != recProbe, ackReq
	p.next++
	return r
}

// rto is the tail-loss timeout of the path (RFC 6298 with a configurable
// floor, raised by the adaptive rtoFloor, doubled per consecutive timeout).
func (p *txPath) rto(cfg *Config) Time {
	t := max(p.srtt+4*p.rttvar, cfg.MinRTO, p.rtoFloor)
	t <<= min(p.backoff, 16)
	return min(t, cfg.MaxRTO)
}

// setRTO recomputes the cached rto (and the tail-probe timeout) after
// srtt, rttvar or backoff changed.
func (p *txPath) setRTO(cfg *Config) {
	p.rtoV = p.rto(cfg)
	p.ptoV = max(2*p.srtt, p.srtt+4*p.rttvar)
}

// tailProbeAt is when p sends a tail probe (docs/spec.md §3.2), or Never:
// an active path whose newest packet is still outstanding probes once it
// has sent nothing for max(2·srtt, srtt + 4·rttvar), plus AckDelay unless
// that packet asked for an immediate acknowledgement, and at least
// TailProbeFloor. The probe is a PROBE with the path's next PSN, which
// the peer acknowledges at once: that acknowledgement shows, by the gap
// rule, which of the path's outstanding packets were lost, about one RTT
// after the probe rather than MinRTO after the oldest of them. A path
// whose newest packet is itself a probe, or that has no room for another
// PSN, waits for its timers as before.
func (p *txPath) tailProbeAt(cfg *Config) Time {
	if p.state != pathActive || p.inflightPkts == 0 || p.outstanding() >= wire.SackBits || !p.newestTail {
		return Never
	}
	t := p.ptoV
	if !p.newestAckReq {
		t += cfg.AckDelay
	}
	return p.newestSent + max(t, cfg.TailProbeFloor)
}

// deadline is when the oldest outstanding packet times out, or Never.
//
// ackedSent is the send time of the newest packet the connection had
// acknowledged on any path. Once a packet sent after p's oldest one came
// back on another path, the oldest is overdue after 2·srtt + 4·rttvar of p,
// without the MinRTO floor (docs/spec.md §3.2): a path does not reorder,
// and the peer and the network are shown alive, so only a dead route (or
// a queue far deeper than p's own history) still holds it. The floor is
// meant for a connection that hears nothing at all; with it, a
// black-holed route held its packets, and the in-order messages behind
// them, for the whole 100 µs floor of the simulator (12 RTTs). The
// adaptive rtoFloor does not apply either: a stalled receiver that
// acknowledged a later packet has seen the older one too. A path without
// an RTT sample of its own uses unsampled, the slowest overtaken deadline
// (2·srtt + 4·rttvar) among the connection's sampled paths (0: none, the
// rule waits): a route dead from the path's first packet on otherwise
// waited for the floor, and the path's InitialRTT estimate could be far
// below the RTT of a slow route.
func (p *txPath) deadline(cfg *Config, ackedSent, unsampled Time) Time {
	if p.una == p.next {
		return Never
	}
	sent := p.unaSent
	t := sent + p.rtoV
	if ackedSent > sent {
		switch {
		case p.hasRTT:
			t = min(t, sent+2*p.srtt+4*p.rttvar)
		case unsampled > 0:
			t = min(t, sent+unsampled)
		}
	}
	return t
}

func (p *txPath) rttSample(rtt Time) {
	if !p.hasRTT {
		p.srtt, p.rttvar, p.hasRTT = rtt, rtt/2, true
	} else {
		d := p.srtt - rtt
		if d < 0 {
			d = -d
		}
		p.rttvar = (3*p.rttvar + d) / 4
		p.srtt = (7*p.srtt + rtt) / 8
	}
	p.stats.RTT = p.srtt
}

// advanceUna moves una past records that are no longer outstanding.
func (p *txPath) advanceUna() {
	moved := false
	for p.una != p.next && p.rec(p.una).state != recOut {
		*p.rec(p.una) = txRec{}
		p.una++
		moved = true
	}
	if moved && p.una != p.next {
		p.unaSent = p.rec(p.una).sent
	}
}

// onAckRecord applies one ACK record to path p (docs/spec.md §3.1–§3.2):
// every outstanding PSN below the cumulative PSN or set in the bitmap is
// acknowledged; every outstanding PSN below the highest acknowledged one is
// lost, because a path does not reorder. Lost content is queued for
// retransmission at once, with a fresh PSN. It reports the send time of the
// newest RECV_READY the record newly acknowledges (rrAcked false: none),
// which an ACK's FlagIdle refers to (onIdleAnswer).
func (c *Conn) onAckRecord(now Time, p *txPath, r *wire.AckRecord) (rrSent Time, rrAcked bool) {
	cum := r.Cum
	highest := cum - 1
	if h := r.Sack.Highest(); h >= 0 {
		highest = cum + 1 + wire.PSN(h)
	}
	// Never trust acknowledgements of PSNs we have not sent.
	if !highest.Less(p.next) {
		highest = p.next - 1
	}
	var ackedBytes, ackedPkts, lostPkts int
	// The record's running CE count (docs/spec.md §2.5) against the
	// newest one seen, in serial arithmetic: a stale record, overtaken on
	// another reverse route, carries an older count, which must neither
	// count marks nor move lastCE back (the marks between would then be
	// counted twice).
	ce := int(int32(r.CE - p.lastCE))
	probeAcked, dataAcked := false, false
	var newest Time // send time of the newest packet this record acknowledges
	var passed Time // the same, tail probes left out (c.ackedSent)
	c.checkSpuriousTimeout(now, p, r)
	for q := p.una; q != p.next && q.LessEq(highest); q++ {
		rec := p.rec(q)
		if rec.state == recAcked {
			continue
		}
		acked := q.Less(cum) || r.Sack.Has(int(q.Diff(cum))-1)
		switch {
		case acked && rec.state == recLost:
			// Declared lost, yet it arrived: the retransmission was
			// spurious. The queued copy carries the packet now.
			rec.state = recAcked
			p.stats.Spurious++
			c.stats.Spurious++
		case acked:
			rec.state = recAcked
			if q == p.next-1 {
				p.newestTail = false
			}
			p.inflight -= rec.bytes
			p.inflightPkts--
			c.inflight -= rec.bytes
			ackedBytes += rec.bytes
			ackedPkts++
			newest = max(newest, rec.sent)
			if !rec.tail {
				passed = max(passed, rec.sent)
			}
			switch rec.kind {
			case recData:
				dataAcked = true
				c.onPktAcked(rec.msg)
			case recProbe:
				probeAcked = true
			case recCtrl:
				if rec.ctrl.op == wire.OpRecvReady {
					rrSent, rrAcked = max(rrSent, rec.sent), true
				}
			}
		case rec.state == recOut && q.Less(highest):
			c.declareLost(p, rec)
			lostPkts++
		}
	}
	p.advanceUna()
	if p.suspect && recordHas(r, p.suspectPSN) {
		// The packet the overtaken rule gave up on arrived after all:
		// the route is slow, not dead.
		p.suspect = false
	}
	if ackedPkts > 0 {
		c.ackedSent = max(c.ackedSent, passed)
		p.suspect = false
		p.timeouts = 0
		p.backoff = 0
		c.lastAck = now
		p.decayFloor(now, &c.ep.cfg)
		// The echoed timestamp is that of the peer's latest DATA on this
		// path, so it times only DATA: an ACK of control packets alone
		// (a receiver's RECV_READYs, probes) is timed from our own send
		// record, and includes the peer's hold of it (a first-sent
		// RECV_READY's acknowledgement may wait AckDelay for the DATA it
		// releases to carry it; docs/spec.md §3.1), which the wire does
		// not report. Echoing a path that never carried DATA gave "RTTs"
		// of hundreds of µs, and with them an RTO that left a lost
		// RECV_READY unrepaired for as long.
		var rtt Time
		if dataAcked && r.EchoTS != 0 {
			rtt = Time(int32(uint32(now)-r.EchoTS)) - Time(r.Delay)
		} else {
			rtt = now - newest
		}
		if rtt <= 0 || rtt > c.ep.cfg.MaxRTO {
			rtt = 0
		} else {
			p.rttSample(rtt)
			c.noteMinRTT(rtt)
			c.stats.RTT = p.srtt
			c.noteOvertakeDeadline(p)
			if dataAcked && r.EchoTS != 0 && c.peerFwd {
				c.onFwdDelay(now, p, Time(r.FwdDelay)*wire.FwdDelayUnit)
			}
		}
		marked := 0
		if ce > 0 {
			marked = min(ce, ackedPkts)
		}
		p.stats.ECNMarks += uint64(marked)
		c.stats.ECNMarks += uint64(marked)
		c.cc.OnAckFlight(int64(now), int(p.id), ackedBytes, ackedPkts, marked, int64(rtt), p.inflight)
		p.setRTO(&c.ep.cfg)
	}
	if ce > 0 {
		p.lastCE = r.CE
	}
	if lostPkts > 0 {
		c.cc.OnLoss(int64(now), int(p.id), lostPkts)
	}
	if probeAcked && p.state == pathProbing {
		p.state = pathActive
		c.probing--
		p.probeAt = 0
		p.quickProbes = 0
		p.stats.Revived++
	}
	return rrSent, rrAcked
}

// noteOvertakeDeadline updates c.unsampled, the largest overtaken-packet
// deadline 2·srtt + 4·rttvar among the sampled paths, after p took an RTT
// sample: a scan of the paths only when p held the largest and it shrank.
func (c *Conn) noteOvertakeDeadline(p *txPath) {
	d := 2*p.srtt + 4*p.rttvar
	switch {
	case d >= c.unsampled:
		c.unsampled, c.unsampledBy = d, int(p.id)
	case c.unsampledBy == int(p.id):
		c.unsampled = 0
		for _, q := range c.paths {
			if q.hasRTT {
				if dq := 2*q.srtt + 4*q.rttvar; dq > c.unsampled {
					c.unsampled, c.unsampledBy = dq, int(q.id)
				}
			}
		}
	}
}

// onIdleAnswer handles an ACK with FlagIdle whose records newly
// acknowledge RECV_READYs, the newest of them sent at rrSent. If that one
// was sent since our latest post and the peer has sent no DATA since the
// post, the flag is the peer's answer that it has nothing to send into the
// receive: the post stops counting it among our senders (docs/spec.md
// §3.5) until its DATA comes. An acknowledgement without the flag says
// nothing about the peer's queue: a held one went after AckDelay, one of a
// path's gap at once, either while the peer may be waiting only for an
// earlier RECV_READY.
func (c *Conn) onIdleAnswer(rrSent Time) {
	if c.postIdle || rrSent < c.lastPost || c.lastData >= c.lastPost {
		return
	}
	c.postIdle = true
	c.ep.markActive()
}

// declareLost marks rec lost and queues its content again.
func (c *Conn) declareLost(p *txPath, rec *txRec) {
	rec.state = recLost
	if rec.psn == p.next-1 {
		p.newestTail = false
	}
	p.inflight -= rec.bytes
	p.inflightPkts--
	c.inflight -= rec.bytes
	p.stats.Lost++
	c.stats.Lost++
	switch rec.kind {
	case recData:
		if rec.msg.done {
			return // failed meanwhile
		}
		c.retxQ = append(c.retxQ, retxItem{kind: recData, msg: rec.msg, off: rec.off, n: rec.n, pref: int(p.id)})
	case recCtrl:
		c.retxQ = append(c.retxQ, retxItem{kind: recCtrl, ctrl: rec.ctrl, pref: int(p.id)})
	}
}

// passedTwice reports whether the two oldest outstanding packets of p were
// both sent before ackedSent, the newest packet acknowledged on any path:
// a route that swallows everything (a black hole) leaves many such packets,
// whereas random loss rarely takes two in a row.
func (p *txPath) passedTwice(ackedSent Time) bool {
	if p.outstanding() < 2 {
		return false
	}
	a, b := p.rec(p.una), p.rec(p.una+1)
	return a.state == recOut && b.state == recOut && b.sent < ackedSent
}

// onTailLoss handles the oldest packet of p overdue by the other paths'
// progress while the packets after it were not overtaken (docs/spec.md
// §3.2): it alone is declared lost and queued again, for the active path
// with the most free window rather than for p in particular (p often wins,
// its window just freed; keeping it out delayed the repair of random
// losses more than it sped up dead routes in the simulator), and p's route
// is now suspect until an acknowledgement on p, or of this very packet,
// arrives. Windows, back-off and the path's health are left alone: on a
// lossy fabric this is the ordinary loss of the last packet sent on a
// path, which resetting the window and moving the path (onPathTimeout)
// would punish as a failure.
func (c *Conn) onTailLoss(now Time, p *txPath) {
	rec := p.rec(p.una)
	p.suspect, p.suspectPSN = true, p.una
	if rec.state == recOut {
		q := len(c.retxQ)
		c.declareLost(p, rec)
		if len(c.retxQ) > q {
			c.retxQ[q].pref = -1
		}
		c.cc.OnLoss(int64(now), int(p.id), 1)
	}
	p.advanceUna()
}

// onPathTimeout fires when the oldest packet of p outlived the path's RTO
// (docs/spec.md §3.2 tail loss, §3.6 path health). Everything outstanding on
// the path is declared lost and moved. A path that times out while other
// paths make progress, or that keeps timing out, is declared bad: it moves to
// a fresh entropy (a new ECMP route) and carries no data until a probe on it
// is acknowledged. timer says whether the path's RTO expired, rather than
// the overtaken-packet deadline (docs/spec.md §3.2).
func (c *Conn) onPathTimeout(now Time, p *txPath, timer bool) {
	oldest := p.rec(p.una).sent
	to := &p.lastTO
	to.begin(p.una, p.next, oldest, p.state == pathActive, timer)
	for q := p.una; q != p.next; q++ {
		if rec := p.rec(q); rec.state == recOut {
			c.declareLost(p, rec)
			to.add(q)
		}
	}
	p.advanceUna()
	p.timeouts++
	p.backoff++
	p.setRTO(&c.ep.cfg)
	p.stats.Timeouts++
	c.stats.Timeouts++
	c.cc.OnTimeout(int64(now), int(p.id))
	othersProgress := c.lastAck > oldest
	if p.state == pathProbing || othersProgress || p.timeouts >= c.ep.cfg.BadPathTimeouts {
		c.markBad(now, p)
		to.markedBad = to.markedBad && p.state == pathProbing
	} else {
		to.markedBad = false
	}
}

// markBad moves p to a fresh entropy and schedules a probe on it.
func (c *Conn) markBad(now Time, p *txPath) {
	wasActive := p.state == pathActive
	if wasActive {
		c.probing++
	}
	p.state = pathProbing
	p.entropy = c.freshEntropy(p.plane)
	p.hasFq = false // measured on the old route
	p.stats.PathChanges++
	c.stats.PathChanges++
	p.backoff = 0
	p.setRTO(&c.ep.cfg)
	if wasActive {
		p.probeAt = now
	} else {
		p.probeAt = now + c.ep.cfg.ProbeInterval
	}
	c.cc.AddPath(int64(now), int(p.id))
}
