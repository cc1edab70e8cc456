package transport

// The endpoint keeps its connections' timer deadlines in a min-heap
// (timerq.go). A connection's deadline (Conn.nextTimeout) is a function of
// its state alone, so it is recomputed only for the connections touched
// since the last NextTimeout or HandleTimeout: those that received a
// datagram, were called by the user, sent, or had a timer fire. Scanning
// every connection on every call made the simulator spend most of its
// time here with 64 connections per host.

import "github.com/metaroce/metaroce/transport/wire"

// NextTimeout returns the earliest time at which HandleTimeout has work, or
// Never. Drivers arm one timer for it.
func (e *Endpoint) NextTimeout() Time {
	e.flushTimers()
	t := Never
	if len(e.tq) > 0 {
		t = e.tq[0].due
	}
	return t
}

// scanNextTimeout is NextTimeout by a scan of every connection: the
// reference the heap is checked against.
func (e *Endpoint) scanNextTimeout() Time {
	t := Never
	for _, c := range e.order {
		t = min(t, c.nextTimeout())
	}
	return t
}

// touch marks c's deadline for recomputation.
func (e *Endpoint) touch(c *Conn) {
	if !c.dirty {
		c.dirty = true
		e.dirty = append(e.dirty, c)
	}
}

// flushTimers recomputes the deadlines of the touched connections.
func (e *Endpoint) flushTimers() {
	for i, c := range e.dirty {
		e.dirty[i] = nil
		c.dirty = false
		if c.state == stateClosed {
			e.tq.remove(c)
			continue
		}
		e.tq.set(c, c.nextTimeout())
	}
	e.dirty = e.dirty[:0]
}

func (c *Conn) nextTimeout() Time {
	cfg := &c.ep.cfg
	switch c.state {
	case stateDialing:
		return min(c.sendTimer(c.helloDue), c.deadline)
	case stateClosing:
		return min(c.sendTimer(c.closeDue), c.deadline, c.ackTimer())
	case stateClosed:
		return Never
	}
	t := c.lastRecv + cfg.IdleTimeout
	if c.peerClosed {
		t = min(t, c.graceEnd)
	}
	t = min(t, max(c.lastSent, c.lastRecv)+cfg.KeepAlive, c.ackTimer())
	for _, p := range c.paths {
		t = min(t, p.deadline(cfg, c.ackedSent, c.unsampled))
		if !p.tailDue {
			t = min(t, p.tailProbeAt(cfg))
		}
		if p.state == pathProbing && p.probeAt != 0 {
			t = min(t, p.probeAt)
		}
	}
	return min(t, c.paceTimer())
}

// sendTimer is the part of nextTimeout of t, a time from which poll sends
// a packet (a HELLO, a CLOSE, a held-back ACK, a paced packet). Once t has
// passed and a timer run has seen it, the packet waits for the driver's
// next PollTransmit, not for a timer: a driver whose NIC is busy polls when
// the NIC frees, and an expired t kept in the deadline woke it again and
// again for a packet it could not send yet. In the simulator every
// connection with an ACK or a paced packet queued behind its host's
// saturated port ran onTimeout at every event of that host, 44 times per
// packet sent with 63 connections a host.
func (c *Conn) sendTimer(t Time) Time {
	if t > c.timerRan {
		return t
	}
	return Never
}

// ackTimer is the held-back ACK's part of nextTimeout (sendTimer).
func (c *Conn) ackTimer() Time {
	if c.ackAt == 0 {
		return Never
	}
	return c.sendTimer(c.ackAt)
}

// paceTimer is the pacer's part of nextTimeout: the pacer only needs a
// timer while it is what holds a packet back; a sender held by its window
// waits for an ACK instead, and a pacing time already past would make a
// driver spin at one instant. Once a timer run has seen the pacing time
// pass, the next poll sends or holds the sender again with a later one
// (sendTimer).
func (c *Conn) paceTimer() Time {
	if (len(c.ctrlQ) > 0 || len(c.retxQ) > 0 || len(c.active) > 0) && c.paceHeld {
		return c.sendTimer(c.paceNext)
	}
	return Never
}

// HandleTimeout runs every timer that expired at or before now.
func (e *Endpoint) HandleTimeout(now Time) {
	e.flushTimers()
	due := e.dueScratch[:0]
	for len(e.tq) > 0 && e.tq[0].due <= now {
		c := e.tq[0]
		e.tq.remove(c)
		due = append(due, c)
	}
	for i, c := range due {
		due[i] = nil
		if c.state == stateClosed {
			continue
		}
		c.onTimeout(now)
		e.touch(c)
	}
	e.dueScratch = due[:0]
}

