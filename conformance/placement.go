package conformance

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/metaroce/metaroce/transport/wire"
)

// The placement cases hold the IUT to the rest of docs/spec.md §3.4's
// "Placement" beyond a message too long for its buffer (out-of-bounds): a
// DATA that names a posted receive and a message already started there, but
// disagrees with it, is dropped unwritten (DropBadPlacement) and NACKed
// BAD_OFFSET with its offset as the value (§2.7). Only a well-formed first
// DATA's length fails the buffer; this DATA is dropped alone, so the
// receive stays posted and the message's correct DATA still completes it
// (the NACK's sender "carries on", §3.4).
//
// The placement-first cases send their malformed DATA before any other, on
// the freshly posted receive, with a message length of its own: "a first
// packet that is itself a bad placement starts nothing" (§3.4). It is
// dropped and NACKed alone like the others, its length is not the
// message's (the genuine DATA that follow still agree), and a length
// larger than the capacity fails no buffer, since only a well-formed first
// DATA speaks for the message's length.

// placementSegs is how many segments the placement cases' message has: two
// whole and a short last one.
const placementSegs = 3

// placementLen is the placement cases' message length for segment size s
// (payload bytes per DATA): the short last segment leaves bytes of its
// segment past the message where a misplaced payload shows.
func placementLen(s int) int { return 2*s + s/3 }

// placementCap is the capacity the placement cases post for segment size s:
// guard bytes past the message, and not a multiple of s, so that a segment
// can start inside the buffer and end past it.
func placementCap(s int) int { return 3*s + s/2 }

// misplaced is one malformed DATA: the buffer index it names, its message
// length and offset, its payload length (bytes), and which agreement of
// §3.4 it breaks, said with its numbers for the evidence.
type misplaced struct {
	index  uint8
	msgLen uint64
	off, n int
	breaks string
}

// placementCase is one kind of malformed DATA. shape builds it for segment
// size s, the message's length l and the capacity c posted. Each breaks one
// agreement and keeps the others, and is a well-formed DATA (its payload
// lies inside the length it names, §2.4), so that only placement rejects it.
// first sends it before any of the message's own DATA, so that it would be
// the message's first; otherwise it follows the first segment, once that
// was acknowledged.
type placementCase struct {
	id, title string
	flow      uint32
	first     bool
	shape     func(s, l, c int) misplaced
}

