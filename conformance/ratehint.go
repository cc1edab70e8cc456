package conformance

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/metaroce/metaroce/conformance/control"
	"github.com/metaroce/metaroce/transport/wire"
)

// hintKbps is the rate hint the tester announces, kbit/s (250 kB/s): slow
// enough that pacing is measurable over a few dozen segments on a loaded
// host, and far below what a restart window allows per RTT, so that a hint
// which went stale is ignored (spec §3.5 "Restart after idling").
const hintKbps = 2000

// hintBytesPerSec is hintKbps in bytes per second.
const hintBytesPerSec = float64(hintKbps) * 1000 / 8

// initWindow is the default initial path window (cc.Config.InitWindow),
// bytes: what each path of a sender restarting on a stale hint may have in
// flight before a fresh hint reaches it (spec §3.5).
const initWindow = 64 << 10

// hintedSegments is how many segments each rate-hint check measures after
// its allowance.
const hintedSegments = 40

// settleWait is how long the tester waits, still acknowledging, between the
// IUT's send request returning and announcing the buffer, so that the send
// is queued in the IUT's datapath when the RECV_READY arrives.
const settleWait = 5 * time.Millisecond

// staleAge is how long the stale check's hint waits before the IUT has data
// ready: many smoothed RTTs of a loopback connection even on a loaded host,
// so the hint is stale under spec §3.5 whatever the IUT measured.
const staleAge = 30 * time.Millisecond

// stalePaths is the fewest paths the stale check sizes its message for:
// a sender may use more paths than a paced transfer showed (one, when the
// hint holds it to a packet or two in flight), and each adds InitWindow to
// the allowance. An IUT using more leaves too little past its allowance
// to judge, and the check is run again sized for the paths it used.
const stalePaths = 4

// hintFactor is how far above the hint a measured rate may be before the
// case fails: the tester's clock and the IUT's pacing jitter (±⅛ per gap)
// stay well inside it, an unpaced sender does not.
const hintFactor = 2

func caseRateHint(ctx context.Context, e *Env) (Verdict, string) {
	v, fresh, paths := rateHintFresh(ctx, e)
	if v != Pass {
		return v, fresh
	}
	v, stale := rateHintStale(ctx, e, paths)
	return v, fresh + "; " + stale
}

// rateHintFresh is the main check: the IUT is asked to send first, so its
// message waits for a buffer (§3.4), and the RECV_READY that announces the
// buffer carries the hint piggybacked (§2.11). The hint is then fresh when
// the data becomes ready to send and binds from the first DATA: after the
// first packet (before its first RTT sample a hinted pacer releases one
// packet at a time, §3.5), every DATA must respect it. It also returns how
// many paths the IUT sent on.
func rateHintFresh(ctx context.Context, e *Env) (Verdict, string, int) {
	const flow = 23
	msg := e.payload((hintedSegments+1)*segment - segment/3)
	p, why := open(ctx, e)
	if p == nil {
		return Fail, why, 0
	}
	defer p.closeSock()
	p.rateHint = hintKbps
	if v, why := sendFirst(ctx, e, p, flow, msg); why != "" {
		return v, why, 0
	}
	// Read before the write: the IUT's first DATA may arrive, stamped by
	// the kernel, before the write returns to the tester.
	sentAt := time.Now()
	p.announceHinted(flow, 0, 1<<20)
	if v, why := p.awaitExact(ctx, flow, msg); why != "" {
		return v, "fresh hint: " + why, 0
	}
	m := p.measurePace(flow, segment)
	paths := len(p.facts(flow, nil).paths)
	ev := fmt.Sprintf("fresh hint (on the RECV_READY, the send already queued; first DATA %s after the RECV_READY left): %s",
		sinceSent(sentAt, m.start), m)
	if v, why := judgeFresh(m); v != Pass {
		return v, ev + ": " + why, paths
	}
	return Pass, ev, paths
}

// sinceSent is the evidence of how long after sent (the tester's clock,
// read before the write of a packet) first arrived (the kernel's stamp
// where there is one). Both read the wall clock and the write comes after
// sent, so first can precede sent only when the wall clock stepped back
// between the two readings: that is shown as 0 and said so, never as a
// reply that came before its cause.
func sinceSent(sent, first time.Time) string {
	d := first.Sub(sent)
	if d < 0 {
		return fmt.Sprintf("0s (its arrival stamp reads %v before the send: the wall clock stepped back)", (-d).Round(time.Microsecond))
	}
	return d.Round(time.Microsecond).String()
}