func (c *Conn) onTimeout(now Time) {
	cfg := &c.ep.cfg
	c.timerRan = now
	switch c.state {
	case stateDialing:
		if now >= c.deadline {
			c.fail(now, c.errf(ErrHandshakeTimeout,
				"no HELLO_ACK within %v: check that the peer is listening and that UDP is not filtered", cfg.HandshakeTimeout))
		}
		return
	case stateClosing:
		if now >= c.deadline {
			c.fail(now, nil)
		}
		return
	case stateClosed:
		return
	}
	if c.peerClosed && now >= c.graceEnd {
		c.checkPeerClosed(now)
		return
	}
	if now-c.lastRecv >= cfg.IdleTimeout {
		good := 0
		for _, p := range c.paths {
			if p.state == pathActive {
				good++
			}
		}
		// Tell the peer, best effort: where only the direction towards
		// this side failed, it still hears us, and learns now instead of
		// after its own IdleTimeout, which would start only when our last
		// packets stopped reaching it (docs/spec.md §3.6).
		c.closeRsn = wire.CloseIdleTimeout
		c.ep.ctrlCloseEveryPath(c)
		c.fail(now, c.errf(ErrPeerDead,
			"nothing heard for %v on any of %d paths (%d not yet marked bad): the peer process may have died or the network between us is down",
			now-c.lastRecv, len(c.paths), good))
		return
	}
	for _, p := range c.paths {
		if p.deadline(cfg, c.ackedSent, c.unsampled) > now {
			continue
		}
		overtaken := p.deadline(cfg, 0, 0) > now
		if overtaken && p.state == pathActive && !p.suspect && !p.passedTwice(c.ackedSent) {
			// Overdue by the other paths' progress, but only the oldest
			// packet was overtaken: a random tail loss, not a dead route.
			c.onTailLoss(now, p)
			continue
		}
		probing := p.state == pathProbing
		sent := p.unaSent
		c.onPathTimeout(now, p, !overtaken)
		if !probing || p.state != pathProbing || p.probeAt == 0 {
			continue
		}
		switch {
		case overtaken && (p.quickProbes < maxQuickProbes || c.planeActive(p.plane)):
			// A probe overtaken by the other paths' progress: the peer
			// answers, only this fresh route is dead too (its entropy
			// hashed onto the same failed link). Probe the next one at
			// once rather than after ProbeInterval. When no path of the
			// plane is active and maxQuickProbes such routes in a row
			// were dead, the plane itself is likely down: probing it at
			// the pace of the other planes' progress sent, in the
			// simulator, 5548 probes on its 4 paths in 30 ms, for as
			// long as it stayed down (docs/spec.md §3.6).
			p.quickProbes++
			p.probeAt = now
		case c.probing == len(c.paths) && c.lastRecv > sent:
			// No path is active, so the connection can send no
			// sequenced packet (RECV_READY, NACK, retransmission,
			// DATA) until a probe is answered, and the peer was heard
			// after this probe left: it is alive, and its answer was
			// lost, on our fresh route or on its way back (the peer's
			// ACKs take the peer's routes, which may have died with
			// ours, and it answers on them until it moves off them).
			// Waiting ProbeInterval stalled the connection's flows
			// that long (docs/spec.md §3.6); probe the next route at
			// once.
			p.probeAt = now
		}
	}
	for _, p := range c.paths {
		if !p.tailDue && p.tailProbeAt(cfg) <= now {
			p.tailDue = true
			c.tailDue = true
		}
	}
}

// maxQuickProbes bounds the probes in a row that a path sends at once,
// each on a fresh route, after its previous probe was overtaken by the
// other paths' progress, while no path of its plane is active (docs/spec.md
// §3.6). Where one of k links of an ECMP group failed, a fresh entropy
// misses it with probability 1 − 1/k, so five routes in a row all hashing
// onto it (one chance in 32 with two links) is rare; where the plane's
// every route is dead, the path then probes once per ProbeInterval. While
// another path of the plane is active the plane carries traffic, and the
// path keeps probing at once until it finds a live route, however many of
// the plane's routes are dead.
const maxQuickProbes = 4

// planeActive reports whether a path of plane is active.
func (c *Conn) planeActive(plane uint8) bool {
	for _, p := range c.paths {
		if p.plane == plane && p.state == pathActive {
			return true
		}
	}
	return false
}
