package conformance_test

import (
	"net"
	"time"

	"github.com/metaroce/metaroce/conformance"
	"github.com/metaroce/metaroce/transport/wire"
)

// fakeSwitches turn the fake sender into one that breaks a rule, so that
// each sender case is shown to fail for the fault it exists to catch.
type fakeSwitches struct {
	goBackN       bool // on a gap resend everything after it, not only the hole
	samePSN       bool // retransmit under the lost packet's PSN
	ignoreHint    bool // send at full speed whatever the rate hint
	stayOnBadPath bool // after a timeout keep using the same source port, never probe
	reorderLoss   bool // treat an ACK of a later packet on any path as loss of the earlier ones
	// restartUnbounded, restarting on a stale hint, sends the whole
	// message unpaced instead of at most its path windows (spec §3.5).
	restartUnbounded bool
	// widePaths, when set, gives the sender that many paths and sends
	// paced DATA on the first alone, as a sender whose hint holds it to a
	// packet in flight may: only a restart on a stale hint, which spreads
	// over every path, shows how many it has.
	widePaths int
	// lateAcks makes the first lateAcks connections (every one if
	// negative) read their ACKs only once their tail-loss timer fired
	// (at most fakeLate after the first DATA), as a
	// host that stalls the event loop does: the tail-loss timer resends
	// DATA the tester acknowledged, a spurious timeout that §3.2 permits.
	lateAcks int
	// ignoreAbort acknowledges a NACK FLOW_ABORTED but leaves the flow's
	// receive posted; placeAfterAbort fails the receive but still places
	// the flow's later DATA into it (receiver rules, spec §3.4).
	ignoreAbort, placeAfterAbort bool
	// nackBadToken answers sequenced packets with a wrong token by a
	// NACK UNKNOWN_CONN instead of dropping them silently (spec §3.3).
	nackBadToken bool
	// boundsByOffset checks only that a segment starts inside the posted
	// buffer: it places what fits of a segment across the end, then fails
	// the receive (spec §3.4 fails the message before placing anything).
	boundsByOffset bool
	// acceptBadToken does not check tokens; ignoreCE never counts CE
	// marks in its ACK records.
	acceptBadToken, ignoreCE bool
	// silentDuplicate drops a DATA whose PSN arrived before without the
	// immediate ACK spec §3.1 asks for.
	silentDuplicate bool
	// overCopy places a short last segment as a whole segment's worth,
	// writing zeros past the end of the message.
	overCopy bool
	// resegment retransmits a segment one byte earlier than its first
	// copy, cut differently (spec §3.4 places only segments of size S).
	resegment bool
	// ignoreMaxDgram cuts DATA to fit its own datagram size,
	// fakeOwnDgram, not the smaller max_dgram the peer announced (spec §1).
	ignoreMaxDgram bool
	// notReadyBadToken sends its NACK NOT_READY with a token other than
	// the peer's (spec §2.1: every packet echoes the receiver's token).
	notReadyBadToken bool
	// tooLargeBadToken sends its NACK TOO_LARGE with a token other than
	// the peer's (spec §2.1).
	tooLargeBadToken bool
	// unknownConnNotReady answers a packet for an unknown connection with
	// a NACK of reason NOT_READY instead of UNKNOWN_CONN (spec §2.7).
	unknownConnNotReady bool
	// oversizeNack breaks or orders the NACK that answers DATA of a
	// message longer than its buffer (spec §3.4: BAD_OFFSET, value the
	// message's length).
	oversizeNack oversizeNack
	// placement breaks or orders the answer to DATA that names a buffer
	// the receive lacks or disagrees with its started message (spec §3.4:
	// dropped unwritten, NACK BAD_OFFSET with the DATA's offset, the
	// receive left posted).
	placement placementFault
	// firstData breaks the answer to a malformed DATA that would be its
	// message's first (spec §3.4: dropped alone, it starts nothing and
	// fails no buffer, whatever length it names).
	firstData firstDataFault
}

// firstDataFault is how the fake answers a malformed DATA on a receive
// whose message nothing started yet. The zero value is right: it checks the
// DATA's form against the length it names, drops and NACKs a malformed one
// as a bad placement and leaves the receive unstarted; only a well-formed
// one's length is checked against the capacity.
type firstDataFault int

