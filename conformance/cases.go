package conformance

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/metaroce/metaroce/transport/wire"
)

// silence is how long the tester listens to conclude that the IUT sent
// nothing (an absence can only be observed over a window).
const silence = 300 * time.Millisecond

// completionWait bounds the wait for a receive the tester completed.
const completionWait = 3 * time.Second

// Cases returns the suite in run order: the placement cases (placement.go)
// follow out-of-bounds, the other placement rule of §3.4.
func Cases() []*Case {
	cs := []*Case{
		{ID: "handshake", Spec: "§2.8", Level: Mandatory, Title: "HELLO answered by HELLO_ACK echoing conn and token", Run: caseHandshake},
		{ID: "forged-token", NeedsControl: true, Spec: "§2.1", Level: Mandatory, Title: "DATA with a wrong token is dropped silently", Run: caseForgedToken},
		{ID: "unknown-conn", Spec: "§2.7", Level: Mandatory, Title: "DATA to an unknown conn id draws NACK UnknownConn", Run: caseUnknownConn},
		{ID: "sack", NeedsControl: true, Spec: "§2.5, §2.11, §3.1", Level: Mandatory, Title: "ACK record after PSNs 0,1,3,5,6: cum 2, SACK bits {0,2,3}", Run: caseSack},
		{ID: "reorder", NeedsControl: true, Spec: "§2.4", Level: Mandatory, Title: "segments in reverse order place identical bytes", Run: caseReorder},
		{ID: "out-of-bounds", NeedsControl: true, Spec: "§3.4, §2.7", Level: Mandatory, Title: "DATA beyond the posted capacity is rejected unwritten and NACKed BAD_OFFSET", Run: caseOutOfBounds},
	}
	cs = append(cs, placementCaseList()...)
	return append(cs, []*Case{
		{ID: "duplicate", NeedsControl: true, Spec: "§2.5", Level: Mandatory, Title: "duplicate DATA is acknowledged, placed once", Run: caseDuplicate},
		{ID: "ecn-echo", NeedsControl: true, Spec: "§1, §2.5, §2.11", Level: Mandatory, Title: "ACK records count the CE-marked DATA of the path", Run: caseECN},
		{ID: "not-ready", Spec: "§3.4, §2.7", Level: Mandatory, Title: "DATA for a message never announced draws NACK NotReady", Run: caseNotReady},
		{ID: "sender-loss", NeedsControl: true, Spec: "§3.2, §2.3", Level: Mandatory, Title: "one lost DATA is retransmitted alone, under a fresh PSN, on its path", Run: caseSenderLoss},
		{ID: "sender-reorder", NeedsControl: true, Spec: "§3.2, §2.3", Level: Mandatory, Title: "reordering between paths causes no retransmission", Run: caseSenderReorder},
		{ID: "tail-loss", NeedsControl: true, Spec: "§3.2", Level: Mandatory, Title: "a lost last DATA is retransmitted by the tail-loss timer", Run: retried(caseTailLoss)},
		{ID: "rate-hint", NeedsControl: true, Spec: "§3.5, §2.5", Level: Mandatory, Title: "the sender paces to the receiver's rate hint", Run: retried(caseRateHint)},
		{ID: "blackhole", NeedsControl: true, Spec: "§3.6, §1", Level: Mandatory, Title: "a blackholed source port: traffic moves, the path probes a new port", Run: caseBlackhole},
		{ID: "too-large", NeedsControl: true, Spec: "§3.4, §2.7", Level: Mandatory, Title: "a message larger than the announced buffer: NACK TooLarge, send fails", Run: caseTooLarge},
		{ID: "flow-aborted", NeedsControl: true, Spec: "§3.4, §2.7", Level: Mandatory, Title: "NACK FlowAborted is acknowledged and fails the flow's receive unwritten", Run: caseFlowAborted},
		{ID: "max-dgram", NeedsControl: true, Spec: "§1, §2.8", Level: Mandatory, Title: "no datagram of the IUT is longer than the max_dgram the tester announced", Run: caseMaxDgram},
		{ID: "close", Spec: "§2.10", Level: Mandatory, Title: "CLOSE answered by CLOSE with REPLY", Run: caseClose},
	}...)
}

// open connects and turns a setup failure into a verdict.
func open(ctx context.Context, e *Env) (*peer, string) {
	p, err := e.connect(ctx)
	if err != nil {
		return nil, "setup: " + err.Error()
	}
	return p, ""
}