var placementCases = []placementCase{
	{id: "placement-index", flow: 40,
		title: "DATA for a buffer index the receive group lacks: NACK BAD_OFFSET value offset, the receive still completes",
		shape: func(s, l, _ int) misplaced {
			// A segment right in every field but its index.
			return misplaced{index: 1, msgLen: uint64(l), off: s, n: s, breaks: "index 1, the posted group has 1 buffer"}
		}},
	{id: "placement-length", flow: 41,
		title: "DATA whose message length differs from the first DATA's: unwritten, NACK BAD_OFFSET value offset, the receive still completes",
		shape: func(s, l, _ int) misplaced {
			// The last segment of a 3-segment message that fits the
			// buffer: it reaches past the started message's end.
			return misplaced{msgLen: uint64(3 * s), off: 2 * s, n: s,
				breaks: fmt.Sprintf("message length %d, the first DATA's %d", 3*s, l)}
		}},
	{id: "placement-offset", flow: 42,
		title: "DATA at an offset not a multiple of the segment size: unwritten, NACK BAD_OFFSET value offset, the receive still completes",
		shape: func(s, l, _ int) misplaced {
			off := s + s/2
			return misplaced{msgLen: uint64(l), off: off, n: min(s, l-off),
				breaks: fmt.Sprintf("offset not a multiple of the segment size %d", s)}
		}},
	{id: "placement-size", flow: 43,
		title: "DATA one byte short of its segment: unwritten, NACK BAD_OFFSET value offset, the receive still completes",
		shape: func(s, l, _ int) misplaced {
			return misplaced{msgLen: uint64(l), off: s, n: s - 1,
				breaks: fmt.Sprintf("%d payload bytes, want min(S, L − offset) = %d", s-1, min(s, l-s))}
		}},
	{id: "placement-capacity", flow: 44,
		title: "DATA across the buffer's end after a first DATA that fit: unwritten, NACK BAD_OFFSET value offset, the receive still completes",
		shape: func(s, l, c int) misplaced {
			// Only a length other than the first DATA's takes a
			// well-formed DATA past the capacity: this is the last
			// segment of a 4-segment message, which starts inside
			// the buffer and ends past it. It is not the message's
			// first DATA, so §3.4 drops it alone and NACKs its
			// offset, rather than failing the buffer with the length.
			return misplaced{msgLen: uint64(4 * s), off: 3 * s, n: s,
				breaks: fmt.Sprintf("ends past capacity %d; the first DATA's message is %d bytes", c, l)}
		}},
	{id: "placement-first", flow: 45, first: true,
		title: "a malformed first DATA with a length of its own that fits: unwritten, starts nothing, NACK BAD_OFFSET value offset, the message then completes",
		shape: func(s, l, c int) misplaced {
			// The last segment of a 3-segment message, which fits
			// the buffer, half a segment off the grid: it lies past
			// the genuine message's end, where a write of it stays
			// in the guard bytes, and the length it names is not l.
			off := 2*s + s/2
			return misplaced{msgLen: uint64(3 * s), off: off, n: 3*s - off,
				breaks: fmt.Sprintf("the receive's first DATA, offset not a multiple of the segment size %d, message length %d within capacity %d", s, 3*s, c)}
		}},
	{id: "placement-first-oversize", flow: 46, first: true,
		title: "a malformed first DATA naming a message longer than the buffer: unwritten, fails no buffer, NACK BAD_OFFSET value offset, the message then completes",
		shape: func(s, l, c int) misplaced {
			// The third segment of an 8-segment message, longer
			// than the buffer, one byte short: on the grid and
			// within the capacity, its bytes past the genuine
			// message's end show in the guard bytes if written. A
			// well-formed first DATA of that length would fail the
			// buffer (out-of-bounds); this one is a bad placement.
			return misplaced{msgLen: uint64(8 * s), off: 2 * s, n: s - 1,
				breaks: fmt.Sprintf("the receive's first DATA, %d payload bytes, want min(S, L − offset) = %d; message length %d past capacity %d", s-1, s, 8*s, c)}
		}},
}

// placementCaseList returns the placement cases in run order.
func placementCaseList() []*Case {
	out := make([]*Case, len(placementCases))
	for i := range placementCases {
		pc := placementCases[i]
		out[i] = &Case{ID: pc.id, NeedsControl: true, Spec: "§3.4, §2.7", Level: Mandatory, Title: pc.title, Run: pc.run}
	}
	return out
}

