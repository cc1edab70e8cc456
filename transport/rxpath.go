package transport

import "github.com/metaroce/metaroce/transport/wire"

// maxRxPaths bounds the peer path ids a connection keeps receive state for.
const maxRxPaths = wire.MaxPlanes * wire.MaxPathsPerPlane

// rxPath is the receiving half of one of the peer's paths: what has arrived,
// for the ACK record (docs/spec.md §3.1).
//
// Invariant: every PSN before cum was received or abandoned by the sender;
// cum itself was not received; sack bit i stands for cum+1+i.
type rxPath struct {
	id      uint16
	cum     wire.PSN
	started bool
	sack    wire.SackBitmap
	ce      uint32 // CE-marked sequenced packets received, mod 2^32
	lastTS  uint32 // Timestamp of the latest DATA
	lastArr Time   // its arrival time
	lastFwd uint16 // its forward delay, in wire.FwdDelayUnit
	pending int    // packets received since the last ACK of this path
	urgent  bool   // acknowledge at the next opportunity
}

// receive records PSN q and reports whether it is new. A PSN more than the
// bitmap's width ahead slides the window: the sender only sends that far
// ahead after it stopped tracking everything below (it keeps at most
// wire.SackBits packets outstanding), so what is skipped was abandoned.
func (r *rxPath) receive(q wire.PSN) bool {
	if !r.started {
		// The first packet of a path fixes its origin: a sender starts
		// every path at PSN 0, but a path whose first packets were lost
		// must not wait for them forever.
		r.started = true
		r.cum = 0
	}
	d := q.Diff(r.cum)
	switch {
	case d < 0:
		return false
	case d == 0:
		r.advance()
		return true
	}
	if d > wire.SackBits {
		r.slideTo(q - wire.SackBits)
		d = q.Diff(r.cum)
		if d == 0 {
			r.advance()
			return true
		}
		if d < 0 {
			return false
		}
	}
	if r.sack.Has(int(d) - 1) {
		return false
	}
	r.sack.Set(int(d) - 1)
	return true
}

// advance is called when cum itself arrived: cum moves past it and past every
// PSN after it already in the bitmap.
func (r *rxPath) advance() {
	t := r.sack.TrailingOnes()
	r.cum += wire.PSN(1 + t)
	r.sack.Shift(1 + t)
}

// slideTo moves cum forward to nc, abandoning the PSNs in between.
func (r *rxPath) slideTo(nc wire.PSN) {
	k := int(nc.Diff(r.cum))
	if k <= 0 {
		return
	}
	got := r.sack.Has(k - 1) // was nc itself received?
	r.sack.Shift(k)
	r.cum = nc
	if got {
		r.advance()
	}
}

// record fills an ACK record for this path.
func (r *rxPath) record(now Time, out *wire.AckRecord) {
	out.Path = r.id
	out.Cum = r.cum
	out.CE = r.ce
	out.EchoTS = r.lastTS
	out.FwdDelay = r.lastFwd
	d := now - r.lastArr
	if d < 0 || r.lastArr == 0 {
		d = 0
	}
	if d > 0xffffffff {
		d = 0xffffffff
	}
	out.Delay = uint32(d)
	out.Sack = r.sack
}

// rxPathFor returns the receive state of the peer's path id, creating it.
func (c *Conn) rxPathFor(id uint16) *rxPath {
	if r := c.rxPaths[id]; r != nil {
		return r
	}
	if int(id) >= maxRxPaths || len(c.rxPaths) >= maxRxPaths {
		return nil
	}
	if c.rxPaths == nil {
		c.rxPaths = make(map[uint16]*rxPath)
	}
	r := &rxPath{id: id}
	c.rxPaths[id] = r
	c.rxOrder = append(c.rxOrder, r)
	return r
}

// onSequenced applies the path layer to a sequenced packet and decides when
// to acknowledge it (docs/spec.md §3.1): at once for a gap, a duplicate, an
// ACK request or every AckEvery packets; otherwise within AckDelay.
func (c *Conn) onSequenced(now Time, h *wire.Header, ecn ECN, ts uint32, isData bool) (fresh bool) {
	r := c.rxPathFor(h.Path)
	if r == nil {
		// A path id no peer may use (§3.1: at most MaxPlanes ×
		// MaxPathsPerPlane of them): dropped and counted.
		c.ep.drop(DropMalformed)
		return false
	}
	gapBefore := r.sack.Highest() >= 0
	fresh = r.receive(h.PSN)
	r.pending++
	if !fresh {
		r.urgent = true
		c.ep.drop(DropDuplicate)
	} else {
		if ecn == CE {
			r.ce++
		}
		if isData {
			r.lastTS = ts
			r.lastArr = now
			if c.peerFwd {
				r.lastFwd = c.fwd.sample(now, ts)
			}
		}
		if h.Flags&wire.FlagAckReq != 0 || r.pending >= c.ep.cfg.AckEvery || r.sack.Highest() >= 0 || gapBefore {
			r.urgent = true
		}
	}
	switch {
	case r.urgent:
		c.ackDue = true
	case !isData:
		// A first-sent RECV_READY: its acknowledgement is held for the
		// whole AckDelay, not the srtt/4 that keeps a paced sender's
		// window fed, so that the next sequenced packet (usually the
		// DATA it releases) carries it rather than an ACK of its own.
		if c.ackAt == 0 {
			c.ackAt = now + c.ep.cfg.AckDelay
		}
	case c.ackAt == 0:
		c.ackAt = now + c.ackDelay()
	default:
		c.ackAt = min(c.ackAt, now+c.ackDelay())
	}
	return fresh
}

