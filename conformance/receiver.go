package conformance

import (
	"context"
	"fmt"
	"time"

	"github.com/metaroce/metaroce/transport/wire"
)

// ceMarked is how many of the ECN case's five segments carry CE.
const ceMarked = 3

func caseECN(ctx context.Context, e *Env) (Verdict, string) {
	const flow = 30
	const capacity = 1 << 16
	p, rr, v, why := setup(ctx, e, flow, capacity)
	if why != "" {
		return v, why
	}
	defer p.closeSock()
	v6 := p.dst.IP.To4() == nil
	msg := e.payload(5 * p.seg)
	for i := 0; i < 5; i++ {
		if i == 5-ceMarked {
			if err := setTOS(p.sock, v6, 3); err != nil {
				return Skip, "cannot mark CE on the tester's socket: " + err.Error()
			}
		}
		p.send(p.data(flow, rr.Msg, uint64(len(msg)), i*p.seg, msg[i*p.seg:(i+1)*p.seg], -1, wire.FlagAckReq))
	}
	if err := setTOS(p.sock, v6, 0); err != nil {
		return Fail, "restore the tester's TOS: " + err.Error()
	}
	wctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	var rec wire.AckRecord
	at := -1
	if !p.wait(wctx, nil, func() bool {
		for i, r := range p.acks {
			if r.Cum == 5 {
				rec, at = r, i
				return true
			}
		}
		return false
	}) {
		return Fail, "no ACK with cum 5 after five DATA"
	}
	c, ok := p.awaitCompletion(ctx, flow, completionWait)
	if !ok {
		return Fail, "CE-marked DATA did not complete the receive (a receiver must accept any ECN codepoint)"
	}
	if bad := checkBytes(c, capacity, msg); bad != "" {
		return Fail, bad
	}
	if rec.CE != ceMarked {
		return Fail, fmt.Sprintf("5 DATA, the last %d with IP ECN CE: ACK record cum 5 (%s) ce %d, want %d", ceMarked, p.ackVia(at), rec.CE, ceMarked)
	}
	return Pass, fmt.Sprintf("5 DATA, the last %d with IP ECN CE: ACK record cum 5 (%s) ce %d, want %d; message intact", ceMarked, p.ackVia(at), rec.CE, ceMarked)
}

func caseNotReady(ctx context.Context, e *Env) (Verdict, string) {
	const flow = 31
	p, why := open(ctx, e) // a fresh connection: nothing is posted on flow

	if p == nil {
		return Fail, why
	}
	defer p.closeSock()
	off := p.seg
	p.send(p.data(flow, 0, uint64(2*p.seg), off, e.payload(p.seg), -1, wire.FlagAckReq))
	wctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	var n wire.Nack
	if !p.wait(wctx, nil, func() bool {
		for _, x := range p.nacks {
			if x.Flow == flow && x.DstConn == p.localConn {
				n = x
				return true
			}
		}
		return false
	}) {
		return Fail, fmt.Sprintf("no NACK for DATA (flow %d msg 0 offset %d) with no receive posted", flow, off)
	}
	if n.Reason != wire.NackNotReady || n.Msg != 0 || n.Value != uint64(off) || n.Token != p.localTok {
		// The token is named too: a NACK wrong only in its token read
		// as one that was right.
		return Fail, fmt.Sprintf("NACK %v msg %d value %d token %#x, want NotReady msg 0 value %d token %#x (the tester's, §2.1)",
			n.Reason, n.Msg, n.Value, n.Token, off, p.localTok)
	}
	return Pass, fmt.Sprintf("DATA flow %d offset %d with nothing posted: NACK NotReady value %d (sequenced, PSN %d)", flow, off, n.Value, n.PSN)
}

// caseFlowAborted: the tester, as the sending side, aborts a flow on which
// the IUT has a receive posted. The IUT must acknowledge the sequenced NACK,
// fail the receive, and write nothing into its buffer, then or on DATA of
// the aborted flow that follows.
func caseFlowAborted(ctx context.Context, e *Env) (Verdict, string) {
	const flow = 32
	const capacity = 4096
	p, rr, v, why := setup(ctx, e, flow, capacity)
	if why != "" {
		return v, why
	}
	defer p.closeSock()
	n := wire.Nack{Header: p.hdr(wire.OpNack), Reason: wire.NackFlowAborted, Flow: flow}
	n.PSN = p.psn
	n.Flags = wire.FlagAckReq
	p.psn++
	p.send(n.Append(nil))
	c, ok := p.awaitCompletion(ctx, flow, completionWait)
	if !ok {
		return Fail, fmt.Sprintf("the receive on flow %d did not end after NACK FlowAborted", flow)
	}
	if c.Err == "" {
		return Fail, fmt.Sprintf("the receive on an aborted flow completed without error, sizes %v", c.Sizes)
	}
	if bad := guardIntact(c, capacity, "on an aborted flow"); bad != "" {
		return Fail, bad
	}
	wctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	if !p.wait(wctx, nil, func() bool { return len(p.acks) > 0 && p.acks[len(p.acks)-1].Cum > n.PSN }) {
		return Fail, fmt.Sprintf("the sequenced NACK (PSN %d) was never acknowledged", n.PSN)
	}
	// DATA of the aborted flow, as a sender might still have in flight,
	// must neither complete anything nor be placed.
	p.send(p.data(flow, rr.Msg, 64, 0, e.payload(64), -1, wire.FlagAckReq))
	p.quiet(ctx, silence)
	if c2, done := p.awaitCompletion(ctx, flow, 0); done {
		return Fail, fmt.Sprintf("DATA of the aborted flow completed an operation (error %q)", c2.Err)
	}
	return Pass, fmt.Sprintf("NACK FlowAborted (PSN %d) acknowledged; the receive failed (%s), its %d guard bytes intact; later DATA placed nowhere",
		n.PSN, c.Err, capacity)
}