const (
	firstDataRight firstDataFault = iota
	// firstDataStarts takes the malformed DATA's length for the
	// message's before dropping it, as the reference datapath once did:
	// every genuine DATA then disagrees with that length and is refused,
	// and the receive never completes.
	firstDataStarts
	// firstDataLengthFirst checks the length against the capacity before
	// the DATA's form, as the reference datapath once did: a malformed
	// first DATA naming a message longer than the buffer fails it.
	firstDataLengthFirst
)

// placementFault is how the fake answers DATA that §3.4 drops as a bad
// placement. The zero value is right: it sends the NACK at once, before the
// DATA's acknowledgement and long before the receive completes; the
// ordered one is right too, the others break the rule.
type placementFault int

const (
	placementRight placementFault = iota
	// placementNackLast sends the NACK only once the receive has
	// completed and the tester has taken the completion.
	placementNackLast
	// placementNone drops the DATA unwritten but sends no NACK.
	placementNone
	// placementWrites NACKs the DATA right but places what fits of it
	// all the same, as a segment of its message: a NACK path that forgot
	// to drop.
	placementWrites
	// placementFails NACKs the DATA right but fails the receive, as the
	// first DATA of a message too long for its buffer does.
	placementFails
	// placementValueLen puts the DATA's message length in the NACK's
	// value, the value of a message too long for its buffer, instead of
	// its offset.
	placementValueLen
)

// oversizeNack is how the fake answers DATA of a message longer than the
// buffer posted for it. The zero value is right, and sends the NACK as
// the receive fails, racing the failure to the tester as a real IUT's
// NACK and control channel do; the ordered ones are right too and decide
// the race, the others break the rule.
type oversizeNack int

const (
	oversizeRight oversizeNack = iota
	// oversizeNackFirst reports the failed receive only once the tester
	// acknowledged the NACK: it has seen the NACK before the failure.
	oversizeNackFirst
	// oversizeNackLast sends the NACK only once the tester has taken the
	// failed receive's completion.
	oversizeNackLast
	// oversizeNone sends no NACK at all.
	oversizeNone
	// oversizeTooLarge sends reason TOO_LARGE, the sender's word for a
	// message too long for its buffer (spec §2.7), instead of BAD_OFFSET.
	oversizeTooLarge
	// oversizeOffset puts the offending DATA's offset in the value, as
	// the other BAD_OFFSETs of §3.4 do, instead of the message's length.
	oversizeOffset
)

const (
	fakePaths = 3                     // sender paths, ids 1..3 (path 0 carries the receiver's packets)
	fakeRTO   = 50 * time.Millisecond // tail-loss timer, far above the tester's delays on a loaded host
	fakeLate  = 2 * time.Second       // the longest a late connection leaves its ACKs unread (it reads them once its timer fired)
	// fakeStale is the age past which the fake's hint is stale when data
	// becomes ready with nothing in flight: its stand-in for one smoothed
	// RTT, generous for loopback.
	fakeStale = 2 * time.Millisecond
	// fakeInitWindow is each path's initial window, bytes: a restart on a
	// stale hint sends at most one per path before the next hint.
	fakeInitWindow = 64 << 10
	// fakeOwnDgram is the datagram size the fake would use by itself,
	// above the tester's max_dgram: what ignoreMaxDgram sends.
	fakeOwnDgram = 1400
)

// fakeClock0 is the origin of the fake's DATA timestamps.
var fakeClock0 = time.Now()

// fakeTS is the DATA timestamp of now: ns mod 2^32 (spec §2.3).
func fakeTS(now time.Time) uint32 { return uint32(now.Sub(fakeClock0)) }

// fakeSeg is one DATA segment in flight.
type fakeSeg struct {
	flow, msg uint32
	off       uint64
	data      []byte
	msgLen    uint64
	sentAt    time.Time
	order     uint64 // global send order, for reorderLoss
	send      *fakeSend
}

type fakeSend struct {
	flow    uint32
	data    []byte
	tag     uint32
	left    int // segments not yet acknowledged
	started bool
}