// ackDelay is how long an acknowledgement may be held back: AckDelay, but
// at most a quarter of the connection's smoothed RTT (at least 1 µs), so
// that the 20 µs default does not hold ACKs for two RTTs of a 10 µs fabric
// (a sender paced at a small share then sees its window starve).
func (c *Conn) ackDelay() Time {
	d := c.ep.cfg.AckDelay
	if q := Time(c.cc.SRTT()) / 4; q < d {
		d = max(q, Microsecond)
	}
	return d
}

// piggyback fills pg with the acknowledgement a sequenced packet about to
// leave for the peer should carry (docs/spec.md §3.1): the record of the
// first urgent path in arrival order, else of the first path with pending
// arrivals, with the current rate hint. The path it covers counts as
// acknowledged; when no other path waits, no separate ACK is left to send.
// With nothing pending but a rate hint due, it carries the hint with the
// (acknowledging nothing) record of the peer's path 0, as buildAck does.
// pg.HasPiggy is false when there is nothing to carry.
func (c *Conn) piggyback(now Time, pg *wire.Piggyback) {
	pg.HasPiggy = false
	if !c.ackDue && c.ackAt == 0 && !c.hintDue {
		return // nothing pending: the common case costs no scan
	}
	var pick *rxPath
	for _, r := range c.rxOrder {
		if r.urgent {
			pick = r
			break
		}
		if pick == nil && r.pending > 0 {
			pick = r
		}
	}
	if pick == nil && c.hintDue {
		pick = c.rxPathFor(0)
	}
	if pick == nil {
		return
	}
	pg.HasPiggy = true
	pg.PiggyHint = c.ep.rateHint(now, c)
	pick.record(now, &pg.Piggy)
	pick.pending, pick.urgent = 0, false
	c.hintDue = false
	c.stats.AcksPiggybacked++
	// What is left decides whether an ACK still has to go, and when.
	due, held := false, false
	for _, r := range c.rxOrder {
		due = due || r.urgent
		held = held || r.pending > 0
	}
	c.ackDue = due
	switch {
	case due:
	case !held:
		c.ackAt = 0
	case c.ackAt == 0:
		c.ackAt = now + c.ackDelay()
	}
}

// onPiggy applies a piggybacked acknowledgement exactly like the record and
// rate hint of an ACK packet (docs/spec.md §3.1).
func (c *Conn) onPiggy(now Time, pg *wire.Piggyback) {
	c.stats.PiggyAcksRecv++
	c.cc.OnRateHint(int64(now), uint64(pg.PiggyHint)*1000/8)
	c.peerHints = c.peerHints || pg.PiggyHint != 0
	c.hintIdle = len(c.active) == 0
	c.stats.RateHint = uint64(pg.PiggyHint) * 1000 / 8
	if int(pg.Piggy.Path) < len(c.paths) {
		c.onAckRecord(now, c.paths[pg.Piggy.Path], &pg.Piggy)
	}
	c.repace(c.cc.PacingRate())
	c.checkPeerClosed(now)
}

// buildAck writes one ACK covering up to c.ackRecs paths with pending
// acknowledgements (MaxAckRecords, fewer when the peer's max_dgram cannot
// take an ACK of 16 records, docs/spec.md §2.5); it clears what it
// covered.
func (c *Conn) buildAck(now Time, a *wire.Ack) bool {
	a.N = 0
	limit := c.ackRecs
	if limit <= 0 {
		limit = wire.AckRecordsFit(wire.MinDatagram) // no handshake seen: the least any peer takes
	}
	for _, r := range c.rxOrder {
		if r.pending == 0 && !r.urgent {
			continue
		}
		if a.N == limit {
			return true // the rest goes in the next ACK
		}
		r.record(now, &a.Records[a.N])
		a.N++
		r.pending = 0
		r.urgent = false
	}
	if a.N == 0 && c.hintDue {
		// Nothing to acknowledge, but the rate hint must go: carry the
		// true (possibly empty) state of the peer's path 0, which
		// acknowledges nothing and declares nothing lost.
		if r := c.rxPathFor(0); r != nil {
			r.record(now, &a.Records[0])
			a.N = 1
		}
	}
	c.hintDue = false
	c.ackDue = false
	c.ackAt = 0
	return a.N > 0
}