// rateHintStale is the second check: the hint arrives in an ACK while the
// IUT has nothing to send and is staleAge old when its data becomes ready.
// The IUT may then ignore it until the ACK of its first DATA brings a fresh
// one, sending at most its path windows, each capped at InitWindow (§3.5
// "Restart after idling"); the tester allows that for every path it saw DATA
// on and requires the rest to respect the hint. paths is how many paths the
// fresh check saw; the message is sized for at least stalePaths so that
// some of it is measured past the allowance. An IUT whose restart used more
// paths than that leaves too little past its allowance to judge: the check
// is run again on a fresh connection with the message sized for the paths
// it used. Should that too leave too little (the IUT spreading its restart
// ever wider), the case is skipped, saying why: a check that measured
// nothing cannot pass.
func rateHintStale(ctx context.Context, e *Env, paths int) (Verdict, string) {
	paths = max(paths, stalePaths)
	v, ev, seen := rateHintStaleOnce(ctx, e, paths)
	if v != Skip || seen <= paths || ctx.Err() != nil {
		return v, ev
	}
	v, again, _ := rateHintStaleOnce(ctx, e, seen)
	return v, fmt.Sprintf("%s; again with the message sized for %d paths: %s", ev, seen, again)
}

// rateHintStaleOnce runs the stale check once with the message sized for
// paths restart windows. It returns Skip, with how many paths the IUT's
// restart used, when too little was sent past the allowance to judge.
func rateHintStaleOnce(ctx context.Context, e *Env, paths int) (Verdict, string, int) {
	const flow = 26
	size := hintedSegments*segment + paths*initWindow - segment/3
	if size > control.MaxBuffer {
		return Skip, fmt.Sprintf("stale hint: a message sized for %d paths (%d B) is over the control contract's %d B", paths, size, control.MaxBuffer), 0
	}
	msg := e.payload(size)
	p, why := open(ctx, e)
	if p == nil {
		return Fail, why, 0
	}
	defer p.closeSock()
	p.rateHint = hintKbps
	p.ackPath(0)
	p.quiet(ctx, staleAge)
	if v, why := sendFirst(ctx, e, p, flow, msg); why != "" {
		return v, why, 0
	}
	p.announce(flow, 0, uint64(max(1<<20, len(msg))))
	if v, why := p.awaitExact(ctx, flow, msg); why != "" {
		return v, "stale hint: " + why, 0
	}
	seen := len(p.facts(flow, nil).paths)
	m := p.measurePace(flow, seen*initWindow)
	ev := fmt.Sprintf("stale hint (%v old, %d B message, restart allowance %d paths × %d B): %s", staleAge, len(msg), seen, initWindow, m)
	if v, why := judgeStale(m, seen, paths); why != "" {
		return v, ev + ": " + why, seen
	}
	return Pass, ev, seen
}

// minMeasured is the least payload a rate-hint check must measure past its
// allowance to judge the rate, bytes: a quarter of the segments it sizes
// its message for.
const minMeasured = hintedSegments / 4 * segment

// judgeFresh judges the measure of the fresh check. Its message is sized so
// that a sender keeping to the tester's max_dgram sends some 40 segments
// past the allowance; too little measured (a sender whose DATA are larger
// than the max_dgram lets them be) proves nothing about its pacing and
// fails, naming the largest DATA, rather than passing on a rate of 0 or on
// a single gap.
func judgeFresh(m paceSpan) (Verdict, string) {
	if m.measured < minMeasured {
		return Fail, fmt.Sprintf("%d B past the allowance is too little to judge the rate (at least %d B); the largest DATA carried %d B, the tester's max_dgram allows %d",
			m.measured, minMeasured, m.largest, segment)
	}
	return m.judge()
}

// judgeStale judges the measure of a stale check whose message was sized
// for paths restart windows and whose IUT sent on seen paths. Too little
// measured past the allowance is no evidence of pacing: it is a Skip,
// never a Pass.
func judgeStale(m paceSpan, seen, paths int) (Verdict, string) {
	if m.measured < minMeasured {
		return Skip, fmt.Sprintf("the IUT's restart used %d paths, the message was sized for %d: %d B past the allowance is too little to judge the rate (at least %d B)",
			seen, paths, m.measured, minMeasured)
	}
	return m.judge()
}

// sendFirst asks the IUT to send msg on flow before the tester announces a
// buffer for it, and waits settleWait.
func sendFirst(ctx context.Context, e *Env, p *peer, flow uint32, msg []byte) (Verdict, string) {
	if err := e.IUT.Send(ctx, flow, msg, senderTag); err != nil {
		if errors.Is(err, ErrNoControl) {
			return Skip, "needs a control channel"
		}
		return Fail, "IUT send: " + err.Error()
	}
	p.quiet(ctx, settleWait)
	return Pass, ""
}