type fakePath struct {
	id   uint16
	sock *net.UDPConn
	next wire.PSN
	out  map[wire.PSN]*fakeSeg
	bad  bool
}

// fakeSender is the sending half of the fake IUT: it spreads a message over
// fakePaths source ports, recovers losses selectively by the gap rule and a
// tail timer, paces to the rate hint and moves a timed-out path to a new
// port announced by a PROBE. Its switches break one of these each.
type fakeSender struct {
	f      *fakeIUT
	sw     fakeSwitches
	paths  []*fakePath
	sends  map[uint32][]*fakeSend      // queued per flow
	ready  map[uint32][]wire.RecvReady // announced groups per flow
	nextRx map[uint32]uint32           // next group number per flow
	queue  []*fakeSeg                  // waiting for the pacer
	hint   uint64                      // bytes/s
	hintAt time.Time                   // when hint arrived
	// restartLeft is what the sender may still send unpaced while it
	// restarts on a stale hint (restart); it ends with the next hint.
	restart     bool
	restartLeft int
	pace        time.Time
	order       uint64
	rr          int
	// late, lateUntil, unread: ACKs arriving before lateUntil (set by the
	// first DATA) wait in unread until then; see fakeSwitches.lateAcks.
	late      bool
	lateUntil time.Time
	unread    []wire.Ack
	timedOut  bool // a tail-loss timer fired
}

// newFakeSender starts the sender of the fake's conn-th connection (1, 2, …).
func newFakeSender(f *fakeIUT, sw fakeSwitches, conn int) *fakeSender {
	s := &fakeSender{f: f, sw: sw, sends: map[uint32][]*fakeSend{}, ready: map[uint32][]wire.RecvReady{}, nextRx: map[uint32]uint32{},
		late: sw.lateAcks < 0 || conn <= sw.lateAcks}
	n := fakePaths
	if sw.widePaths > 0 {
		n = sw.widePaths
	}
	for i := 0; i < n; i++ {
		s.paths = append(s.paths, &fakePath{id: uint16(i + 1), sock: fakeSock(), out: map[wire.PSN]*fakeSeg{}})
	}
	return s
}

func fakeSock() *net.UDPConn {
	c, err := net.ListenUDP("udp", &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1)})
	if err != nil {
		panic(err)
	}
	return c
}

func (s *fakeSender) close() {
	for _, p := range s.paths {
		p.sock.Close()
	}
}

func (s *fakeSender) queueSend(flow uint32, data []byte, tag uint32) {
	s.sends[flow] = append(s.sends[flow], &fakeSend{flow: flow, data: data, tag: tag})
	s.match(flow)
}

func (s *fakeSender) onRecvReady(r *wire.RecvReady) {
	if r.HasPiggy {
		// A piggybacked hint applies before the RECV_READY (spec §3.5).
		s.setHint(r.PiggyHint, time.Now())
	}
	s.ready[r.Flow] = append(s.ready[r.Flow], *r)
	s.match(r.Flow)
}

// setHint applies a rate hint in kbit/s and ends a restart.
func (s *fakeSender) setHint(kbps uint32, now time.Time) {
	s.hint, s.hintAt, s.restart = uint64(kbps)*1000/8, now, false
}

// idle reports whether nothing is queued or in flight.
func (s *fakeSender) idle() bool {
	if len(s.queue) > 0 {
		return false
	}
	for _, p := range s.paths {
		if len(p.out) > 0 {
			return false
		}
	}
	return true
}