// post posts a one-buffer receive of capacity bytes on flow and waits for its
// RECV_READY. skip is true when the IUT has no control channel.
func post(ctx context.Context, e *Env, p *peer, flow uint32, capacity uint64) (wire.RecvReady, bool, string) {
	if err := e.IUT.PostRecv(ctx, flow, []uint64{capacity}, []uint32{7}); err != nil {
		if errors.Is(err, ErrNoControl) {
			return wire.RecvReady{}, false, ""
		}
		return wire.RecvReady{}, false, "post receive: " + err.Error()
	}
	wctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	var got wire.RecvReady
	ok := p.wait(wctx, nil, func() bool {
		for _, r := range p.ready {
			if r.Flow == flow {
				got = r
				return true
			}
		}
		return false
	})
	if !ok {
		return got, false, fmt.Sprintf("no RECV_READY for flow %d", flow)
	}
	if got.N != 1 || got.Entries[0].Capacity != capacity {
		return got, false, fmt.Sprintf("RECV_READY entries %d capacity %d, posted 1 × %d", got.N, got.Entries[0].Capacity, capacity)
	}
	return got, true, ""
}

// setup is open + post; a non-empty reason means the case ends with v.
func setup(ctx context.Context, e *Env, flow uint32, capacity uint64) (p *peer, rr wire.RecvReady, v Verdict, reason string) {
	return setupSized(ctx, e, flow, func(int) uint64 { return capacity })
}

// setupSized is setup for a case whose capacity depends on the segment size
// the handshake agreed: capOf gets it (payload bytes per DATA) and returns
// the capacity to post, bytes.
func setupSized(ctx context.Context, e *Env, flow uint32, capOf func(seg int) uint64) (p *peer, rr wire.RecvReady, v Verdict, reason string) {
	p, why := open(ctx, e)
	if p == nil {
		return nil, rr, Fail, why
	}
	rr, ok, why := post(ctx, e, p, flow, capOf(p.seg))
	if !ok {
		p.closeSock()
		if why == "" {
			return nil, rr, Skip, "needs a control channel"
		}
		return nil, rr, Fail, why
	}
	return p, rr, Pass, ""
}

func (e *Env) payload(n int) []byte {
	b := make([]byte, n)
	for i := range b {
		b[i] = byte(e.Rng.Uint32())
	}
	return b
}

// recvBuffer returns the buffer of a one-buffer receive completion, or why
// the completion cannot be judged: the IUT must report every posted buffer
// in full, capacity bytes, or no byte it leaves out is known to be unwritten.
func recvBuffer(c Completion, capacity int) ([]byte, string) {
	if len(c.Bufs) != 1 {
		return nil, fmt.Sprintf("completion reports %d buffers, posted 1", len(c.Bufs))
	}
	if b := c.Bufs[0]; len(b) != capacity {
		return nil, fmt.Sprintf("completion reports a buffer of %d bytes, posted %d", len(b), capacity)
	}
	return c.Bufs[0], ""
}

// checkBytes compares a completion of a one-buffer receive of capacity
// bytes against the message sent.
func checkBytes(c Completion, capacity int, want []byte) string {
	if c.Err != "" {
		return "receive failed: " + c.Err
	}
	buf, bad := recvBuffer(c, capacity)
	if bad != "" {
		return bad
	}
	if len(c.Sizes) != 1 || c.Sizes[0] != len(want) {
		return fmt.Sprintf("sizes %v, want [%d]", c.Sizes, len(want))
	}
	if !bytes.Equal(buf[:len(want)], want) {
		for i := range want {
			if buf[i] != want[i] {
				return fmt.Sprintf("byte %d is %#x, want %#x", i, buf[i], want[i])
			}
		}
	}
	// Nothing lands past the message: a receiver that copies a whole
	// segment's worth of a short last segment writes there.
	for i := len(want); i < len(buf); i++ {
		if buf[i] != GuardByte {
			return fmt.Sprintf("buffer byte %d past the %d-byte message written (%#x)", i, len(want), buf[i])
		}
	}
	return ""
}

