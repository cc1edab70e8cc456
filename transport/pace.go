package transport

import "math/bits"

// maxPaceGap bounds the time, in nanoseconds, that the pacer charges for one
// packet or allows as burst credit, whatever the rate: a sequenced packet
// never waits longer than this (9/8 of it with the gap's jitter) behind the
// one before it. A packet needs longer only below about 4 KB/s with the
// default 4 KiB segments, which is no share of any real link: such a rate
// comes from a broken or hostile peer's hint, a receiver configured with a
// nonsensical InboundRate, or a mistyped line rate. The least hint, 1 kbit/s
// (125 B/s), cut to a quarter by the drain factor, would charge a 4 KiB
// segment 133 s, and a deadline that far ahead only parks the connection.
const maxPaceGap = Second

// paceSpan is the time, in nanoseconds, that bytes take to leave at rate
// bytes/s, rounded down and capped at maxPaceGap; 0 for rate 0 (unpaced).
// The product bytes × 10⁹ is formed in 128 bits, so neither a large count
// (a configured burst) nor any rate up to 2⁶⁴−1 overflows it; rates of
// 2⁶³ and up, what a NaN or an overflowed float becomes when converted,
// give 0 rather than the negative time a signed conversion would.
func paceSpan(bytes, rate uint64) Time {
	if rate == 0 {
		return 0
	}
	hi, lo := bits.Mul64(bytes, uint64(Second))
	if hi >= rate {
		return maxPaceGap // the quotient needs more than 64 bits
	}
	q, _ := bits.Div64(hi, lo, rate)
	return Time(min(q, uint64(maxPaceGap)))
}

// repace acts only on a gap of at least repaceMinGap (ns) and a rate that
// rose at least repaceRise times: a jump out of a starved rate. The gaps of
// any working share of a datacenter link are micro-seconds, and additive
// increase or a hint's ordinary movements never double the rate within
// one of them, so those keep their timing exactly (moving it would redraw
// every simulated result for nothing).
const (
	repaceMinGap = Millisecond
	repaceRise   = 2
)

// repace pulls the pacing time in when the pacing rate has risen to rate
// (bytes/s), at least repaceRise times what it was, since the last paced
// packet left a gap of repaceMinGap or more, so that the gap in force never
// exceeds what rate implies for that packet: paceSpan(paceBytes, rate), or
// 9/8 of it, the top of the jitter's range, while the rate follows a hint.
// The gap still counts from the packet's start (paceFrom), and paceNext only
// ever moves in. A rate that falls lengthens nothing here; the next
// packet's own gap follows it.
// Without this a gap charged at a tiny rate stayed in force: after a peer's
// 1 kbit/s hint the next packet waited about 33 s, even once the peer's
// next hint gave the connection the whole link.
func (c *Conn) repace(rate uint64) {
	if rate/repaceRise < c.paceRate || c.paceNext-c.paceFrom < repaceMinGap {
		return
	}
	most := paceSpan(c.paceBytes, rate)
	if c.cc.Hinted() {
		most += most / 8
	}
	c.paceNext = min(c.paceNext, c.paceFrom+most)
}
