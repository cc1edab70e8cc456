package transport

// The connection's minimum round-trip time and what the receiver's rate
// hints make of it (docs/spec.md §3.3, §3.5).
//
// The least RTT any sample showed is the propagation delay to the peer
// without queueing, as far as the samples tell. A receiver uses it to tell
// the senders whose DATA reaches it first from those that take longer:
// on a leaf/spine fabric a peer on the same leaf answers in half the time
// of one across the spine.
//
// Samples come from the handshake, so that the first transfer on a fresh
// connection already has one, and from every RTT sample of the path layer
// afterwards (onAckRecord).

// nearReachNum/nearReachDen (3/2) bounds, in units of a starting
// connection's minimum RTT, the minimum RTTs of the connections that
// nearStarting counts with it.
const nearReachNum, nearReachDen = 3, 2

// noteMinRTT folds one RTT sample, ns, into c.minRTT (0: none yet).
func (c *Conn) noteMinRTT(rtt Time) {
	if rtt > 0 && (c.minRTT == 0 || rtt < c.minRTT) {
		c.minRTT = rtt
	}
}

// noteHandshakeSent records that a HELLO (initiator) or HELLO_ACK
// (responder) left at now.
func (c *Conn) noteHandshakeSent(now Time) {
	if c.hsTries == 0 {
		c.hsSent = now
	}
	c.hsTries++
}

// onHandshakeAnswer takes the handshake's RTT sample when the answer to
// our handshake packet arrives: for the initiator the HELLO_ACK, timed
// from its HELLO; for the responder the initiator's first packet after
// it (the initiator acknowledges a HELLO_ACK at once), timed from the
// HELLO_ACK. Only a handshake packet that went once gives a
// sample: after a retransmission it is unknown which copy was answered.
func (c *Conn) onHandshakeAnswer(now Time) {
	if c.hsAnswered || c.hsTries == 0 {
		return
	}
	c.hsAnswered = true
	if c.hsTries == 1 {
		c.noteMinRTT(now - c.hsSent)
	}
}

// nearStarting is how many connections may start sending to us while the
// starting hint of c governs c's DATA, judged by the minimum RTTs; 0 when
// c's minimum RTT is unknown or the count leaves nobody out.
//
// c's first DATA arrives about minRTT(c) after we post a receive, and its
// acknowledgement leaves at once (place) with the hint of every sender
// then active, which takes effect about 2·minRTT(c) after the post. A
// connection whose DATA cannot arrive before then does not share the
// queue that c's starting hint fills, and is not counted; one of unknown
// RTT is. The bound is 3/2 rather than 2 minRTT(c): a peer across the
// spine of a two-tier fabric crosses twice the links of one on the same
// leaf and measures twice its RTT to within nanoseconds, and which side
// of an exact bound it fell on decided whether the near peers started at
// their share of the link or at 1/(N−1) of it.
//
// Without it, a receiver whose peers sit at different distances hinted
// the near ones the share of all of them, and they, and their uplinks,
// idled until the far ones' DATA arrived. On the simulated 64-host fabric
// that was 2.3 µs of a 1 MiB all-to-all's 38 (docs/results.md).
func (e *Endpoint) nearStarting(c *Conn) int {
	if c.minRTT == 0 {
		return 0
	}
	reach := c.minRTT * nearReachNum / nearReachDen
	all, near := 0, 0
	for _, d := range e.order {
		if d.state != stateEstablished {
			continue
		}
		all++
		if d.minRTT == 0 || d.minRTT <= reach {
			near++
		}
	}
	if near == all {
		return 0
	}
	if k := e.cfg.ConcurrentSenders; k > 0 {
		near = min(near, k)
	}
	return max(near, 1)
}

// postCountsFrom is when c's latest posted receive starts to count c among
// the active senders (activeSenders), given nearest, the least minimum RTT
// of the connections sending us DATA (0: none or unknown): minRTT(c) −
// nearest after the post, or at the post itself.
//
// c's DATA arrives about minRTT(c) after the post at the earliest. A hint
// sent to the nearest sender at minRTT(c) − nearest after the post
// reaches it half its RTT later, and its packets sent at the new share
// arrive another half RTT on, together with c's first DATA. Counting c
// from the post instead held the near sender to the shared rate for the
// difference, while nothing of c's could be in the receiver's queue yet:
// the hierarchical ring posts its cross-group receive while its same-leaf
// peer still sends the last local step, and on the simulated 64-host
// fabric that step of a 4 MiB all-reduce took 21.3 µs instead of 15.0
// (docs/results.md). c's own starting hint is computed the same way, so it
// does not count itself either: it gets the share of the senders active
// at the post, and the acknowledgement of its first DATA corrects that.
// Peers at equal distances count from the post, as before.
func (c *Conn) postCountsFrom(nearest Time) Time {
	if nearest != 0 && c.minRTT > nearest {
		return c.lastPost + c.minRTT - nearest
	}
	return c.lastPost
}