// guardIntact reports the first byte of a failed one-buffer receive of
// capacity bytes that is not GuardByte: written by a packet that was to be
// rejected. what names that packet for the evidence.
func guardIntact(c Completion, capacity int, what string) string {
	buf, bad := recvBuffer(c, capacity)
	if bad != "" {
		return bad
	}
	for i, b := range buf {
		if b != GuardByte {
			return fmt.Sprintf("buffer byte %d written (%#x, want the guard byte %#x) %s", i, b, GuardByte, what)
		}
	}
	return ""
}

func caseHandshake(ctx context.Context, e *Env) (Verdict, string) {
	p, err := newPeer(e.IUT, e.Rng)
	if err != nil {
		return Fail, err.Error()
	}
	defer p.closeSock()
	ack, err := p.handshake(ctx)
	if err != nil {
		return Fail, err.Error()
	}
	e.IUT.Accept(ctx)
	switch {
	case ack.DstConn != p.localConn || ack.Token != p.localTok:
		return Fail, fmt.Sprintf("HELLO_ACK dst_conn %#x token %#x, sent src_conn %#x token %#x", ack.DstConn, ack.Token, p.localConn, p.localTok)
	case ack.SrcTok == 0:
		return Fail, "HELLO_ACK src_token is 0"
	case ack.SrcConn == 0:
		return Fail, "HELLO_ACK src_conn is 0"
	}
	return Pass, fmt.Sprintf("HELLO_ACK dst_conn %#x token echoed, src_conn %#x, nonzero token, max_dgram %d", ack.DstConn, ack.SrcConn, ack.MaxDgram)
}

func caseForgedToken(ctx context.Context, e *Env) (Verdict, string) {
	const flow = 2
	const capacity = 4096
	msg := e.payload(100)
	p, rr, v, why := setup(ctx, e, flow, capacity)
	if why != "" {
		return v, why
	}
	defer p.closeSock()
	forged := p.data(flow, rr.Msg, uint64(len(msg)), 0, bytes.Repeat([]byte{0x5a}, len(msg)), 0, wire.FlagAckReq)
	forged[8] ^= 0x80 // flip a token bit
	p.psn = 0
	nAcks, nNacks := len(p.acks), len(p.nacks)
	p.send(forged)
	p.quiet(ctx, silence)
	if len(p.acks) != nAcks {
		return Fail, fmt.Sprintf("forged DATA acknowledged: cum %d", p.acks[len(p.acks)-1].Cum)
	}
	if len(p.nacks) != nNacks {
		// A wrong token is dropped (§3.3), not answered: a NACK would
		// tell a forger that the connection id exists.
		n := p.nacks[nNacks]
		return Fail, fmt.Sprintf("forged DATA answered by NACK %v (dst_conn %#x, token %#x), not dropped silently", n.Reason, n.DstConn, n.Token)
	}
	if c, done := p.awaitCompletion(ctx, flow, 0); done {
		return Fail, fmt.Sprintf("forged DATA completed the receive (error %q)", c.Err)
	}
	p.send(p.data(flow, rr.Msg, uint64(len(msg)), 0, msg, 0, wire.FlagAckReq))
	c, ok := p.awaitCompletion(ctx, flow, completionWait)
	if !ok {
		return Fail, "genuine DATA after the forged one did not complete the receive"
	}
	if bad := checkBytes(c, capacity, msg); bad != "" {
		return Fail, "after forged DATA: " + bad
	}
	return Pass, "forged DATA (token bit 63 flipped) drew no ACK in 300 ms; genuine DATA on the same PSN placed intact"
}

func caseUnknownConn(ctx context.Context, e *Env) (Verdict, string) {
	p, err := newPeer(e.IUT, e.Rng)
	if err != nil {
		return Fail, err.Error()
	}
	defer p.closeSock()
	p.remoteConn, p.remoteTok = e.Rng.Uint32()|0x80000000, e.Rng.Uint64()
	p.localConn = 0
	p.send(p.data(1, 0, 16, 0, make([]byte, 16), -1, wire.FlagAckReq))
	wctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	if !p.wait(wctx, nil, func() bool { return len(p.nacks) > 0 }) {
		return Fail, fmt.Sprintf("no NACK for DATA to conn %#x", p.remoteConn) + p.silentHint()
	}
	n := p.nacks[0]
	switch {
	case n.Reason != wire.NackUnknownConn:
		return Fail, fmt.Sprintf("NACK reason %v, want %v", n.Reason, wire.NackUnknownConn)
	case n.DstConn != 0:
		return Fail, fmt.Sprintf("NACK dst_conn %#x, want 0", n.DstConn)
	case n.Token != p.remoteTok:
		return Fail, fmt.Sprintf("NACK token %#x, want echo %#x", n.Token, p.remoteTok)
	case n.Value != uint64(p.remoteConn):
		return Fail, fmt.Sprintf("NACK value %#x, want conn %#x", n.Value, p.remoteConn)
	}
	return Pass, fmt.Sprintf("NACK UnknownConn, dst_conn 0, token %#x echoed, value %#x", n.Token, n.Value)
}

