package scenarios

import (
	"fmt"
	"math"

	"github.com/metaroce/metaroce/fabric/sim"
)

// flowID is the single ordered flow every workload uses per connection.
const flowID = 1

// xfer is one message of a step: to or from peer, bytes long.
type xfer struct {
	peer  int
	bytes uint64
}

// step is a set of sends and receives that a host starts together; the next
// step starts when all of them have completed (a collective's dependency).
type step struct {
	sends, recvs []xfer
}

// job runs per-host programs of steps. The programs start together, at the
// job's Start, once every pair that exchanges messages is connected (mesh).
type job struct {
	mesh
	progs    [][]step
	hosts    []*jobHost
	Finished int   // hosts whose program completed
	End      int64 // when the last host completed
	// window bounds how many receives a host keeps posted per peer; the
	// sends it keeps queued per peer are bounded by sendWindow, because
	// the transports bound their queues (MetaRoCE refuses sends past
	// Config.MaxPendingSends), so a long flow cannot be handed over at once.
	window   int
	peerList [][]int
	// onRecv observes completed receives (bytes) for goodput series.
	onRecv func(now int64, h, from int, n uint64)
}

type jobHost struct {
	*meshHost
	j         *job
	cur       int              // current step
	pendS     int              // sends outstanding in current step
	pendR     int              // receives outstanding in current step
	recvQ     map[int][]rq     // per peer: receives not yet posted, program order
	posted    map[int]int      // per peer: receives posted and not completed
	sendQ     map[int][]uint64 // per peer: the current step's sends not yet handed over (bytes)
	queued    map[int]int      // per peer: sends handed over and not completed
	recvStep  map[uint64]int   // receive cookie → step
	cookie    uint64
	done      bool
	earlyDone map[int]int // per step: receives completed before it began
}

type rq struct {
	bytes uint64
	step  int
}

func newJob(s *sim.Sim, progs [][]step) *job {
	j := &job{mesh: mesh{s: s, Start: -1}, progs: progs, window: perLinkRate(s, 16)}
	j.computePeers()
	for h := range progs {
		jh := &jobHost{j: j, recvQ: map[int][]rq{}, posted: map[int]int{}, sendQ: map[int][]uint64{}, queued: map[int]int{},
			recvStep: map[uint64]int{}}
		jh.meshHost = j.add(h, j.peersOf(h), jh.begin)
		for k, st := range progs[h] {
			for _, x := range st.recvs {
				jh.recvQ[x.peer] = append(jh.recvQ[x.peer], rq{bytes: x.bytes, step: k})
			}
		}
		j.hosts = append(j.hosts, jh)
	}
	return j
}

// peersOf returns the peers of host h in ascending order: everyone h sends
// to or receives from (pairs are symmetric).
func (j *job) peersOf(h int) []int { return j.peerList[h] }

func (j *job) computePeers() {
	n := len(j.progs)
	sets := make([]map[int]bool, n)
	for h := range sets {
		sets[h] = map[int]bool{}
	}
	for h := range j.progs {
		for _, st := range j.progs[h] {
			for _, x := range st.sends {
				sets[h][x.peer], sets[x.peer][h] = true, true
			}
			for _, x := range st.recvs {
				sets[h][x.peer], sets[x.peer][h] = true, true
			}
		}
	}
	j.peerList = make([][]int, n)
	for h := range sets {
		for p := 0; p < n; p++ {
			if sets[h][p] && p != h {
				j.peerList[h] = append(j.peerList[h], p)
			}
		}
	}
}

// Start implements sim.App.
func (jh *jobHost) Start(now int64, h *sim.Host) { jh.dial(now, h) }

// OnEvent implements sim.App.
func (jh *jobHost) OnEvent(now int64, h *sim.Host, ev sim.Event) {
	j := jh.j
	if jh.connEvent(now, ev) {
		return
	}
	switch ev.Kind {
	case sim.EvSendDone:
		if ev.Err != nil {
			j.fail(fmt.Errorf("host %d: %w", jh.id, ev.Err))
			return
		}
		jh.pendS--
		p := jh.byConn[ev.Conn]
		jh.queued[p]--
		jh.sendMore(h, p)
		jh.advance(now)
	case sim.EvRecvDone:
		if ev.Err != nil {
			j.fail(fmt.Errorf("host %d: %w", jh.id, ev.Err))
			return
		}
		p := jh.byConn[ev.Conn]
		jh.posted[p]--
		if j.onRecv != nil {
			j.onRecv(now, jh.id, p, ev.Len)
		}
		if st, ok := jh.recvStep[ev.Cookie]; ok {
			delete(jh.recvStep, ev.Cookie)
			if st == jh.cur {
				jh.pendR--
			} else {
				jh.early(st)
			}
		}
		jh.postMore(h, p)
		jh.advance(now)
	}
}

