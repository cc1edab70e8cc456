package conformance

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/metaroce/metaroce/transport/wire"
)

// senderTag is the tag of every buffer the tester announces and every send
// it asks of the IUT.
const senderTag = 3

// messageWait bounds the wait for a message the IUT sends.
const messageWait = 3 * time.Second

// sendSetup opens a connection, lets prep configure the tester's side (a
// filter), announces message 0 of flow with one buffer of
// capacity bytes and asks the IUT to send msg on flow. A non-empty reason
// ends the case with v.
func sendSetup(ctx context.Context, e *Env, flow uint32, capacity uint64, msg []byte, prep func(*peer)) (*peer, Verdict, string) {
	p, why := open(ctx, e)
	if p == nil {
		return nil, Fail, why
	}
	if prep != nil {
		prep(p)
	}
	p.announce(flow, 0, capacity)
	if err := e.IUT.Send(ctx, flow, msg, senderTag); err != nil {
		p.closeSock()
		if errors.Is(err, ErrNoControl) {
			return nil, Skip, "needs a control channel"
		}
		return nil, Fail, "IUT send: " + err.Error()
	}
	return p, Pass, ""
}

// announce sends the RECV_READY of a one-buffer receive group.
func (p *peer) announce(flow, msg uint32, capacity uint64) {
	rr := wire.RecvReady{Header: p.hdr(wire.OpRecvReady), Flow: flow, Msg: msg, N: 1}
	rr.PSN, rr.Flags = p.psn, wire.FlagAckReq
	p.psn++
	rr.Entries[0] = wire.RecvEntry{Capacity: capacity, Tag: senderTag}
	p.send(rr.Append(nil))
}

// assembled returns message msg of flow as placed from the DATA processed
// so far, and whether every byte of its length n arrived.
func (p *peer) assembled(flow, msg uint32, n int) ([]byte, bool) {
	buf := make([]byte, n)
	have := make([]bool, n)
	got := 0
	for _, d := range p.rxData {
		if d.flow != flow || d.msg != msg || int(d.off)+len(d.payload) > n {
			continue
		}
		copy(buf[d.off:], d.payload)
		for i := range d.payload {
			if !have[int(d.off)+i] {
				have[int(d.off)+i] = true
				got++
			}
		}
	}
	return buf, got == n
}

// awaitMessage waits up to d for every byte of message msg of flow.
func (p *peer) awaitMessage(ctx context.Context, flow, msg uint32, n int, d time.Duration) ([]byte, bool) {
	wctx, cancel := context.WithTimeout(ctx, d)
	defer cancel()
	var buf []byte
	// Assembling is only tried once enough payload arrived: trying after
	// every datagram made reading a large burst quadratic, and the ACKs
	// of its last packets late.
	seen, total := 0, 0
	ok := p.wait(wctx, nil, func() bool {
		for ; seen < len(p.rxData); seen++ {
			if d := &p.rxData[seen]; d.flow == flow && d.msg == msg {
				total += len(d.payload)
			}
		}
		if total < n {
			return false
		}
		var done bool
		buf, done = p.assembled(flow, msg, n)
		return done
	})
	return buf, ok
}

// dataFacts summarises the DATA the tester processed on one flow.
type dataFacts struct {
	packets int
	reused  []rxData // DATA reusing a (path, PSN) already seen, lost ones included
	paths   map[uint16]int
}

// facts inspects the DATA of flow; lost lists packets the tester dropped,
// whose PSNs count as used.
func (p *peer) facts(flow uint32, lost []rxData) dataFacts {
	f := dataFacts{paths: map[uint16]int{}}
	type key struct {
		path uint16
		psn  wire.PSN
	}
	used := map[key]bool{}
	for _, d := range lost {
		used[key{d.path, d.psn}] = true
	}
	for _, d := range p.rxData {
		if d.flow != flow {
			continue
		}
		f.packets++
		f.paths[d.path]++
		k := key{d.path, d.psn}
		if used[k] {
			f.reused = append(f.reused, d)
		}
		used[k] = true
	}
	return f
}

// dataOf parses a DATA datagram for the record of a dropped packet.
func dataOf(pk *rxPacket) (rxData, bool) {
	var d wire.Data
	if pk.h.Op != wire.OpData {
		return rxData{}, false
	}
	if _, err := wire.ParseData(&d, pk.b); err != nil {
		return rxData{}, false
	}
	return rxData{at: pk.at, src: pk.src, path: pk.h.Path, psn: pk.h.PSN, flags: pk.h.Flags, flow: d.Flow, msg: d.Msg,
		off: d.Offset, msgLen: d.MsgLen, ts: d.Timestamp, payload: append([]byte(nil), d.Payload...)}, true
}

