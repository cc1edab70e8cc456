package transport

import (
	"math/bits"

	"github.com/metaroce/metaroce/transport/wire"
)

// floorDecayAfter is how long, in multiples of the current adaptive floor,
// a path must go without a spurious timeout before the floor is halved. A
// host whose timer or scheduling noise raised the floor keeps that noise
// for a while; halving no sooner than 32 floors later costs at most one
// spurious timeout per halving, and a floor of 200 ms is back to zero in
// about 13 s of quiet.
const floorDecayAfter = 32

// maxMergedTimeouts is how many consecutive timeouts of one path a
// timeoutRec covers before it starts afresh: the back-off doubles the RTO
// per timeout, so four cover 15 RTOs of silence.
const maxMergedTimeouts = 4

// timeoutRec remembers what the path's latest timeouts declared lost, so
// that a later acknowledgement of any of it reveals them as spurious: the
// route was alive and only the acknowledgements (or the peer's event loop)
// were late. Consecutive timeouts that come before any of it is shown
// received merge into one record (up to maxMergedTimeouts), since a
// stall long enough for one timeout usually outlasts its backed-off
// successor too. Fixed size: the PSNs covered span at most wire.SackBits
// (a path never has more outstanding, and the record is dropped once the
// path sent that far past lo).
//
// Invariant: pending is true iff some bit of lost is set; bit i stands for
// PSN lo+i; starts[:n] are the first PSNs of the merged timeouts, in order.
type timeoutRec struct {
	lo        wire.PSN
	next      wire.PSN // the path's next PSN when the first timeout fired
	sent      Time     // send time of the oldest packet the first timeout declared lost
	lost      [wire.SackBits / 64]uint64
	pending   bool
	markedBad bool // the timeouts moved a path that was active
	// timer: one of the timeouts was the tail-loss timer's own expiry
	// (RTO(p), which the adaptive floor bounds), not the overtaken-packet
	// deadline, which ignores the floor.
	timer    bool
	detected bool // the path already adapted to this record
	n        int
	starts   [maxMergedTimeouts]wire.PSN
	counted  [maxMergedTimeouts]bool
}

// begin records a timeout whose oldest outstanding PSN is una, sent at
// sent, on a path whose next PSN is next and that was active (or not);
// timer says whether the tail-loss timer fired rather than the
// overtaken-packet deadline. It extends the pending record when that one
// is not yet shown spurious and still has room.
func (t *timeoutRec) begin(una, next wire.PSN, sent Time, wasActive, timer bool) {
	if t.pending && !t.detected && t.n < maxMergedTimeouts && next.Diff(t.lo) <= wire.SackBits {
		t.starts[t.n] = una
		t.n++
		t.markedBad = t.markedBad || wasActive
		t.timer = t.timer || timer
		return
	}
	*t = timeoutRec{lo: una, next: next, sent: sent, markedBad: wasActive, timer: timer, n: 1}
	t.starts[0] = una
}

// add notes that the timeout declared q lost.
func (t *timeoutRec) add(q wire.PSN) {
	i := q.Diff(t.lo)
	if i < 0 || i >= wire.SackBits {
		return
	}
	t.lost[i/64] |= 1 << (uint(i) % 64)
	t.pending = true
}

// takeAcked clears the PSNs of the record that r shows received and
// returns how many there were and how many of the merged timeouts they
// show spurious for the first time.
func (t *timeoutRec) takeAcked(r *wire.AckRecord) (pkts, timeouts int) {
	left := false
	for w := range t.lost {
		m := t.lost[w]
		for m != 0 {
			b := bits.TrailingZeros64(m)
			m &^= 1 << uint(b)
			q := t.lo + wire.PSN(w*64+b)
			if recordHas(r, q) {
				t.lost[w] &^= 1 << uint(b)
				pkts++
				j := t.n - 1
				for j > 0 && q.Less(t.starts[j]) {
					j--
				}
				if !t.counted[j] {
					t.counted[j] = true
					timeouts++
				}
			}
		}
		left = left || t.lost[w] != 0
	}
	t.pending = left
	return pkts, timeouts
}

