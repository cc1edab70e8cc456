package transport

import "github.com/metaroce/metaroce/transport/wire"

// FwdDelayEpoch is the period of the windowed minimum that a receiver takes
// as the base one-way delay of a connection (docs/spec.md §3.5): the base is
// the lowest delay seen in the current epoch or the one before, so a base
// that no longer holds (the two clocks drifted apart, the routes changed)
// is forgotten within two epochs.
const FwdDelayEpoch = 4 * Millisecond

// fwdDelay is a receiver's estimate of the queueing on the forward path of
// one connection (docs/spec.md §3.5). Each DATA carries its sender's clock;
// the receiver's clock at arrival minus that timestamp is the one-way delay
// plus the offset between the clocks, unknown but constant; what it exceeds
// the lowest such difference of recent DATA by is the queueing that DATA
// met. The arithmetic is modulo 2^32 like the timestamps, so the clocks need
// not agree on anything but their rate.
type fwdDelay struct {
	started bool
	cur     uint32 // lowest arrival − timestamp in the current epoch
	prev    uint32 // lowest in the previous epoch
	epochAt Time   // when the current epoch ends
}

// sample takes a DATA with timestamp ts that arrived at now and returns its
// forward delay above the base, in wire.FwdDelayUnit, saturated at
// wire.MaxFwdDelay.
func (f *fwdDelay) sample(now Time, ts uint32) uint16 {
	d := uint32(now) - ts
	switch {
	case !f.started:
		f.started = true
		f.cur, f.prev = d, d
		f.epochAt = now + FwdDelayEpoch
	case now >= f.epochAt:
		f.prev, f.cur = f.cur, d
		f.epochAt = now + FwdDelayEpoch
	case int32(d-f.cur) < 0:
		f.cur = d
	}
	base := f.cur
	if int32(f.prev-base) < 0 {
		base = f.prev
	}
	q := int64(int32(d - base))
	if q <= 0 {
		return 0
	}
	return uint16(min(q/wire.FwdDelayUnit, wire.MaxFwdDelay))
}

// onFwdDelay takes the forward delay q that an ACK record of path p
// reported for our DATA (docs/spec.md §3.5): the path's average, with gain
// 1/2, is the queueing on its route now, and the controller's drain factor
// follows the least queued of the active paths. A queue on some routes only
// (an unevenly loaded set of uplinks) is then left to the paths' windows,
// which steer the packets to the other paths, rather than slowing the whole
// connection down; a queue in front of the receiver, which every path
// crosses, drains as before.
func (c *Conn) onFwdDelay(now Time, p *txPath, q Time) {
	if !p.hasFq {
		p.fq, p.hasFq = q, true
	} else {
		p.fq += (q - p.fq) / 2
	}
	least := Time(-1)
	for _, o := range c.paths {
		if o.state == pathActive && o.hasFq && (least < 0 || o.fq < least) {
			least = o.fq
		}
	}
	if least >= 0 {
		c.cc.OnFwdDelay(int64(now), int64(least))
	}
}