// match pairs the flow's oldest send with its next announced group.
func (s *fakeSender) match(flow uint32) {
	for len(s.sends[flow]) > 0 && len(s.ready[flow]) > 0 {
		sd, rr := s.sends[flow][0], s.ready[flow][0]
		s.sends[flow], s.ready[flow] = s.sends[flow][1:], s.ready[flow][1:]
		if uint64(len(sd.data)) > rr.Entries[0].Capacity {
			nk := wire.Nack{Header: s.f.hdr(wire.OpNack), Reason: wire.NackTooLarge, Flow: flow, Msg: rr.Msg, Value: uint64(len(sd.data))}
			nk.PSN, nk.Flags = s.f.txPSN, wire.FlagAckReq
			if s.sw.tooLargeBadToken {
				nk.Token ^= 1
			}
			s.f.txPSN++
			s.f.sock.WriteToUDP(nk.Append(nil), s.f.peer)
			s.f.comps <- conformance.Completion{Send: true, Flow: flow, Err: "message too large for the posted buffer"}
			continue
		}
		if now := time.Now(); s.hint > 0 && s.idle() && now.Sub(s.hintAt) > fakeStale {
			s.restart, s.restartLeft = true, len(s.paths)*fakeInitWindow
			if s.sw.restartUnbounded {
				s.restartLeft = 1 << 40
			}
		}
		seg := s.seg()
		sd.left = max(1, (len(sd.data)+seg-1)/seg)
		for off := 0; off == 0 || off < len(sd.data); off += seg {
			end := min(len(sd.data), off+seg)
			s.queue = append(s.queue, &fakeSeg{flow: flow, msg: rr.Msg, off: uint64(off), data: sd.data[off:end], msgLen: uint64(len(sd.data)), send: sd})
		}
	}
}

// tick sends what the pacer allows and runs the tail-loss timers.
func (s *fakeSender) tick(now time.Time) {
	defer s.readLateAcks(now)
	for len(s.queue) > 0 {
		if s.restart {
			if s.restartLeft < len(s.queue[0].data) {
				break // the restart window is spent: wait for a fresh hint
			}
			s.restartLeft -= len(s.queue[0].data)
		} else if s.hint > 0 && !s.sw.ignoreHint && now.Before(s.pace) {
			break
		}
		g := s.queue[0]
		s.queue = s.queue[1:]
		p := s.nextPath()
		if s.sw.widePaths > 0 && s.hint > 0 && !s.restart {
			p = s.paths[0]
		}
		s.transmit(p, g, false, now)
		if s.hint > 0 && !s.sw.ignoreHint && !s.restart {
			s.pace = now.Add(time.Duration(float64(len(g.data)) / float64(s.hint) * 1e9))
		}
	}
	for _, p := range s.paths {
		var oldest *fakeSeg
		for _, g := range p.out {
			if oldest == nil || g.sentAt.Before(oldest.sentAt) {
				oldest = g
			}
		}
		if oldest == nil || now.Sub(oldest.sentAt) < fakeRTO {
			continue
		}
		lost := p.out
		p.out = map[wire.PSN]*fakeSeg{}
		s.timedOut = true
		dst := p
		if !s.sw.stayOnBadPath {
			p.bad = true
			p.sock.Close()
			p.sock = fakeSock()
			pr := wire.Probe{Header: s.f.hdr(wire.OpProbe)}
			pr.Path, pr.PSN, pr.Flags = p.id, p.next, wire.FlagAckReq
			p.next++
			p.sock.WriteToUDP(pr.Append(nil), s.f.peer)
			dst = s.nextPath()
		}
		for _, g := range lost {
			s.transmit(dst, g, true, now)
		}
	}
}

// readLateAcks ends a late connection's stall once its tail-loss timer has
// fired (the spurious timeout the stall is there to cause) or, failing
// that, at lateUntil: the order of events, not the host's speed, decides
// what the tester sees.
func (s *fakeSender) readLateAcks(now time.Time) {
	if !s.late || s.lateUntil.IsZero() || (!s.timedOut && now.Before(s.lateUntil)) {
		return
	}
	s.late = false
	for i := range s.unread {
		s.onAck(&s.unread[i], now)
	}
	s.unread = nil
}

func (s *fakeSender) nextPath() *fakePath {
	for i := 0; i < len(s.paths); i++ {
		p := s.paths[s.rr%len(s.paths)]
		s.rr++
		if !p.bad {
			return p
		}
	}
	return s.paths[0]
}

