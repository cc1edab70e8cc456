package sim

import "fmt"

// FailSpineLink takes the link between leaf and spine of plane down at time
// down and back up at time up (up ≤ down: never; a time the run has passed
// is now). When it goes down, the packets queued at either end are dropped
// at once and those being serialised or on the wire are lost; while it is
// down, packets forwarded to it are dropped. No packet that reached the
// link before the failure is delivered after it, however soon the link is
// back. The leaf stops hashing onto it at once, other leaves only after
// Config.RerouteDelay.
func (s *Sim) FailSpineLink(plane, leaf, spine int, down, up int64) error {
	c := s.cfg
	if plane < 0 || plane >= c.Planes || leaf < 0 || leaf >= c.Leaves || spine < 0 || spine >= c.Spines {
		return fmt.Errorf("%w: no link plane %d leaf %d spine %d", ErrConfig, plane, leaf, spine)
	}
	pi := s.nodes[s.leafNode(plane, leaf)].ports[c.HostsPerLeaf+spine]
	s.scheduleLink(pi, down, up)
	return nil
}

// FailPlane takes every link of plane down at down and up again at up
// (up ≤ down: never; a time the run has passed is now), including host NIC
// links. Packets queued for those links or on them when they go down are
// lost, as for FailSpineLink; a host keeps sending onto its down NIC link
// at the line rate, and loses what it sends there.
func (s *Sim) FailPlane(plane int, down, up int64) error {
	if plane < 0 || plane >= s.cfg.Planes {
		return fmt.Errorf("%w: no plane %d", ErrConfig, plane)
	}
	for l := 0; l < s.cfg.Leaves; l++ {
		for _, pi := range s.nodes[s.leafNode(plane, l)].ports {
			s.scheduleLink(pi, down, up)
		}
	}
	return nil
}

func (s *Sim) scheduleLink(pi int32, down, up int64) {
	s.schedule(event{at: down, kind: evLink, a: pi, b: 0})
	if up > down {
		s.schedule(event{at: up, kind: evLink, a: pi, b: 1})
	}
}

// setLink changes the state of port pi and its peer (one link). Going
// down, both ports' queues are flushed (flush). Either way the gen of both
// ports moves on, which voids the packets and the PFC frames on the wire
// (see arrive and Run), and the link's PFC state starts afresh: neither
// port is paused and neither end holds a pause it sent over this link (a
// real port's pause expires when its link drops), so none stays paused
// waiting for a resume frame that was lost with the link. A host whose NIC
// port is now idle may send again.
func (s *Sim) setLink(pi int32, up bool) {
	p := &s.ports[pi]
	if p.up == up {
		return
	}
	q := &s.ports[p.peer]
	p.up, q.up = up, up
	p.gen++ // packets on the wire either way are lost (see arrive)
	q.gen++
	p.paused, q.paused = false, false
	p.xoff, q.xoff = false, false
	if up {
		s.failures--
	} else {
		s.failures++
		s.flush(pi)
		s.flush(p.peer)
	}
	// A spine–leaf link: after the reroute delay, leaves learn it.
	a, b := &s.nodes[p.owner], &s.nodes[q.owner]
	if a.kind == kindSpine {
		a, b = b, a
	}
	if a.kind == kindLeaf && b.kind == kindSpine && s.cfg.RerouteDelay > 0 {
		idx := s.dkIndex(int(a.plane), int(b.index), int(a.index))
		s.At(s.now+s.cfg.RerouteDelay, func(int64) {
			s.downKnown[idx] = !s.ports[pi].up
		})
	}
	for _, x := range [2]int32{pi, p.peer} {
		s.kick(x)
		if xp := &s.ports[x]; xp.isHost && !xp.busy {
			s.hosts[xp.owner].pump()
		}
	}
}

// PortStats are the counters of one switch egress queue.
type PortStats struct {
	QueueBytes int    // current queue, bytes
	MaxQueue   int    // largest queue seen, bytes
	Drops      uint64 // drop tail, packets
	Lost       uint64 // random loss and link failures, packets
	LinkLost   uint64 // of Lost: lost to link failures (see Stats.LinkLost), packets
	Marks      uint64 // CE marks, packets
	SentBytes  uint64 // bytes serialised, those lost on the link included
}

// DownlinkStats returns the counters of the leaf port that feeds host h on
// plane: the incast bottleneck queue.
func (s *Sim) DownlinkStats(plane, h int) PortStats {
	c := s.cfg
	pi := s.nodes[s.leafNode(plane, h/c.HostsPerLeaf)].ports[h%c.HostsPerLeaf]
	p := &s.ports[pi]
	return PortStats{QueueBytes: p.qBytes, MaxQueue: p.maxQ, Drops: p.drops, Lost: p.lost, LinkLost: p.linkLost,
		Marks: p.marks, SentBytes: p.sentBytes}
}