// run posts a receive, starts its message with a correct first segment
// (unless pc.first), sends the malformed DATA, then the message's other
// segments, and judges: the receive completes with the message intact and
// nothing past it written, and the malformed DATA drew the NACK BAD_OFFSET
// of §3.4, which may come before or after the completion.
func (pc placementCase) run(ctx context.Context, e *Env) (Verdict, string) {
	flow := pc.flow
	p, rr, v, why := setupSized(ctx, e, flow, func(s int) uint64 { return uint64(placementCap(s)) })
	if why != "" {
		return v, why
	}
	defer p.closeSock()
	s := p.seg
	l, capacity := placementLen(s), placementCap(s)
	m := pc.shape(s, l, capacity)
	msg := e.payload(l)
	junk := e.payload(m.n) // unlike the message's bytes, so a write of it shows
	segment := func(i int) []byte { return msg[i*s : min(l, (i+1)*s)] }

	// The first segment starts the message with length l. It must reach
	// the IUT before the malformed DATA, or that DATA would be the
	// message's first and be judged as such (§3.4): the tester waits for
	// its acknowledgement. A first case wants exactly that, and sends the
	// malformed DATA on the receive as posted.
	sent := 0
	if !pc.first {
		first := p.psn
		p.send(p.data(flow, rr.Msg, uint64(l), 0, segment(0), -1, wire.FlagAckReq))
		if !p.awaitAcked(ctx, first, 2*time.Second) {
			return Fail, fmt.Sprintf("no ACK record covering the message's first DATA (PSN %d) within 2s", first)
		}
		sent = 1
	}
	rule := "§3.4 drops that DATA alone"
	if pc.first {
		rule = "§3.4 drops a malformed first DATA alone, and it starts nothing"
		if m.msgLen > uint64(capacity) {
			rule += ": only a well-formed first DATA fails the buffer on its length"
		}
	}

	d := wire.Data{Header: p.hdr(wire.OpData), Flow: flow, Msg: rr.Msg, Index: m.index,
		Offset: uint64(m.off), MsgLen: m.msgLen, Payload: junk}
	d.Flags = wire.FlagAckReq
	d.PSN = p.psn
	p.psn++
	p.send(d.Append(nil))
	what := fmt.Sprintf("DATA [%d, %d) index %d of a %d-byte message (%s)", m.off, m.off+m.n, m.index, m.msgLen, m.breaks)
	want := wire.Nack{Header: wire.Header{Token: p.localTok}, Reason: wire.NackBadOffset, Flow: flow, Msg: rr.Msg, Index: m.index, Value: uint64(m.off)}

	// The NACK and the completion leave the IUT by different ways (the
	// socket, the control channel) and may come in either order; both are
	// taken as they come, in both waits below.
	var c Completion
	var n wire.Nack
	gotC, gotN := false, false
	poll := func() {
		if !gotC {
			c, gotC = p.takeOp(flow, false)
		}
		if !gotN {
			n, gotN = p.connNack()
		}
	}
	// The rest of the message goes only once the IUT has handled the
	// malformed DATA (its NACK or the acknowledgement of its PSN came):
	// DATA arriving after the message completed is stale and draws no
	// NACK (§3.4). An IUT that answers neither is given the wait anyway.
	wctx, cancel := context.WithTimeout(ctx, completionWait)
	p.wait(wctx, nil, func() bool { poll(); return gotN || gotC || p.acked(d.PSN) })
	cancel()
	if gotC {
		got := fmt.Sprintf("completed (sizes %v)", c.Sizes)
		if c.Err != "" {
			got = fmt.Sprintf("failed (%s)", c.Err)
		}
		return Fail, fmt.Sprintf("the receive %s on %s, with %d of the message's %d segments sent, want it still posted: %s%s%s",
			got, what, sent, placementSegs, rule, foundIn(c, msg[:min(l, sent*s)], m.off, junk), nackSeen(gotN, n, want))
	}
	for i := sent; i < placementSegs; i++ {
		p.send(p.data(flow, rr.Msg, uint64(l), i*s, segment(i), -1, wire.FlagAckReq))
	}
	wctx, cancel = context.WithTimeout(ctx, completionWait)
	defer cancel()
	p.wait(wctx, nil, func() bool { poll(); return gotC && gotN })

	if !gotC {
		return Fail, fmt.Sprintf("no completion within %v of the message's last DATA, sent after %s; want the %d-byte message completed: %s%s%s",
			completionWait, what, l, rule, nackSeen(gotN, n, want), p.laterNacks(n, gotN))
	}
	if c.Err != "" {
		return Fail, fmt.Sprintf("the receive failed (%s) after %s, want completed: %s, and the message's correct DATA completes the receive%s",
			c.Err, what, rule, nackSeen(gotN, n, want))
	}
	if bad := checkBytes(c, capacity, msg); bad != "" {
		return Fail, fmt.Sprintf("after %s: %s%s; want the %d-byte message intact and the guard bytes past it, capacity %d%s",
			what, bad, foundIn(c, msg, m.off, junk), l, capacity, nackSeen(gotN, n, want))
	}
	if !gotN {
		return Fail, fmt.Sprintf("the %d-byte message completed intact, but %s drew no NACK within %v, want %s (§3.4)",
			l, what, completionWait, nackText(want, want))
	}
	if m.index != 0 && n.Index == 0 {
		// §2.7's index is the entry concerned, 0 where none: a buffer
		// the group lacks may be named either way.
		want.Index = 0
	}
	if n.Reason != want.Reason || n.Value != want.Value || n.Flow != want.Flow || n.Msg != want.Msg ||
		n.Index != want.Index || n.Token != want.Token {
		return Fail, fmt.Sprintf("the %d-byte message completed intact; %s drew NACK %s, want %s (§3.4, §2.7: BAD_OFFSET, value the DATA's offset)",
			l, what, nackText(n, want), nackText(want, n))
	}
	return Pass, fmt.Sprintf("%s: NACK %s, want %s; the %d-byte message completed intact after it, want intact; %d of %d guard bytes past it intact, want all",
		what, nackText(n, want), nackText(want, n), l, capacity-l, capacity-l)
}