// probedFrom reports the first PROBE on path from a source other than old.
func (p *peer) probedFrom(path uint16, old rxData) (rxPacket, bool) {
	for _, pr := range p.probes {
		if pr.h.Path == path && pr.src != old.src && pr.at.After(old.at) {
			return pr, true
		}
	}
	return rxPacket{}, false
}

// dropFirstData returns a peer set-up whose filter drops the first DATA of
// flow for which match reports true, records it in *lost and delivers
// everything else: the one precise loss the sender-side cases inject.
func dropFirstData(flow uint32, match func(rxData) bool, lost *[]rxData) func(*peer) {
	return func(p *peer) {
		p.filter = func(pk *rxPacket) action {
			if d, ok := dataOf(pk); ok && d.flow == flow && len(*lost) == 0 && match(d) {
				*lost = append(*lost, d)
				return drop
			}
			return deliver
		}
	}
}

func caseSenderLoss(ctx context.Context, e *Env) (Verdict, string) {
	return untilNoRepeats(ctx, e, senderLossAttempt)
}

// senderLossAttempt drops the first DATA of a 24-segment message and judges
// its retransmission (§3.2 gap rule, §2.3 fresh PSN).
func senderLossAttempt(ctx context.Context, e *Env) (Verdict, string, []repeat) {
	const flow = 20
	var lost []rxData
	p, v, why := sendSetupN(ctx, e, flow, 24, dropFirstData(flow, func(rxData) bool { return true }, &lost))
	if why != "" {
		return v, why, nil
	}
	defer p.closeSock()
	msg := e.lastMsg
	got, ok := p.awaitMessage(ctx, flow, 0, len(msg), messageWait)
	if len(lost) == 0 {
		return Fail, "no DATA arrived", nil
	}
	l := lost[0]
	if !ok {
		return Fail, fmt.Sprintf("dropped DATA path %d PSN %d offset %d: message incomplete after %v", l.path, l.psn, l.off, messageWait), nil
	}
	if !bytes.Equal(got, msg) {
		return Fail, "message bytes differ from what the IUT was asked to send", nil
	}
	p.quiet(ctx, silence) // late duplicates still count
	f := p.facts(flow, lost)
	var rt *rxData
	for i := range p.rxData {
		if d := &p.rxData[i]; d.flow == flow && d.off == l.off && d.at.After(l.at) {
			rt = d
			break
		}
	}
	later := 0
	for _, d := range p.rxData {
		if d.flow == flow && d.path == l.path && l.psn.Less(d.psn) && (rt == nil || d.at.Before(rt.at)) {
			later++
		}
	}
	switch {
	case rt == nil:
		return Fail, "message complete but no retransmission of the dropped offset seen", nil
	case !bytes.Equal(rt.payload, l.payload) || rt.msgLen != l.msgLen:
		return Fail, fmt.Sprintf("retransmission of offset %d carries different content", l.off), nil
	case len(f.reused) > 0:
		r := f.reused[0]
		return Fail, fmt.Sprintf("PSN %d reused on path %d (offset %d): a retransmission needs a fresh PSN", r.psn, r.path, r.off), nil
	}
	if reps := p.repeats(flow, lost); len(reps) > 0 {
		return Fail, fmt.Sprintf("dropped path %d PSN %d offset %d, retransmitted on path %d PSN %d after %v; then %s: retransmit only what was lost",
			l.path, l.psn, l.off, rt.path, rt.psn, rt.at.Sub(l.at).Round(10*time.Microsecond), describeRepeats(reps)), reps
	}
	where := fmt.Sprintf("same path, PSN %d → %d", l.psn, rt.psn)
	if rt.path != l.path {
		if pr, ok := p.probedFrom(l.path, l); ok {
			where = fmt.Sprintf("path %d PSN %d; path %d marked bad (PROBE from port %d)", rt.path, rt.psn, l.path, pr.src.Port())
		} else {
			return Fail, fmt.Sprintf("retransmitted on path %d (PSN %d) instead of path %d, which was not marked bad (no PROBE from a new port)", rt.path, rt.psn, l.path), nil
		}
	}
	return Pass, fmt.Sprintf("dropped path %d PSN %d offset %d (%d later packets on the path arrived); retransmitted once after %v, %s; %d DATA over %d paths, no other content repeated",
		l.path, l.psn, l.off, later, rt.at.Sub(l.at).Round(10*time.Microsecond), where, f.packets, len(f.paths)), nil
}

