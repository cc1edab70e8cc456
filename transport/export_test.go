package transport

import (
	"fmt"

	"github.com/metaroce/metaroce/transport/wire"
)

// CheckFootprint returns an error when any queue or table of e exceeds the
// bound the core promises (bounded memory, docs/spec.md §3): per path at
// most wire.SackBits packets outstanding and consistent in-flight counts;
// retransmissions waiting at most what the paths can have outstanding;
// sequenced control packets, announced receive groups and receive paths
// within their configured limits; remembered released flow ids at most
// maxTombstones plus the flows in progress. It also checks the timers'
// copies of the oldest and newest records of each path against the
// records.
func CheckFootprint(e *Endpoint) error {
	cfg := &e.cfg
	if len(e.ctrl) > 1024 {
		return fmt.Errorf("endpoint control queue holds %d packets", len(e.ctrl))
	}
	if len(e.conns) > cfg.MaxConns || len(e.order) != len(e.conns) {
		return fmt.Errorf("%d connections, %d in order (max %d)", len(e.conns), len(e.order), cfg.MaxConns)
	}
	for k, c := range e.byPeerID {
		if e.conns[c.id] != c || k != (peerID{c.peerConn, c.peerTok}) {
			return fmt.Errorf("peer-id index holds %v under %v", c, k)
		}
	}
	if got, want := e.NextTimeout(), e.scanNextTimeout(); got != want {
		return fmt.Errorf("timer heap says %v, a scan of the connections %v", got, want)
	}
	for _, c := range e.order {
		sum := 0
		for _, p := range c.paths {
			out := int(p.outstanding())
			if out > wire.SackBits || out > len(p.recs) && out > 0 {
				return fmt.Errorf("%v path %d: %d packets outstanding", c, p.id, out)
			}
			if p.inflight < 0 || p.inflightPkts < 0 || p.inflightPkts > out {
				return fmt.Errorf("%v path %d: inflight %d bytes %d packets, %d outstanding", c, p.id, p.inflight, p.inflightPkts, out)
			}
			if out > 0 && p.unaSent != p.rec(p.una).sent {
				return fmt.Errorf("%v path %d: unaSent %v, the record at una was sent at %v", c, p.id, p.unaSent, p.rec(p.una).sent)
			}
			if out > 0 {
				last := p.rec(p.next - 1)
				tail := last.state == recOut && last.kind != recProbe
				if p.newestTail != tail || p.newestSent != last.sent || p.newestAckReq != last.ackReq {
					return fmt.Errorf("%v path %d: newest record cached as sent %v tail %v ackReq %v, is sent %v tail %v ackReq %v",
						c, p.id, p.newestSent, p.newestTail, p.newestAckReq, last.sent, tail, last.ackReq)
				}
			}
			sum += p.inflight
		}
		if sum != c.inflight {
			return fmt.Errorf("%v: connection inflight %d, paths sum to %d", c, c.inflight, sum)
		}
		// New DATA leaves only when nothing waits for a retransmission,
		// so lost DATA never outnumbers what the paths can have
		// outstanding. Lost control packets wait behind new ones and
		// are bounded with them: at most what may be queued new, plus
		// what was outstanding when lost.
		retxData := 0
		for _, it := range c.retxQ {
			if it.kind == recData {
				retxData++
			}
		}
		if retxData > len(c.paths)*wire.SackBits {
			return fmt.Errorf("%v: %d DATA retransmissions queued for %d paths", c, retxData, len(c.paths))
		}
		if len(c.flows) > cfg.MaxFlowsPerConn {
			return fmt.Errorf("%v: %d flows", c, len(c.flows))
		}
		// Tombstones: at most maxTombstones of flows whose state is
		// gone, plus one per flow still in progress (release.go).
		if len(c.releasedOrder) > maxTombstones || len(c.released) > len(c.releasedOrder)+len(c.flows) {
			return fmt.Errorf("%v: %d tombstones, %d forgettable (bound %d), %d flows", c, len(c.released), len(c.releasedOrder), maxTombstones, len(c.flows))
		}
		maxCtrl := 4*cfg.MaxPendingRecvs + len(c.flows)*(cfg.MaxPendingRecvs+cfg.MaxPendingSends)
		if len(c.ctrlQ) > maxCtrl {
			return fmt.Errorf("%v: %d control packets queued (bound %d)", c, len(c.ctrlQ), maxCtrl)
		}
		if maxWait := maxCtrl + 2*len(c.paths)*wire.SackBits; len(c.ctrlQ)+len(c.retxQ) > maxWait {
			return fmt.Errorf("%v: %d packets queued new and %d for retransmission (bound %d)", c, len(c.ctrlQ), len(c.retxQ), maxWait)
		}
		for _, f := range c.flows {
			if len(f.ready)+len(f.early) > cfg.MaxPendingRecvs || len(f.recvs) > cfg.MaxPendingRecvs || len(f.sends) > cfg.MaxPendingSends {
				return fmt.Errorf("%v flow %d: %d+%d ready, %d receives, %d sends", c, f.id, len(f.ready), len(f.early), len(f.recvs), len(f.sends))
			}
			for i := range f.ready {
				if f.ready[i].msg != f.readyNext+uint32(i) {
					return fmt.Errorf("%v flow %d: ready[%d] is group %d, next to match %d", c, f.id, i, f.ready[i].msg, f.readyNext)
				}
			}
			for m := range f.early {
				if k := int32(m - f.readyNext); int(k) <= len(f.ready) || int(k) >= cfg.MaxPendingRecvs {
					return fmt.Errorf("%v flow %d: group %d held early, next to match %d, %d ready", c, f.id, m, f.readyNext, len(f.ready))
				}
			}
		}
		if c.state == stateEstablished && e.byPeerID[peerID{c.peerConn, c.peerTok}] == nil {
			return fmt.Errorf("%v: not indexed by its peer id", c)
		}
		if len(c.rxPaths) > maxRxPaths {
			return fmt.Errorf("%v: %d receive paths", c, len(c.rxPaths))
		}
	}
	return nil
}

// FlowCount is how many flows connection id of e holds state for.
func FlowCount(e *Endpoint, id ConnID) int {
	if c := e.conns[id]; c != nil {
		return len(c.flows)
	}
	return -1
}

// ActiveSenders exposes the receiver's count of active senders at now
// (docs/spec.md §3.5), as its next rate hint would use it.
func ActiveSenders(e *Endpoint, now Time) int { return e.activeSenders(now) }
