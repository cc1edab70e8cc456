package scenarios

import (
	"fmt"

	"github.com/metaroce/metaroce/collectives/sched"
	"github.com/metaroce/metaroce/fabric/sim"
)

// planJob runs the plans of one collective (collectives/sched) on the
// simulated hosts the way the real executor (collectives/exec.go) runs them
// on sockets: a step starts once its Deps completed, the messages of one
// stream (direction, peer, channel) are posted in Seq order, which is the
// order in which both sides match them, and local steps (reductions,
// copies) take no simulated time, since the fabric and not the CPU is
// under study. Receives are therefore posted when the algorithm reaches
// them, not all at the start: a receiver announces only the senders it is
// about to hear from, as on real hosts. Channel c travels on flow
// flowID+c of the pair's connection.
//
// The plans start together once every pair that exchanges messages is
// connected (mesh).
type planJob struct {
	mesh
	hosts    []*planHost
	Finished int   // hosts whose plan completed
	End      int64 // when the last host completed, ns
}

// planHost is one rank's executor.
type planHost struct {
	*meshHost
	j    *planJob
	plan *sched.Plan

	waiting []int                     // unfinished dependencies per step
	after   [][]int                   // dependents per step
	nextSeq map[streamKey]int         // next Seq to post per stream
	parked  map[streamKey]map[int]int // ready out of Seq order: seq → step
	ready   []int
	left    int // steps not yet finished
	recvOut int // receives posted and not completed
	// PeakRecvs is the most receives this rank had posted at once.
	PeakRecvs int
	byCook    map[uint64]int // transfer cookie → step
	cookie    uint64
}

// streamKey names one ordered message stream of a rank.
type streamKey struct {
	send bool
	peer int
	ch   int
}

// newPlanJob prepares the executors for plans (one per rank, indexed by
// rank) on the hosts of s.
func newPlanJob(s *sim.Sim, plans []*sched.Plan) *planJob {
	j := &planJob{mesh: mesh{s: s, Start: -1}}
	for r, p := range plans {
		h := &planHost{j: j, plan: p,
			nextSeq: map[streamKey]int{}, parked: map[streamKey]map[int]int{}, byCook: map[uint64]int{}}
		seen := map[int]bool{}
		n := len(p.Steps)
		h.waiting, h.after, h.left = make([]int, n), make([][]int, n), n
		for i := range p.Steps {
			st := &p.Steps[i]
			h.waiting[i] = len(st.Deps)
			for _, d := range st.Deps {
				h.after[d] = append(h.after[d], i)
			}
			if st.Kind == sched.KindSend || st.Kind == sched.KindRecv {
				seen[st.Peer] = true
			}
		}
		var peers []int
		for q := range plans {
			if seen[q] {
				peers = append(peers, q)
			}
		}
		h.meshHost = j.add(r, peers, h.begin)
		j.hosts = append(j.hosts, h)
	}
	return j
}

// apps returns the per-host applications, indexed by host.
func (j *planJob) apps() []sim.App {
	a := make([]sim.App, len(j.hosts))
	for i, h := range j.hosts {
		a[i] = h
	}
	return a
}

// done reports whether every plan finished or one failed.
func (j *planJob) done() bool { return j.Finished == len(j.hosts) || j.Err != nil }

// Start implements sim.App.
func (ph *planHost) Start(now int64, h *sim.Host) { ph.dial(now, h) }

// sendersDeclarer is a transport that takes the application's bound on
// concurrent senders (agents.MetaRoCE).
type sendersDeclarer interface{ ExpectSenders(k int) }

// begin starts the plan: every step without dependencies is ready. Like
// the real executor, it first declares how many peers the plan receives
// from (sched.Plan.RecvPeers).
func (ph *planHost) begin(now int64) {
	if d, ok := ph.j.s.Hosts()[ph.id].T.(sendersDeclarer); ok {
		d.ExpectSenders(ph.plan.RecvPeers())
	}
	for i := range ph.waiting {
		if ph.waiting[i] == 0 {
			ph.ready = append(ph.ready, i)
		}
	}
	ph.run(now)
}

// run posts or runs every ready step, in the real executor's order.
func (ph *planHost) run(now int64) {
	h := ph.j.s.Hosts()[ph.id]
	for len(ph.ready) > 0 && ph.j.Err == nil {
		i := ph.ready[len(ph.ready)-1]
		ph.ready = ph.ready[:len(ph.ready)-1]
		st := &ph.plan.Steps[i]
		if st.Kind != sched.KindSend && st.Kind != sched.KindRecv {
			ph.finish(now, i)
			continue
		}
		k := streamKey{st.Kind == sched.KindSend, st.Peer, st.Channel}
		if st.Seq != ph.nextSeq[k] {
			if ph.parked[k] == nil {
				ph.parked[k] = map[int]int{}
			}
			ph.parked[k][st.Seq] = i
			continue
		}
		for {
			ph.post(h, i)
			ph.nextSeq[k]++
			nx, ok := ph.parked[k][ph.nextSeq[k]]
			if !ok {
				break
			}
			delete(ph.parked[k], ph.nextSeq[k])
			i = nx
		}
	}
}

// post hands transfer step i to the transport.
func (ph *planHost) post(h *sim.Host, i int) {
	st := &ph.plan.Steps[i]
	ph.cookie++
	ph.byCook[ph.cookie] = i
	conn, flow := ph.conns[st.Peer], uint32(flowID+st.Channel)
	var err error
	if st.Kind == sched.KindSend {
		err = h.Send(conn, flow, uint64(st.Src.Len), 0, ph.cookie)
	} else {
		ph.recvOut++
		ph.PeakRecvs = max(ph.PeakRecvs, ph.recvOut)
		err = h.PostRecv(conn, flow, uint64(st.Dst.Len), 0, ph.cookie)
	}
	if err != nil {
		ph.j.fail(fmt.Errorf("rank %d, step %d: %w", ph.id, i, err))
	}
}

// finish completes step i and readies the steps waiting on it.
func (ph *planHost) finish(now int64, i int) {
	ph.left--
	for _, d := range ph.after[i] {
		ph.waiting[d]--
		if ph.waiting[d] == 0 {
			ph.ready = append(ph.ready, d)
		}
	}
	if ph.left == 0 {
		j := ph.j
		j.Finished++
		j.End = max(j.End, now)
	}
}

// OnEvent implements sim.App.
func (ph *planHost) OnEvent(now int64, h *sim.Host, ev sim.Event) {
	j := ph.j
	if ph.connEvent(now, ev) {
		return
	}
	switch ev.Kind {
	case sim.EvSendDone, sim.EvRecvDone:
		if ev.Err != nil {
			j.fail(fmt.Errorf("host %d: %w", ph.id, ev.Err))
			return
		}
		i, ok := ph.byCook[ev.Cookie]
		if !ok {
			return
		}
		delete(ph.byCook, ev.Cookie)
		if ev.Kind == sim.EvRecvDone {
			ph.recvOut--
		}
		ph.finish(now, i)
		ph.run(now)
	}
}