// early counts a receive that completed before its step began.
func (jh *jobHost) early(st int) {
	if jh.earlyDone == nil {
		jh.earlyDone = map[int]int{}
	}
	jh.earlyDone[st]++
}

func (jh *jobHost) host() *sim.Host { return jh.j.s.Hosts()[jh.id] }

func (jh *jobHost) begin(now int64) {
	h := jh.host()
	for _, p := range jh.j.peersOf(jh.id) {
		jh.postMore(h, p)
	}
	jh.cur = -1
	jh.next(now)
}

func (jh *jobHost) postMore(h *sim.Host, p int) {
	for jh.posted[p] < jh.j.window && len(jh.recvQ[p]) > 0 {
		r := jh.recvQ[p][0]
		jh.recvQ[p] = jh.recvQ[p][1:]
		jh.cookie++
		jh.recvStep[jh.cookie] = r.step
		jh.posted[p]++
		if err := h.PostRecv(jh.conns[p], flowID, r.bytes, 0, jh.cookie); err != nil {
			jh.j.refuse(fmt.Errorf("host %d: receive from host %d: %w", jh.id, p, err))
		}
	}
}

// perLinkRate scales a count of posted receives, chosen for 400 Gb/s links,
// to s's link rate: n per 400 Gb/s, rounded up, at least n. The posted
// bytes then cover as many RTTs of a flow at any rate (at 1600 Gb/s, 16
// receives of 256 KiB are 2.6 RTTs of one flow, and repairing losses
// starved it of announced buffers: goodput at 10% loss read 0.57).
func perLinkRate(s *sim.Sim, n int) int {
	return n * max(1, int(math.Ceil(s.Config().LinkRate/400e9)))
}

// sendWindow is how many sends a host keeps queued per peer: as many as
// the MetaRoCE core takes by default (Config.MaxPendingSends). A stream's
// data is all ready, so the workload keeps the transport's queue full and
// only the protocols decide what is in flight; it refills the queue as
// sends complete, which a flow longer than the bound needs.
const sendWindow = 4096

// sendMore hands over the current step's sends to p, in program order,
// until sendWindow of them are queued.
func (jh *jobHost) sendMore(h *sim.Host, p int) {
	for jh.queued[p] < sendWindow && len(jh.sendQ[p]) > 0 {
		b := jh.sendQ[p][0]
		jh.sendQ[p] = jh.sendQ[p][1:]
		jh.cookie++
		jh.queued[p]++
		if err := h.Send(jh.conns[p], flowID, b, 0, jh.cookie); err != nil {
			jh.j.refuse(fmt.Errorf("host %d: send to host %d: %w", jh.id, p, err))
		}
	}
}

// next starts the following step, skipping empty ones.
func (jh *jobHost) next(now int64) {
	prog := jh.j.progs[jh.id]
	h := jh.host()
	for {
		jh.cur++
		if jh.cur >= len(prog) {
			jh.done = true
			jh.j.Finished++
			if now > jh.j.End {
				jh.j.End = now
			}
			return
		}
		st := prog[jh.cur]
		jh.pendS = len(st.sends)
		jh.pendR = len(st.recvs) - jh.earlyDone[jh.cur]
		for _, x := range st.sends { // handed over in program order
			jh.sendQ[x.peer] = append(jh.sendQ[x.peer], x.bytes)
			jh.sendMore(h, x.peer)
		}
		if jh.pendS > 0 || jh.pendR > 0 {
			return
		}
	}
}

func (jh *jobHost) advance(now int64) {
	if jh.done || jh.cur < 0 || jh.j.Start < 0 {
		return
	}
	if jh.pendS == 0 && jh.pendR == 0 {
		jh.next(now)
	}
}

// streams gives each (src, dst) pair a long flow made of count messages of
// msg bytes, all in one step, so the flow never drains before the run ends.
func streams(n int, pairs [][2]int, msg uint64, count int) [][]step {
	progs := make([][]step, n)
	for h := range progs {
		progs[h] = []step{{}}
	}
	for _, p := range pairs {
		for i := 0; i < count; i++ {
			progs[p[0]][0].sends = append(progs[p[0]][0].sends, xfer{p[1], msg})
			progs[p[1]][0].recvs = append(progs[p[1]][0].recvs, xfer{p[0], msg})
		}
	}
	return progs
}

// meanJain is the mean of the defined (non-NaN) indexes of js, or -1 when
// none is: bins in which nobody sent have no fairness to average in.
func meanJain(js []float64) float64 {
	var sum float64
	n := 0
	for _, v := range js {
		if !math.IsNaN(v) {
			sum += v
			n++
		}
	}
	if n == 0 {
		return -1
	}
	return sum / float64(n)
}

// jain is Jain's fairness index of xs (1 = equal shares; NaN when every
// share is 0).
func jain(xs []float64) float64 {
	var s, q float64
	for _, x := range xs {
		s += x
		q += x * x
	}
	if q == 0 {
		return math.NaN()
	}
	return s * s / (float64(len(xs)) * q)
}