// announceHinted sends the RECV_READY of a one-buffer receive group with
// the tester's rate hint piggybacked, with the true record of the IUT's
// path 0 (§2.11, §3.5: the sender applies it before the RECV_READY).
func (p *peer) announceHinted(flow, msg uint32, capacity uint64) {
	rr := wire.RecvReady{Header: p.hdr(wire.OpRecvReady), Flow: flow, Msg: msg, N: 1}
	rr.PSN, rr.Flags = p.psn, wire.FlagAckReq
	p.psn++
	rr.Entries[0] = wire.RecvEntry{Capacity: capacity, Tag: senderTag}
	r := p.pathState(0)
	rr.HasPiggy, rr.PiggyHint = true, p.rateHint
	rr.Piggy = wire.AckRecord{Path: 0, Cum: r.cum, Sack: r.sack, EchoTS: r.echoTS}
	p.send(rr.Append(nil))
}

// awaitExact waits for every byte of message 0 of flow and compares it
// with msg; a non-empty reason ends the case with v.
func (p *peer) awaitExact(ctx context.Context, flow uint32, msg []byte) (Verdict, string) {
	got, ok := p.awaitMessage(ctx, flow, 0, len(msg), messageWait)
	switch {
	case !ok:
		return Fail, fmt.Sprintf("message incomplete after %v", messageWait)
	case !bytes.Equal(got, msg):
		return Fail, "message bytes differ from what the IUT was asked to send"
	}
	return Pass, ""
}

// paceSpan is the tester's measure of one paced message, by the first
// arrival of each segment: the DATA of the allowance are skipped and the rate is taken from the first DATA after
// them to the last. Arrival times are the kernel's where it provides them,
// so a tester that reads late does not see a paced sender as a burst; the
// IUT's own DATA timestamps are reported beside them.
type paceSpan struct {
	skipped  int           // payload bytes of the allowance
	burst    time.Duration // from the first DATA to the first measured one
	measured int           // payload bytes after the first measured DATA
	span     time.Duration // first to last measured DATA
	tsSpan   tsDelta       // the same span by the IUT's timestamps
	retx     int           // DATA repeating content already received, not measured
	start    time.Time     // arrival of the first DATA
	// firstMs is the payload that arrived within 1 ms of the first DATA:
	// an unpaced burst shows here.
	firstMs int
	largest int // the largest payload of one DATA, bytes
}

// measurePace measures the DATA of flow past the first allow bytes.
func (p *peer) measurePace(flow uint32, allow int) paceSpan {
	var m paceSpan
	var start, first, last time.Time
	var firstTS, lastTS uint32
	placed := map[uint64]bool{}
	for _, d := range p.rxData {
		if d.flow != flow {
			continue
		}
		if placed[d.off] {
			// Repeated content (a spurious timeout on a stalled
			// host, which §3.2 permits) is counted, not measured.
			m.retx++
			continue
		}
		placed[d.off] = true
		m.largest = max(m.largest, len(d.payload))
		if start.IsZero() {
			start = d.at
		}
		if d.at.Sub(start) < time.Millisecond {
			m.firstMs += len(d.payload)
		}
		switch {
		case m.skipped < allow:
			m.skipped += len(d.payload)
		case first.IsZero():
			first, firstTS = d.at, d.ts
		default:
			m.measured += len(d.payload)
			last, lastTS = d.at, d.ts
		}
	}
	m.start = start
	if !first.IsZero() {
		m.burst = first.Sub(start)
	}
	if !last.IsZero() {
		m.span, m.tsSpan = last.Sub(first), tsDelta(lastTS-firstTS)
	}
	return m
}

// rate is the measured rate, bytes/s (0 when nothing was measured).
func (m paceSpan) rate() float64 {
	if m.span <= 0 {
		return 0
	}
	return float64(m.measured) / m.span.Seconds()
}

// String is the evidence text of the measure.
func (m paceSpan) String() string {
	r := m.rate()
	return fmt.Sprintf("first %d B (allowance) in %v, %d B within 1 ms of the first DATA; %d B after them in %v: %.0f kB/s, hint %.0f kB/s (%.2f×); %v by the IUT's DATA timestamps; %d DATA repeated content",
		m.skipped, m.burst.Round(10*time.Microsecond), m.firstMs, m.measured, m.span.Round(time.Millisecond),
		r/1000, hintBytesPerSec/1000, r/hintBytesPerSec, m.tsSpan, m.retx)
}

// judge fails a rate over hintFactor times the hint, or bytes measured in
// one instant.
func (m paceSpan) judge() (Verdict, string) {
	switch {
	case m.measured > 0 && m.span <= 0:
		return Fail, "sent in one instant"
	case m.rate() > hintFactor*hintBytesPerSec:
		return Fail, fmt.Sprintf("over %d× the hint", hintFactor)
	}
	return Pass, ""
}