func (s *fakeSender) transmit(p *fakePath, g *fakeSeg, retx bool, now time.Time) {
	if retx && s.sw.resegment && g.off > 0 {
		cp := *g
		cp.off, cp.data = g.off-1, g.send.data[g.off-1:g.off+uint64(len(g.data))]
		g = &cp
	}
	d := wire.Data{Header: s.f.hdr(wire.OpData), Flow: g.flow, Msg: g.msg, Offset: g.off, MsgLen: g.msgLen, Payload: g.data}
	d.Path, d.PSN, d.Timestamp = p.id, p.next, fakeTS(now)
	p.next++
	if s.late && s.lateUntil.IsZero() {
		s.lateUntil = now.Add(fakeLate)
	}
	if retx {
		d.Flags = wire.FlagAckReq | wire.FlagRetransmit
	}
	g.sentAt, g.order = now, s.order
	s.order++
	p.out[d.PSN] = g
	p.sock.WriteToUDP(d.Append(nil), s.f.peer)
}

// resend retransmits g, which was sent under psn on p and is lost.
func (s *fakeSender) resend(p *fakePath, psn wire.PSN, g *fakeSeg, now time.Time) {
	if !s.sw.samePSN {
		s.transmit(p, g, true, now)
		return
	}
	d := wire.Data{Header: s.f.hdr(wire.OpData), Flow: g.flow, Msg: g.msg, Offset: g.off, MsgLen: g.msgLen, Payload: g.data}
	d.Path, d.PSN, d.Flags, d.Timestamp = p.id, psn, wire.FlagAckReq|wire.FlagRetransmit, fakeTS(now)
	g.sentAt = now
	p.out[psn] = g
	p.sock.WriteToUDP(d.Append(nil), s.f.peer)
}

func (s *fakeSender) onAck(a *wire.Ack, now time.Time) {
	if s.late && !s.lateUntil.IsZero() {
		s.unread = append(s.unread, *a)
		return
	}
	s.setHint(a.RateHint, now)
	for i := 0; i < a.N; i++ {
		r := &a.Records[i]
		if r.Path == 0 || int(r.Path) > len(s.paths) {
			continue
		}
		p := s.paths[r.Path-1]
		high, any := r.Cum, false
		var newest uint64
		for psn, g := range p.out {
			d := psn.Diff(r.Cum)
			if d < 0 || (d > 0 && r.Sack.Has(int(d)-1)) {
				delete(p.out, psn)
				newest = max(newest, g.order)
				s.acked(g)
				if p.bad {
					p.bad = false
				}
				if !any || high.Less(psn) {
					high, any = psn, true
				}
			}
		}
		if p.bad && r.Cum.Diff(p.next) >= 0 {
			p.bad = false // the probe was acknowledged
		}
		var lost []wire.PSN
		for psn := range p.out {
			if any && psn.Less(high) {
				lost = append(lost, psn)
			}
		}
		for _, psn := range lost {
			g := p.out[psn]
			delete(p.out, psn)
			s.resend(p, psn, g, now)
			if s.sw.goBackN {
				s.goBack(p, g, now)
			}
		}
		if s.sw.reorderLoss && newest > 0 {
			for _, q := range s.paths {
				for psn, g := range q.out {
					if g.order < newest {
						delete(q.out, psn)
						s.resend(q, psn, g, now)
					}
				}
			}
		}
	}
}

// goBack resends every segment of g's message after g, acknowledged or not.
func (s *fakeSender) goBack(p *fakePath, g *fakeSeg, now time.Time) {
	seg := uint64(s.seg())
	for off := g.off + seg; off < g.msgLen; off += seg {
		end := min(g.msgLen, off+seg)
		s.transmit(p, &fakeSeg{flow: g.flow, msg: g.msg, off: off, data: g.send.data[off:end], msgLen: g.msgLen, send: g.send}, true, now)
	}
}

// seg is the DATA payload the sender cuts messages into, bytes.
func (s *fakeSender) seg() int {
	if s.sw.ignoreMaxDgram {
		return fakeOwnDgram - wire.DataHeaderLen
	}
	return s.f.seg
}

func (s *fakeSender) acked(g *fakeSeg) {
	if g.send.left--; g.send.left == 0 {
		s.f.comps <- conformance.Completion{Send: true, Flow: g.flow, Sizes: []int{len(g.send.data)}}
	}
}
