package conformance

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"time"

	"github.com/metaroce/metaroce/transport/wire"
)

// minRTO is the smallest tail-loss timeout the spec allows (§3.2 MinRTO,
// 1 ms). It only labels evidence: a repeat that came sooner after the
// oldest packet of its path cannot be a plain tail-loss timeout, though the
// overtaken-packet rule has no such floor.
const minRTO = time.Millisecond

// senderAttempts is how many fresh connections sender-loss and
// sender-reorder try before they fail an IUT for repeating content it had
// been told was received. §3.2 permits a timer to resend acknowledged
// content when the acknowledgement reached the sender late (a spurious
// timeout: "the ACK (or the peer's event loop) was late"), and the tester
// cannot see when the IUT read its ACKs; a sender whose SACK logic repeats
// content does so on every connection, a host that delays one event loop
// rarely does so every time. With a per-attempt chance p of a host-induced
// spurious timeout the false-failure rate is p^4 (p was about 0.15 on a
// 2-core host with two busy loops beside the test).
const senderAttempts = 4

// repeat is one DATA whose content (message, offset) the tester had
// already processed: a retransmission of something that was received.
type repeat struct {
	d    rxData   // the repeated copy
	prev rxData   // the copy sent before it (processed or dropped by the tester)
	age  tsDelta  // from the oldest packet of prev's path at or below prev's PSN to d
	psn0 wire.PSN // that oldest packet's PSN
}

// tsDelta is a difference of two DATA timestamps of the IUT, ns; the
// timestamps are the sender's clock at sending, mod 2^32 (§2.3), so
// differences under 2 s are exact.
type tsDelta int32

func (t tsDelta) String() string {
	return time.Duration(t).Round(10 * time.Microsecond).String()
}

// timerShaped reports whether a tail-loss timer on the previous copy's path
// could have sent r: that path's oldest packet was out for at least MinRTO.
func (r repeat) timerShaped() bool { return time.Duration(r.age) >= minRTO }

// repeats lists the DATA of flow that repeated content already processed,
// in arrival order. lost are the DATA the tester dropped: they count as
// previous copies and as packets of their path, never as received content.
func (p *peer) repeats(flow uint32, lost []rxData) []repeat {
	all := make([]rxData, 0, len(p.rxData)+len(lost))
	for _, d := range p.rxData {
		if d.flow == flow {
			all = append(all, d)
		}
	}
	processed := len(all)
	all = append(all, lost...)
	isLost := func(i int) bool { return i >= processed }
	order := make([]int, len(all))
	for i := range order {
		order[i] = i
	}
	sort.SliceStable(order, func(a, b int) bool { return all[order[a]].at.Before(all[order[b]].at) })

	type content [2]uint64
	last := map[content]rxData{}
	seen := map[content]bool{}
	var out []repeat
	for _, i := range order {
		d := all[i]
		c := content{uint64(d.msg), d.off}
		if seen[c] && !isLost(i) {
			prev := last[c]
			r := repeat{d: d, prev: prev, psn0: prev.psn}
			oldest := prev.ts
			for _, q := range all {
				if q.path == prev.path && !prev.psn.Less(q.psn) && tsDelta(oldest-q.ts) > 0 {
					oldest, r.psn0 = q.ts, q.psn
				}
			}
			r.age = tsDelta(d.ts - oldest)
			out = append(out, r)
		}
		if !isLost(i) {
			seen[c] = true
		}
		last[c] = d
	}
	return out
}

// describeRepeats summarises repeated content for evidence: how many, the
// first one, and whether every one is shaped like a tail-loss timeout.
func describeRepeats(rs []repeat) string {
	r := rs[0]
	shaped := 0
	for _, x := range rs {
		if x.timerShaped() {
			shaped++
		}
	}
	return fmt.Sprintf("%d DATA repeated content already received (first: offset %d on path %d PSN %d, earlier copy path %d PSN %d, sent %v after path %d PSN %d by the IUT's timestamps); %d of %d at least MinRTO (%v) after their path's oldest packet",
		len(rs), r.d.off, r.d.path, r.d.psn, r.prev.path, r.prev.psn, r.age, r.prev.path, r.psn0, shaped, len(rs), minRTO)
}

// attemptFunc runs one attempt of a sender case on a fresh connection. It
// returns the verdict and evidence, and the repeats it saw: with repeats
// and no other fault the attempt is inconclusive.
type attemptFunc func(ctx context.Context, e *Env) (Verdict, string, []repeat)

// untilNoRepeats runs attempt on fresh connections until one ends without
// repeated content, at most senderAttempts times. A fault other than a
// repeat ends the case at once; the case fails on repeats only when every
// attempt repeated content.
func untilNoRepeats(ctx context.Context, e *Env, attempt attemptFunc) (Verdict, string) {
	return attempts(ctx, senderAttempts, func() (Verdict, string, bool) {
		v, ev, reps := attempt(ctx, e)
		return v, ev, len(reps) > 0
	}, "repeated content, as a spurious timeout may (§3.2)", "repeated content the tester had acknowledged")
}

// timedAttempts is how many fresh connections a case that measures time
// against a bound (tail-loss, rate-hint) tries before it fails. A stalled
// host (a loop descheduled for tens of milliseconds, common on a busy
// 2-core machine) can put one attempt past a bound that a conforming IUT
// meets; an IUT that breaks the rule does so on every attempt.
const timedAttempts = 3

// retried runs a case on fresh connections until one passes or skips, at
// most timedAttempts times; it fails with the evidence of every attempt.
func retried(run func(context.Context, *Env) (Verdict, string)) func(context.Context, *Env) (Verdict, string) {
	return func(ctx context.Context, e *Env) (Verdict, string) {
		return attempts(ctx, timedAttempts, func() (Verdict, string, bool) {
			v, ev := run(ctx, e)
			return v, ev, v == Fail
		}, "failed, as on a stalled host", "failed")
	}
}

// attempts runs try, each time on a fresh connection, until an attempt is
// conclusive or max of them were not. The evidence of a conclusive attempt
// after inconclusive ones lists them, saying why they did not count; when
// none was conclusive the case fails with every attempt's evidence.
func attempts(ctx context.Context, max int, try func() (v Verdict, ev string, inconclusive bool), why, every string) (Verdict, string) {
	var earlier []string
	for i := 1; ; i++ {
		v, ev, inconclusive := try()
		if !inconclusive {
			if len(earlier) > 0 {
				ev = fmt.Sprintf("%s (attempt %d; earlier attempts %s: %s)", ev, i, why, strings.Join(earlier, "; "))
			}
			return v, ev
		}
		earlier = append(earlier, fmt.Sprintf("attempt %d: %s", i, ev))
		if i == max || ctx.Err() != nil {
			return Fail, fmt.Sprintf("every one of %d attempts on a fresh connection %s: %s", i, every, strings.Join(earlier, "; "))
		}
	}
}
