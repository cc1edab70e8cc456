package transport

// NextTimeout returns the earliest time at which HandleTimeout has work, or
// Never. Drivers arm one timer for it.
func (e *Endpoint) NextTimeout() Time {
	t := Never
	for _, c := range e.order {
		t = min(t, c.nextTimeout())
	}
	return t
}

func (c *Conn) nextTimeout() Time {
	cfg := &c.ep.cfg
	switch c.state {
	case stateDialing:
		return min(c.helloDue, c.deadline)
	case stateClosing:
		t := min(c.closeDue, c.deadline)
		if c.ackAt != 0 {
			t = min(t, c.ackAt)
		}
		return t
	case stateClosed:
		return Never
	}
	t := c.lastRecv + cfg.IdleTimeout
	if c.peerClosed {
		t = min(t, c.graceEnd)
	}
	t = min(t, max(c.lastSent, c.lastRecv)+cfg.KeepAlive)
	if c.ackAt != 0 {
		t = min(t, c.ackAt)
	}
	for _, p := range c.paths {
		t = min(t, p.deadline(cfg))
		if p.state == pathProbing && p.probeAt != 0 {
			t = min(t, p.probeAt)
		}
	}
	// The pacer only needs a timer while it is what holds a packet back; a
	// sender held by its window waits for an ACK instead, and a pacing time
	// already past would make a driver spin at one instant.
	if (len(c.ctrlQ) > 0 || len(c.retxQ) > 0 || len(c.active) > 0) && c.paceHeld {
		t = min(t, c.paceNext)
	}
	return t
}

// HandleTimeout runs every timer that expired at or before now.
func (e *Endpoint) HandleTimeout(now Time) {
	for i := 0; i < len(e.order); i++ {
		c := e.order[i]
		before := len(e.order)
		c.onTimeout(now)
		if len(e.order) < before {
			i-- // c removed itself
		}
	}
}

func (c *Conn) onTimeout(now Time) {
	cfg := &c.ep.cfg
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
		c.fail(now, c.errf(ErrPeerDead,
			"nothing heard for %v on any of %d paths (%d not yet marked bad): the peer process may have died or the network between us is down",
			now-c.lastRecv, len(c.paths), good))
		return
	}
	for _, p := range c.paths {
		if p.deadline(cfg) <= now {
			c.onPathTimeout(now, p)
		}
	}
}