// foundIn says, for a failure's evidence, how many bytes of the malformed
// DATA's payload junk (placed at off) the completed buffer holds where it
// should hold the message msg or the guard byte: "" when none, or when the
// completion has no buffer of its own to look in. msg is what of the
// message was sent before the completion: the guard byte is due past it.
func foundIn(c Completion, msg []byte, off int, junk []byte) string {
	if len(c.Bufs) != 1 {
		return ""
	}
	buf := c.Bufs[0]
	found := 0
	for i, b := range junk {
		at := off + i
		if at >= len(buf) {
			break
		}
		want := byte(GuardByte)
		if at < len(msg) {
			want = msg[at]
		}
		if buf[at] == b && b != want {
			found++
		}
	}
	if found == 0 {
		return ""
	}
	return fmt.Sprintf(" (%d of the malformed DATA's %d payload bytes are there)", found, len(junk))
}

// nackSeen adds to a failure's evidence the NACK the malformed DATA drew so
// far, beside the one required, or that none came.
func nackSeen(got bool, n, want wire.Nack) string {
	if !got {
		return "; no NACK seen"
	}
	return fmt.Sprintf("; NACK %s seen, want %s", nackText(n, want), nackText(want, n))
}

// laterNacks adds to a failure's evidence the NACKs on the tester's
// connection after first, the one the malformed DATA drew (when got): an
// IUT that took the malformed DATA's length for the message's refuses the
// message's own DATA since, and shows it there by their offsets. "" when
// none came.
func (p *peer) laterNacks(first wire.Nack, got bool) string {
	var seen []string
	for _, x := range p.nacks {
		if x.DstConn != p.localConn {
			continue
		}
		if got {
			got = false // first is the first of them (connNack)
			continue
		}
		seen = append(seen, nackText(x, first))
	}
	if len(seen) == 0 {
		return ""
	}
	return fmt.Sprintf("; %d more NACK(s) came after it: %s", len(seen), strings.Join(seen, ", "))
}

// acked reports whether an ACK record the tester got for its path 0 covers
// psn, cumulatively or by a SACK bit.
func (p *peer) acked(psn wire.PSN) bool {
	for _, r := range p.acks {
		if psn.Less(r.Cum) {
			return true
		}
		if d := psn.Diff(r.Cum); d > 0 && d <= wire.SackBits && r.Sack.Has(int(d)-1) {
			return true
		}
	}
	return false
}

// awaitAcked waits up to d for an ACK record covering psn.
func (p *peer) awaitAcked(ctx context.Context, psn wire.PSN, d time.Duration) bool {
	wctx, cancel := context.WithTimeout(ctx, d)
	defer cancel()
	return p.wait(wctx, nil, func() bool { return p.acked(psn) })
}