// sendSetupN is sendSetup with a fresh message of n segments, kept in
// e.lastMsg for the case to compare.
func sendSetupN(ctx context.Context, e *Env, flow uint32, n int, prep func(*peer)) (*peer, Verdict, string) {
	e.lastMsg = e.payload(n*segment - segment/3)
	return sendSetup(ctx, e, flow, 1<<20, e.lastMsg, prep)
}

// segment is the DATA payload the IUT uses towards the tester, bytes.
const segment = testerMaxDgram - wire.DataHeaderLen

func caseSenderReorder(ctx context.Context, e *Env) (Verdict, string) {
	return untilNoRepeats(ctx, e, senderReorderAttempt)
}

// senderReorderAttempt holds the DATA of one path behind later DATA of the
// others and requires that nothing is retransmitted (§3.2: a path does not
// reorder, paths may).
func senderReorderAttempt(ctx context.Context, e *Env) (Verdict, string, []repeat) {
	const flow = 21
	var first *rxData
	heldN, behind := 0, 0
	p, v, why := sendSetupN(ctx, e, flow, 24, func(p *peer) {
		others := 0
		p.filter = func(pk *rxPacket) action {
			d, ok := dataOf(pk)
			if !ok || d.flow != flow {
				return deliver
			}
			if first == nil {
				first = &d
			}
			if d.path == first.path {
				heldN++
				return hold
			}
			if len(p.held) > 0 {
				behind++
				if others++; others%3 == 0 {
					p.releaseNow = true
				}
			}
			return deliver
		}
	})
	if why != "" {
		return v, why, nil
	}
	defer p.closeSock()
	msg := e.lastMsg
	got, ok := p.awaitMessage(ctx, flow, 0, len(msg), messageWait)
	if !ok {
		return Fail, fmt.Sprintf("message incomplete after %v", messageWait), nil
	}
	if !bytes.Equal(got, msg) {
		return Fail, "message bytes differ from what the IUT was asked to send", nil
	}
	p.quiet(ctx, silence)
	f := p.facts(flow, nil)
	return judgeReorder(first.path, heldN, behind, f, p.repeats(flow, nil))
}

// judgeReorder judges an attempt of sender-reorder: heldN DATA of path
// were held while behind DATA of other paths were delivered past them; f
// and reps are the flow's DATA and the content they repeated. An attempt
// in which no DATA overtook a held one reordered nothing (a sender pacing
// its DATA further apart than the tester holds them): it is skipped,
// saying so, since a pass would claim what was never shown. The repeats
// it returns are those its verdict rests on, which make the attempt
// inconclusive (untilNoRepeats): none for a sender on one path, which is
// skipped whatever it repeated, as there was nothing to reorder.
func judgeReorder(path uint16, heldN, behind int, f dataFacts, reps []repeat) (Verdict, string, []repeat) {
	switch {
	case len(f.paths) < 2:
		return Skip, fmt.Sprintf("the IUT sent on %d path: nothing to reorder between paths", len(f.paths)), nil
	case len(reps) > 0:
		return Fail, fmt.Sprintf("DATA of path %d held behind later DATA of other paths, nothing lost: %s", path, describeRepeats(reps)), reps
	case behind == 0:
		return Skip, fmt.Sprintf("%d DATA of path %d held, but no DATA of another path arrived while they were (%d DATA, %d paths): nothing was reordered", heldN, path, f.packets, len(f.paths)), nil
	}
	return Pass, fmt.Sprintf("%d DATA of path %d delivered behind %d later DATA of other paths (%d DATA, %d paths): no retransmission", heldN, path, behind, f.packets, len(f.paths)), nil
}

// tailBound is the longest a conforming sender may take to retransmit a
// lost tail: MaxRTO (200 ms, spec §3.2) plus scheduling slack.
const tailBound = 250 * time.Millisecond

func caseTailLoss(ctx context.Context, e *Env) (Verdict, string) {
	const flow = 22
	var lost []rxData
	isTail := func(d rxData) bool { return d.off+uint64(len(d.payload)) == d.msgLen }
	p, v, why := sendSetupN(ctx, e, flow, 6, dropFirstData(flow, isTail, &lost))
	if why != "" {
		return v, why
	}
	defer p.closeSock()
	msg := e.lastMsg
	got, ok := p.awaitMessage(ctx, flow, 0, len(msg), messageWait)
	if len(lost) == 0 {
		return Fail, "the last DATA of the message never arrived"
	}
	l := lost[0]
	if !ok {
		return Fail, fmt.Sprintf("tail (offset %d, path %d PSN %d) not retransmitted within %v", l.off, l.path, l.psn, messageWait)
	}
	if !bytes.Equal(got, msg) {
		return Fail, "message bytes differ from what the IUT was asked to send"
	}
	var rt *rxData
	for i := range p.rxData {
		if d := &p.rxData[i]; d.flow == flow && d.off == l.off {
			rt = d
			break
		}
	}
	if rt == nil {
		// The tail's bytes arrived cut differently from its first copy,
		// which a receiver does not place (§3.4): no time to judge.
		return Fail, fmt.Sprintf("message complete but no retransmission of the dropped tail (offset %d, %d bytes) seen", l.off, len(l.payload))
	}
	took := rt.at.Sub(l.at)
	if took > tailBound {
		return Fail, fmt.Sprintf("tail retransmitted after %v, bound %v (MaxRTO + slack)", took.Round(time.Microsecond), tailBound)
	}
	return Pass, fmt.Sprintf("tail offset %d (path %d PSN %d) retransmitted after %v on path %d PSN %d (bound %v)",
		l.off, l.path, l.psn, took.Round(10*time.Microsecond), rt.path, rt.psn, tailBound)
}

