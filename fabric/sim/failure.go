package sim

import "fmt"

// FailSpineLink takes the link between leaf and spine of plane down at time
// down and back up at time up (up ≤ down: never; a time the run has passed
// is now). Packets sent on a down link, and those on the wire when it goes
// down, are lost; the leaf stops hashing onto it at once, other leaves only
// after Config.RerouteDelay.
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
// links. Packets on those links when they go down are lost.
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

// setLink changes the state of port pi and its peer (one link).
func (s *Sim) setLink(pi int32, up bool) {
	p := &s.ports[pi]
	if p.up == up {
		return
	}
	q := &s.ports[p.peer]
	p.up, q.up = up, up
	p.gen++ // packets on the wire either way are lost (see arrive)
	q.gen++
	if up {
		s.failures--
	} else {
		s.failures++
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
	s.kick(pi)
	s.kick(p.peer)
}

// PortStats are the counters of one switch egress queue.
type PortStats struct {
	QueueBytes int    // current queue
	MaxQueue   int    // largest queue seen
	Drops      uint64 // drop tail
	Marks      uint64 // CE marks
	SentBytes  uint64
}

// DownlinkStats returns the counters of the leaf port that feeds host h on
// plane: the incast bottleneck queue.
func (s *Sim) DownlinkStats(plane, h int) PortStats {
	c := s.cfg
	pi := s.nodes[s.leafNode(plane, h/c.HostsPerLeaf)].ports[h%c.HostsPerLeaf]
	p := &s.ports[pi]
	return PortStats{QueueBytes: p.qBytes, MaxQueue: p.maxQ, Drops: p.drops, Marks: p.marks, SentBytes: p.sentBytes}
}