func caseSack(ctx context.Context, e *Env) (Verdict, string) {
	const flow = 4
	const capacity = 1 << 16
	p, rr, v, why := setup(ctx, e, flow, capacity)
	if why != "" {
		return v, why
	}
	defer p.closeSock()
	msg := e.payload(8 * p.seg)
	seg := func(i int) []byte { return msg[i*p.seg : (i+1)*p.seg] }
	for _, i := range []int{0, 1, 3, 5, 6} {
		fl := wire.Flags(0)
		if i == 6 {
			fl = wire.FlagAckReq
		}
		p.send(p.data(flow, rr.Msg, uint64(len(msg)), i*p.seg, seg(i), int64(i), fl))
	}
	wctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	var rec wire.AckRecord
	at := -1
	covers := func(r wire.AckRecord) bool {
		return wire.PSN(6).Less(r.Cum) || r.Sack.Has(int(wire.PSN(6).Diff(r.Cum))-1)
	}
	// The record may come in an ACK or piggybacked on a sequenced packet
	// of the IUT, such as the RECV_READY of its next receive (§2.11).
	if !p.wait(wctx, nil, func() bool {
		for i, r := range p.acks {
			if covers(r) {
				rec, at = r, i
				return true
			}
		}
		return false
	}) {
		if len(p.acks) == 0 {
			return Fail, "no ACK record for path 0 after PSNs 0, 1, 3, 5, 6"
		}
		last := p.acks[len(p.acks)-1]
		return Fail, fmt.Sprintf("no ACK record for path 0 covering PSN 6; the last (%s): cum %d SACK bits %v, want cum 2 bits [0 2 3]",
			p.ackVia(len(p.acks)-1), last.Cum, sackBits(&last.Sack))
	}
	var want wire.SackBitmap
	want.Set(0)
	want.Set(2)
	want.Set(3)
	if rec.Cum != 2 || rec.Sack != want {
		return Fail, fmt.Sprintf("ACK record (%s) cum %d SACK bits %v, want cum 2 bits [0 2 3]", p.ackVia(at), rec.Cum, sackBits(&rec.Sack))
	}
	for _, i := range []int{2, 4, 7} {
		p.send(p.data(flow, rr.Msg, uint64(len(msg)), i*p.seg, seg(i), int64(i), wire.FlagAckReq))
	}
	p.psn = 8
	c, ok := p.awaitCompletion(ctx, flow, completionWait)
	if !ok {
		return Fail, "ACK right, but the receive did not complete after PSNs 2, 4, 7"
	}
	if bad := checkBytes(c, capacity, msg); bad != "" {
		return Fail, bad
	}
	return Pass, fmt.Sprintf("ACK record path 0 (%s): cum 2, SACK bits {0,2,3}; message completed after filling the holes", p.ackVia(at))
}

func caseReorder(ctx context.Context, e *Env) (Verdict, string) {
	const flow = 5
	const capacity = 1 << 16
	p, rr, v, why := setup(ctx, e, flow, capacity)
	if why != "" {
		return v, why
	}
	defer p.closeSock()
	msg := e.payload(5*p.seg + p.seg/3)
	n := (len(msg) + p.seg - 1) / p.seg
	for i := n - 1; i >= 0; i-- {
		end := min(len(msg), (i+1)*p.seg)
		p.send(p.data(flow, rr.Msg, uint64(len(msg)), i*p.seg, msg[i*p.seg:end], -1, wire.FlagAckReq))
	}
	c, ok := p.awaitCompletion(ctx, flow, completionWait)
	if !ok {
		return Fail, "receive did not complete"
	}
	if bad := checkBytes(c, capacity, msg); bad != "" {
		return Fail, bad
	}
	return Pass, fmt.Sprintf("%d bytes in %d segments sent last-first, placed identically", len(msg), n)
}