// recordHas reports whether ACK record r shows PSN q received: below the
// cumulative PSN, or its bit in the SACK bitmap (bit i stands for
// Cum+1+i; Cum itself is the first PSN missing).
func recordHas(r *wire.AckRecord, q wire.PSN) bool {
	d := q.Diff(r.Cum)
	return d < 0 || d > 0 && r.Sack.Has(int(d)-1)
}

// checkSpuriousTimeout applies ACK record r to p's latest timeout: every
// PSN it declared lost that r shows received counts as a spurious
// retransmission, and the first such PSN makes the timeout spurious
// (onSpuriousTimeout). The record is dropped once p has sent more than
// wire.SackBits PSNs past it: the receiver may then have slid its window
// over PSNs that never arrived (rxPath.receive), so a cumulative PSN beyond
// them no longer proves they arrived.
func (c *Conn) checkSpuriousTimeout(now Time, p *txPath, r *wire.AckRecord) {
	to := &p.lastTO
	if !to.pending {
		return
	}
	if p.next.Diff(to.lo) > wire.SackBits {
		to.pending = false
		return
	}
	n, tos := to.takeAcked(r)
	if n == 0 {
		return
	}
	p.stats.Spurious += uint64(n)
	c.stats.Spurious += uint64(n)
	p.stats.SpuriousTimeouts += uint64(tos)
	c.stats.SpuriousTimeouts += uint64(tos)
	if !to.detected {
		to.detected = true
		c.onSpuriousTimeout(now, p, to.provedLate(r))
	}
}

// provedLate reports whether ack record r was written before the receiver
// got anything the path sent at or after the record's first timeout: every
// PSN r acknowledges precedes t.next. Only then does r prove that the
// timeout fired too early (the acknowledgement, or the peer's event loop,
// was late). A record that also acknowledges later PSNs, such as the
// timeout's own retransmissions or a probe, shows the original data
// arrived but may follow an acknowledgement that was lost: at 10% loss
// most timeouts are of that kind, and raising the timer floor for them
// would lengthen every later recovery.
func (t *timeoutRec) provedLate(r *wire.AckRecord) bool {
	highest := r.Cum - 1
	if h := r.Sack.Highest(); h >= 0 {
		highest = r.Cum + wire.PSN(h) + 1
	}
	return highest.Less(t.next)
}

// onSpuriousTimeout adapts p to a timeout that fired although the route
// delivered (docs/spec.md §3.2 tail-loss timer). The consecutive-timeout
// count and back-off are cleared (the timeout does not count toward
// BadPathTimeouts), and a path the timeout had moved to probing carries
// data again at once, since the acknowledgement shows it alive. When the
// acknowledgement proves the timer early (late, see provedLate), the timer
// noise of this host, or the peer's, exceeds the RTO: the path's adaptive
// floor rises to twice its effective floor and at least 1.5 × the time the
// revealing acknowledgement took, capped at MaxRTO. Only a timeout that
// the tail-loss timer itself took counts: the overtaken-packet deadline
// ignores the floor, so its needless expiries say nothing about it, and
// counting them doubled the floor per expiry, to MaxRTO within a dozen
// transient queues on another route, for acknowledgements that had come
// within a millisecond.
func (c *Conn) onSpuriousTimeout(now Time, p *txPath, late bool) {
	cfg := &c.ep.cfg
	if late && p.lastTO.timer {
		took := now - p.lastTO.sent
		eff := max(cfg.MinRTO, p.rtoFloor)
		p.rtoFloor = min(cfg.MaxRTO, max(2*eff, took+took/2))
		p.floorSince = now
	}
	p.timeouts = 0
	p.backoff = 0
	p.setRTO(cfg)
	if p.lastTO.markedBad && p.state == pathProbing {
		p.state = pathActive
		c.probing--
		p.probeAt = 0
		p.quickProbes = 0
		p.stats.Revived++
	}
	p.lastTO.markedBad = false
}

// decayFloor halves p's adaptive floor once the path went floorDecayAfter
// floors without a spurious timeout; below MinRTO it is dropped. The
// caller recomputes the RTO.
func (p *txPath) decayFloor(now Time, cfg *Config) {
	if p.rtoFloor == 0 || now-p.floorSince < floorDecayAfter*p.rtoFloor {
		return
	}
	p.rtoFloor /= 2
	if p.rtoFloor < cfg.MinRTO {
		p.rtoFloor = 0
	}
	p.floorSince = now
}