func caseBlackhole(ctx context.Context, e *Env) (Verdict, string) {
	const flow = 24
	var dead *rxData
	dropped := 0
	p, v, why := sendSetupN(ctx, e, flow, 48, func(p *peer) {
		p.filter = func(pk *rxPacket) action {
			if dead == nil {
				if d, ok := dataOf(pk); ok && d.flow == flow {
					dead = &d
				}
			}
			if dead != nil && pk.src == dead.src {
				dropped++
				return drop
			}
			return deliver
		}
	})
	if why != "" {
		return v, why
	}
	defer p.closeSock()
	msg := e.lastMsg
	got, ok := p.awaitMessage(ctx, flow, 0, len(msg), messageWait)
	if dead == nil {
		return Fail, "no DATA arrived"
	}
	if !ok {
		return Fail, fmt.Sprintf("source port %d (path %d) blackholed: message incomplete after %v, %d datagrams dropped", dead.src.Port(), dead.path, messageWait, dropped)
	}
	if !bytes.Equal(got, msg) {
		return Fail, "message bytes differ from what the IUT was asked to send"
	}
	wctx, cancel := context.WithTimeout(ctx, time.Second)
	var pr rxPacket
	probed := p.wait(wctx, nil, func() bool {
		var ok bool
		pr, ok = p.probedFrom(dead.path, *dead)
		return ok
	})
	cancel()
	if !probed {
		return Fail, fmt.Sprintf("message completed over other paths, but no PROBE on path %d from a port other than %d", dead.path, dead.src.Port())
	}
	f := p.facts(flow, nil)
	return Pass, fmt.Sprintf("port %d (path %d) blackholed, %d datagrams dropped; message completed on %d paths; PROBE on path %d from port %d after %v",
		dead.src.Port(), dead.path, dropped, len(f.paths), dead.path, pr.src.Port(), pr.at.Sub(dead.at).Round(10*time.Microsecond))
}

func caseTooLarge(ctx context.Context, e *Env) (Verdict, string) {
	const flow = 25
	const capacity = 1000
	msg := e.payload(3000)
	p, v, why := sendSetup(ctx, e, flow, capacity, msg, nil)
	if why != "" {
		return v, why
	}
	defer p.closeSock()
	var nack *wire.Nack
	wctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	p.wait(wctx, nil, func() bool {
		for i := range p.nacks {
			if n := &p.nacks[i]; n.Flow == flow && n.DstConn == p.localConn {
				nack = n
				return true
			}
		}
		return false
	})
	cancel()
	c, done := p.awaitOp(ctx, flow, true, completionWait)
	f := p.facts(flow, nil)
	switch {
	case nack == nil:
		return Fail, fmt.Sprintf("no NACK for a %d-byte message into a %d-byte buffer", len(msg), capacity)
	case nack.Reason != wire.NackTooLarge || nack.Msg != 0 || nack.Value != uint64(len(msg)):
		return Fail, fmt.Sprintf("NACK %v msg %d value %d, want TooLarge msg 0 value %d", nack.Reason, nack.Msg, nack.Value, len(msg))
	case nack.Token != p.localTok:
		// A receiver drops a packet whose token is not its own (§2.1):
		// this NACK would fail nothing there.
		return Fail, fmt.Sprintf("NACK TooLarge token %#x, want %#x (the tester's, §2.1)", nack.Token, p.localTok)
	case f.packets > 0:
		return Fail, fmt.Sprintf("%d DATA packets sent into a buffer too small", f.packets)
	case !done:
		return Fail, "NACK TooLarge sent, but the IUT's send did not complete"
	case c.Err == "":
		return Fail, "NACK TooLarge sent, but the IUT's send completed without error"
	}
	return Pass, fmt.Sprintf("NACK TooLarge value %d; send failed (%s); no DATA", nack.Value, c.Err)
}