func caseOutOfBounds(ctx context.Context, e *Env) (Verdict, string) {
	const flow = 6
	const capacity = 2048
	p, rr, v, why := setup(ctx, e, flow, capacity)
	if why != "" {
		return v, why
	}
	defer p.closeSock()
	// The last segment of a message one segment longer than fits: it
	// starts inside the buffer and ends past it, so that a receiver which
	// checks only where a segment starts, or places what fits of it,
	// writes guard bytes. §3.4 fails the message on its length before
	// placing anything, and answers the DATA with a NACK BAD_OFFSET whose
	// value is the message's length.
	off := (capacity - 1) / p.seg * p.seg
	pl := e.payload(p.seg)
	p.send(p.data(flow, rr.Msg, uint64(off+len(pl)), off, pl, -1, wire.FlagAckReq))
	end := off + len(pl) // the message's length, and where the DATA ends
	// The IUT fails the receive and sends the NACK on the same DATA, and
	// either may reach the tester first: the failure through the control
	// channel, the NACK over the socket. One wait, bounded as the
	// completion's alone was, takes both in whichever order they come.
	wctx, cancel := context.WithTimeout(ctx, completionWait)
	defer cancel()
	var c Completion
	var n wire.Nack
	gotC, gotN := false, false
	p.wait(wctx, nil, func() bool {
		if !gotC {
			c, gotC = p.takeOp(flow, false)
		}
		if !gotN {
			n, gotN = p.connNack()
		}
		return gotC && gotN
	})
	if !gotC {
		return Fail, fmt.Sprintf("no completion after DATA [%d, %d) across the end of capacity %d, want the receive failed", off, end, capacity)
	}
	if c.Err == "" {
		return Fail, fmt.Sprintf("receive completed without error (sizes %v), want failed: the %d-byte message exceeds capacity %d", c.Sizes, end, capacity)
	}
	if bad := guardIntact(c, capacity, "by a rejected packet"); bad != "" {
		return Fail, bad
	}
	want := wire.Nack{Header: wire.Header{Token: p.localTok}, Reason: wire.NackBadOffset, Flow: flow, Msg: rr.Msg, Value: uint64(end)}
	if !gotN {
		return Fail, fmt.Sprintf("receive failed (%s), guard bytes intact, but no NACK within %v of the DATA, want %s (§3.4)",
			c.Err, completionWait, nackText(want, want))
	}
	if seen := nackText(n, want); n.Reason != want.Reason || n.Value != want.Value || n.Flow != want.Flow ||
		n.Msg != want.Msg || n.Index != want.Index || n.Token != want.Token {
		return Fail, fmt.Sprintf("receive failed, guard bytes intact; NACK %s, want %s (§3.4: the receiver fails the message on its length and NACKs BAD_OFFSET with the length)",
			seen, nackText(want, n))
	}
	return Pass, fmt.Sprintf("DATA [%d, %d) of a %d-byte message across the end of capacity %d: receive failed, want failed (%s); %d of %d guard bytes intact, want all; NACK %s, want %s",
		off, end, end, capacity, c.Err, capacity, capacity, nackText(n, want), nackText(want, n))
}

// nackText describes n for evidence: its reason by the spec's name (§2.7)
// and its value, then each of its flow, msg, index and token that differs
// from other's, so that a NACK set beside the one required names the
// fields that tell them apart and no more.
func nackText(n, other wire.Nack) string {
	t := fmt.Sprintf("%s value %d", nackName(n.Reason), n.Value)
	if n.Flow != other.Flow {
		t += fmt.Sprintf(" flow %d", n.Flow)
	}
	if n.Msg != other.Msg {
		t += fmt.Sprintf(" msg %d", n.Msg)
	}
	if n.Index != other.Index {
		t += fmt.Sprintf(" index %d", n.Index)
	}
	if n.Token != other.Token {
		t += fmt.Sprintf(" token %#x", n.Token)
	}
	return t
}

// nackName is a NACK reason as docs/spec.md §2.7 and §3.4 name it.
func nackName(r wire.NackReason) string {
	switch r {
	case wire.NackNotReady:
		return "NOT_READY"
	case wire.NackTooLarge:
		return "TOO_LARGE"
	case wire.NackUnknownConn:
		return "UNKNOWN_CONN"
	case wire.NackBadOffset:
		return "BAD_OFFSET"
	case wire.NackTagMismatch:
		return "TAG_MISMATCH"
	case wire.NackFlowAborted:
		return "FLOW_ABORTED"
	}
	return fmt.Sprintf("reason %d", uint8(r))
}

