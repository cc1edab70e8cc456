package conformance

import (
	"bytes"
	"context"
	"errors"
	"fmt"

	"github.com/metaroce/metaroce/transport/wire"
)

// maxDgramSegments is the length, in the tester's segments, of the message
// the IUT sends in the max-dgram case: enough DATA that a sender cutting
// segments to its own datagram size, not the tester's, shows it.
const maxDgramSegments = 16

// maxDgramHint is the rate hint of the max-dgram case, kbit/s: 1 MB/s, the
// IUT's message in about 18 ms.
const maxDgramHint = 8000

// caseMaxDgram holds the IUT to §1: no packet longer than the peer's
// max_dgram, which the tester announces in its HELLO (§2.8) far below the
// loopback MTU. The IUT sends a message of several segments while the
// tester sends it one, so that acknowledgements may be due while its DATA
// leaves, and every datagram of the connection counts, whatever its
// opcode. What it checks for certain is segmentation at the peer's
// max_dgram; a sender that piggybacks ACKs (§2.11) onto full-size segments
// is caught only when it happens to piggyback here, which depends on its
// timing (a sender that piggybacks on every DATA was caught in most runs,
// not all): a case that makes a piggyback certain is still to be written.
func caseMaxDgram(ctx context.Context, e *Env) (Verdict, string) {
	const inFlow, outFlow = 33, 34
	const capacity = 1 << 16
	p, rr, v, why := setup(ctx, e, inFlow, capacity)
	if why != "" {
		return v, why
	}
	defer p.closeSock()
	out := e.payload(maxDgramSegments*segment - segment/3)
	in := e.payload(8*p.seg - p.seg/2)
	// One segment of the tester's message answers each DATA of the IUT,
	// and the rate hint spreads the IUT's DATA out, so that its next DATA
	// tends to leave while an acknowledgement is due.
	p.rateHint = maxDgramHint
	next := 0
	sendNext := func() {
		if next < len(in) {
			end := min(len(in), next+p.seg)
			p.send(p.data(inFlow, rr.Msg, uint64(len(in)), next, in[next:end], -1, wire.FlagAckReq))
			next = end
		}
	}
	p.filter = func(pk *rxPacket) action {
		if pk.h.Op == wire.OpData {
			sendNext()
		}
		return deliver
	}
	p.announce(outFlow, 0, 1<<20)
	if err := e.IUT.Send(ctx, outFlow, out, senderTag); err != nil {
		if errors.Is(err, ErrNoControl) {
			return Skip, "needs a control channel"
		}
		return Fail, "IUT send: " + err.Error()
	}
	got, sent := p.awaitMessage(ctx, outFlow, 0, len(out), messageWait)
	for next < len(in) {
		sendNext() // the rest, should the IUT have sent fewer DATA than expected
	}
	c, placed := p.awaitCompletion(ctx, inFlow, completionWait)
	p.quiet(ctx, silence) // the last acknowledgements count too

	sz := &p.sizes
	if len(sz.over) > 0 {
		o := sz.over[0]
		what := o.h.Op.String()
		if o.h.Op.Sequenced() {
			what += fmt.Sprintf(" path %d PSN %d", o.h.Path, o.h.PSN)
		}
		if o.h.Flags&wire.FlagPiggyAck != 0 {
			what += " with a piggybacked ACK"
		}
		return Fail, fmt.Sprintf("%d of %d datagrams longer than the max_dgram %d the tester announced; the first: %s, %d bytes",
			len(sz.over), sz.count, testerMaxDgram, what, o.size)
	}
	switch {
	case !sent:
		return Fail, fmt.Sprintf("the IUT's %d-byte message incomplete after %v", len(out), messageWait)
	case !bytes.Equal(got, out):
		return Fail, "message bytes differ from what the IUT was asked to send"
	case !placed:
		return Fail, fmt.Sprintf("the tester's %d-byte message did not complete the IUT's receive", len(in))
	}
	if bad := checkBytes(c, capacity, in); bad != "" {
		return Fail, "the tester's message: " + bad
	}
	data, piggy, largest := 0, 0, 0
	for _, d := range p.rxData {
		if d.flow != outFlow {
			continue
		}
		n := wire.DataHeaderLen + len(d.payload)
		if d.flags&wire.FlagPiggyAck != 0 {
			n += wire.PiggyLen
			piggy++
		}
		data++
		largest = max(largest, n)
	}
	return Pass, fmt.Sprintf("%d datagrams, the largest %d bytes (%v), max_dgram %d: the %d-byte message in %d DATA of at most %d bytes (%d with a piggybacked ACK); the tester's %d bytes placed intact meanwhile",
		sz.count, sz.largest, sz.largestOp, testerMaxDgram, len(out), data, largest, piggy, len(in))
}