func caseDuplicate(ctx context.Context, e *Env) (Verdict, string) {
	const flow = 7
	const capacity = 1 << 16
	p, rr, v, why := setup(ctx, e, flow, capacity)
	if why != "" {
		return v, why
	}
	defer p.closeSock()
	msg := e.payload(2 * p.seg)
	first := p.data(flow, rr.Msg, uint64(len(msg)), 0, msg[:p.seg], -1, wire.FlagAckReq)
	// ackAfter waits for an ACK record newer than the first n with cum.
	ackAfter := func(n int, cum wire.PSN) bool {
		wctx, cancel := context.WithTimeout(ctx, 2*time.Second)
		defer cancel()
		return p.wait(wctx, nil, func() bool {
			for _, r := range p.acks[n:] {
				if r.Cum == cum {
					return true
				}
			}
			return false
		})
	}
	p.send(first)
	if !ackAfter(0, 1) {
		return Fail, "no ACK with cum 1 after PSN 0"
	}
	// A duplicate is dropped and answered by an immediate ACK (§3.1):
	// the sender's ACK of the first copy may have been lost.
	n := len(p.acks)
	p.send(first)
	if !ackAfter(n, 1) {
		return Fail, "duplicate PSN 0 not acknowledged: no ACK record after it (§3.1 answers a duplicate at once)"
	}
	// The same content again under a fresh PSN, as a retransmission is sent.
	n = len(p.acks)
	p.send(p.data(flow, rr.Msg, uint64(len(msg)), 0, msg[:p.seg], -1, wire.FlagAckReq|wire.FlagRetransmit))
	if !ackAfter(n, 2) {
		return Fail, "no ACK with cum 2 after PSN 0, duplicate PSN 0, retransmission PSN 1"
	}
	p.quiet(ctx, silence)
	if _, done := p.awaitCompletion(ctx, flow, 0); done {
		return Fail, "receive completed with one of two segments: the duplicate was counted"
	}
	p.send(p.data(flow, rr.Msg, uint64(len(msg)), p.seg, msg[p.seg:], -1, wire.FlagAckReq))
	c, ok := p.awaitCompletion(ctx, flow, completionWait)
	if !ok {
		return Fail, "receive did not complete after the second segment"
	}
	if bad := checkBytes(c, capacity, msg); bad != "" {
		return Fail, bad
	}
	return Pass, "duplicate PSN 0 and retransmitted segment 0 (PSN 1) acknowledged (cum 2), counted once; message intact"
}

func caseClose(ctx context.Context, e *Env) (Verdict, string) {
	p, why := open(ctx, e)
	if p == nil {
		return Fail, why
	}
	defer p.closeSock()
	c := wire.Close{Header: p.hdr(wire.OpClose), Reason: wire.CloseNormal}
	pkt := c.Append(nil)
	var reply *wire.Close
	for try := 0; try < 5 && reply == nil; try++ {
		p.send(pkt)
		wctx, cancel := context.WithTimeout(ctx, 300*time.Millisecond)
		p.wait(wctx, nil, func() bool {
			for i := range p.close {
				if p.close[i].Flags&wire.FlagReply != 0 {
					reply = &p.close[i]
					return true
				}
			}
			return false
		})
		cancel()
	}
	if reply == nil {
		return Fail, fmt.Sprintf("no CLOSE with REPLY (%d other CLOSE seen)", len(p.close))
	}
	if reply.DstConn != p.localConn || reply.Token != p.localTok {
		return Fail, fmt.Sprintf("CLOSE REPLY dst_conn %#x token %#x, want %#x %#x", reply.DstConn, reply.Token, p.localConn, p.localTok)
	}
	return Pass, fmt.Sprintf("CLOSE REPLY to conn %#x with token echoed, reason %v", reply.DstConn, reply.Reason)
}

// sackBits lists the set bits of s, lowest first.
func sackBits(s *wire.SackBitmap) []int {
	var out []int
	for i := 0; i < wire.SackBits; i++ {
		if s.Has(i) {
			out = append(out, i)
		}
	}
	return out
}
