package sim

import (
	"context"
	"fmt"
	"math"
	"math/rand/v2"

	"github.com/metaroce/metaroce/internal/eventq"
)

// node kinds
const (
	kindHost = iota
	kindLeaf
	kindSpine
)

// node is a host or a switch. Switch ports are indexed: a leaf has its host
// ports first (slot order) then its uplinks (spine order); a spine has one
// port per leaf.
type node struct {
	kind  uint8
	plane uint8
	index int32 // host id, leaf index or spine index within the plane
	ports []int32
	seed  uint64 // ECMP hash seed
}

// Stats are fabric-wide counters of a run.
type Stats struct {
	Events  uint64 // events executed
	Dropped uint64 // drop-tail drops
	Lost    uint64 // random loss and link failures (LinkLost)
	// LinkLost counts the packets of Lost that a link failure took: those
	// queued at either end of a link when it went down (dropped at that
	// instant), those on its wire then (lost where they would have
	// arrived), those a switch forwarded to a down port and those a host
	// NIC sent onto its down link.
	LinkLost  uint64
	Marked    uint64 // CE marks applied
	Pauses    uint64 // PFC pause frames sent
	Delivered uint64 // packets delivered to hosts
	BadTx     uint64 // transmissions with an invalid route (ignored)
	// TimerStalls counts transport timeouts that were still due right
	// after HandleTimeout ran (see StallBackoff).
	TimerStalls uint64
}

// Sim is the simulator: engine, fabric and hosts.
type Sim struct {
	cfg   Config
	now   int64
	heap  eventq.Queue[event]
	rng   *rand.Rand
	pool  []*Packet
	ports []port
	nodes []node
	hosts []*Host
	// hostNode[plane][host] is unused: hosts are nodes 0..H-1.
	leafBase, spineBase int    // node index of leaf 0 / spine 0 of plane 0
	downKnown           []bool // [plane][spine][leaf]: leaves route around spine→leaf
	failures            int    // links currently down (fast path when 0)

	// Stats are updated as the run proceeds.
	Stats Stats
	// OnRx, when set, observes every packet delivered to a host, once the
	// host's transport has handled it (Packet.Placed). The packet is
	// freed when OnRx returns.
	OnRx func(now int64, h *Host, pk *Packet)
}

// New builds the fabric of cfg with no transports attached.
func New(cfg Config) (*Sim, error) {
	if err := cfg.fill(); err != nil {
		return nil, err
	}
	s := &Sim{cfg: cfg, rng: rand.New(rand.NewPCG(cfg.Seed, cfg.Seed^0x9e3779b97f4a7c15))}
	H, L, S, P := cfg.Hosts(), cfg.Leaves, cfg.Spines, cfg.Planes
	s.leafBase = H
	s.spineBase = H + P*L
	s.nodes = make([]node, H+P*L+P*S)
	for h := 0; h < H; h++ {
		s.nodes[h] = node{kind: kindHost, index: int32(h)}
	}
	for p := 0; p < P; p++ {
		for l := 0; l < L; l++ {
			s.nodes[s.leafNode(p, l)] = node{kind: kindLeaf, plane: uint8(p), index: int32(l), seed: s.rng.Uint64()}
		}
		for sp := 0; sp < S; sp++ {
			s.nodes[s.spineNode(p, sp)] = node{kind: kindSpine, plane: uint8(p), index: int32(sp), seed: s.rng.Uint64()}
		}
	}
	// Rates to the whole bit per second (fill bounds them so that this is
	// within 0.05% and the ports' arithmetic cannot overflow); BaseRTT
	// rounds them the same way.
	hostBps := wholeBps(cfg.LinkRate)
	upBps := wholeBps(cfg.UplinkRate())
	for p := 0; p < P; p++ {
		for l := 0; l < L; l++ {
			leaf := s.leafNode(p, l)
			for k := 0; k < cfg.HostsPerLeaf; k++ {
				h := l*cfg.HostsPerLeaf + k
				s.link(h, leaf, hostBps)
			}
		}
		for l := 0; l < L; l++ {
			for sp := 0; sp < S; sp++ {
				s.link(s.leafNode(p, l), s.spineNode(p, sp), upBps)
			}
		}
	}
	s.downKnown = make([]bool, P*S*L)
	s.hosts = make([]*Host, H)
	for h := range s.hosts {
		s.hosts[h] = &Host{ID: h, sim: s, ports: s.nodes[h].ports, timerAt: math.MaxInt64, lastFire: -1,
			txbuf: make([]byte, cfg.MaxDatagram), rxbuf: make([]byte, cfg.MaxDatagram),
			RxPayload: make([]uint64, H)}
	}
	return s, nil
}

func (s *Sim) leafNode(plane, leaf int) int    { return s.leafBase + plane*s.cfg.Leaves + leaf }
func (s *Sim) spineNode(plane, sp int) int     { return s.spineBase + plane*s.cfg.Spines + sp }
func (s *Sim) dkIndex(plane, sp, leaf int) int { return (plane*s.cfg.Spines+sp)*s.cfg.Leaves + leaf }

// link joins nodes a and b with a pair of ports; a's port is appended to
// a's port list and likewise for b. Both ports send at bps bits per second.
func (s *Sim) link(a, b int, bps uint64) {
	ia, ib := int32(len(s.ports)), int32(len(s.ports)+1)
	mk := func(owner int, peer int32) port {
		return port{owner: int32(owner), peer: peer, bps: bps, delay: s.cfg.LinkDelay,
			loss: s.cfg.Loss, up: true, isHost: s.nodes[owner].kind == kindHost}
	}
	s.ports = append(s.ports, mk(a, ib), mk(b, ia))
	s.nodes[a].ports = append(s.nodes[a].ports, ia)
	s.nodes[b].ports = append(s.nodes[b].ports, ib)
}

// Config returns the filled-in configuration.
func (s *Sim) Config() Config { return s.cfg }

// Now is the current virtual time, ns.
func (s *Sim) Now() int64 { return s.now }

// Rand is the simulation's single random source.
func (s *Sim) Rand() *rand.Rand { return s.rng }

// Hosts returns the hosts, indexed by id.
func (s *Sim) Hosts() []*Host { return s.hosts }

// Attach sets host h's transport and workload.
func (s *Sim) Attach(h int, t Transport, app App) {
	s.hosts[h].T, s.hosts[h].App = t, app
}

// schedule queues e. An event due in the past (a failure scheduled for a
// time the run has passed) is due now: virtual time never goes back.
func (s *Sim) schedule(e event) {
	if e.at < s.now {
		e.at = s.now
	}
	s.heap.Push(e.at, e)
}

// At runs fn at virtual time t (or now if t is in the past).
func (s *Sim) At(t int64, fn func(now int64)) {
	s.schedule(event{at: t, kind: evCall, fn: fn})
}

// Start calls every attached app's Start at time 0 and arms the hosts.
func (s *Sim) Start() {
	for _, h := range s.hosts {
		if h.T == nil {
			continue
		}
		if h.App != nil {
			h.App.Start(s.now, h)
		}
		h.pump()
	}
}

// Run executes events until the heap is empty, virtual time passes until,
// or stop returns true (checked after every event; nil: never). An until
// the run has already passed leaves the time where it is.
func (s *Sim) Run(until int64, stop func() bool) {
	s.run(nil, until, stop)
}

// ctxCheckEvents is the number of events RunContext executes between two
// looks at its context: one event takes well under a microsecond of wall
// time, so a cancelled run stops within a few milliseconds, while the
// check costs the event loop a counter decrement per event rather than a
// channel poll.
const ctxCheckEvents = 4096

// RunContext is Run that also stops once ctx is done, returning ctx.Err():
// it looks at ctx before the first event and then after every
// ctxCheckEvents events, so that a caller's cancellation (an interrupted
// command, a test that gave up) ends a run that would otherwise go on to
// its virtual-time limit. The fabric is left as the last event left it; a
// run that ends otherwise returns nil.
func (s *Sim) RunContext(ctx context.Context, until int64, stop func() bool) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if s.run(ctx.Done(), until, stop) {
		return ctx.Err()
	}
	return nil
}

// run is Run, which also returns, reporting true, once done is closed,
// looking at it every ctxCheckEvents events (a nil done: never).
func (s *Sim) run(done <-chan struct{}, until int64, stop func() bool) bool {
	check := ctxCheckEvents
	for s.heap.Len() > 0 {
		if at, _ := s.heap.Next(); at > until {
			s.now = max(s.now, until)
			return false
		}
		_, e := s.heap.Pop()
		s.now = e.at
		s.Stats.Events++
		switch e.kind {
		case evArrive:
			s.arrive(e.a, e.pkt)
		case evTxDone:
			s.txDone(e.a)
		case evTimer:
			s.hosts[e.a].timer(e.at)
		case evPause:
			if p := &s.ports[e.a]; p.gen == uint32(e.b) {
				p.paused = true
			}
		case evResume:
			p := &s.ports[e.a]
			if p.gen != uint32(e.b) {
				break // the frame was on a link that failed since
			}
			p.paused = false
			s.kick(e.a)
			if p.isHost && !p.busy {
				s.hosts[p.owner].pump()
			}
		case evLink:
			s.setLink(e.a, e.b != 0)
		case evCall:
			e.fn(s.now)
		}
		if stop != nil && stop() {
			return false
		}
		if done != nil {
			if check--; check == 0 {
				check = ctxCheckEvents
				select {
				case <-done:
					return true
				default:
				}
			}
		}
	}
	return false
}

// enqueue puts pk on egress port pi, applying drop tail and ECN marking at
// switch ports, and starts the serialiser if idle. A switch port whose link
// is down holds no queue: pk is lost to the link failure at once, before
// any marking or PFC accounting. A host NIC port queues either way (see
// kick).
func (s *Sim) enqueue(pi int32, pk *Packet) {
	p := &s.ports[pi]
	if !p.isHost {
		if !p.up {
			s.loseToLink(p, pk)
			return
		}
		q := p.qBytes
		// With PFC the fabric is lossless by construction: pause frames
		// bound every queue and switches reserve headroom for what is in
		// flight, so only the lossy fabric drops tail.
		if !s.cfg.PFC && q+int(pk.Size) > s.cfg.Buffer {
			p.drops++
			s.Stats.Dropped++
			s.release(pk)
			return
		}
		if pk.ECN != NotECT && q > s.cfg.Kmin {
			mark := q >= s.cfg.Kmax
			if !mark {
				pr := s.cfg.Pmax * float64(q-s.cfg.Kmin) / float64(s.cfg.Kmax-s.cfg.Kmin)
				mark = s.rng.Float64() < pr
			}
			if mark {
				pk.ECN = CE
				p.marks++
				s.Stats.Marked++
			}
		}
		if s.cfg.PFC {
			in := &s.ports[pk.inPort]
			in.ingress += int(pk.Size)
			if !in.xoff && in.ingress > s.cfg.XOFF {
				in.xoff = true
				s.Stats.Pauses++
				s.schedule(event{at: s.now + in.delay, kind: evPause, a: in.peer, b: int32(in.gen)})
			}
		}
	}
	p.push(pk)
	s.kick(pi)
}

// release frees a packet dropped on its way into a switch queue (drop
// tail), before enqueue counted it against any PFC ingress.
func (s *Sim) release(pk *Packet) { s.freePacket(pk) }

// loseToLink frees pk, lost to the failure of the link port p sends on,
// and counts it at p and in Stats.Lost and Stats.LinkLost.
func (s *Sim) loseToLink(p *port, pk *Packet) {
	p.lost++
	p.linkLost++
	s.Stats.Lost++
	s.Stats.LinkLost++
	s.freePacket(pk)
}

// dequeue takes the head of port pi's queue, which must not be empty, and
// gives back the PFC ingress bytes it held at a switch: once the ingress
// port it came through holds no more than XON, the pause sent upstream
// through that port is lifted (a resume frame, one link delay away).
func (s *Sim) dequeue(pi int32) *Packet {
	p := &s.ports[pi]
	pk := p.pop()
	if s.cfg.PFC && !p.isHost {
		in := &s.ports[pk.inPort]
		in.ingress -= int(pk.Size)
		if in.xoff && in.ingress <= s.cfg.XON {
			in.xoff = false
			s.schedule(event{at: s.now + in.delay, kind: evResume, a: in.peer, b: int32(in.gen)})
		}
	}
	return pk
}

// flush drops every packet queued at port pi, whose link has just gone
// down: a switch or NIC loses what waits for a failed port at the instant
// of the failure. Each packet counts as lost to the link and gives back
// its PFC ingress bytes (dequeue), so the port's queue and occupancy are
// zero afterwards and no upstream port stays paused for bytes that are
// gone. ECN marks already set on those packets stay counted in the
// port's marks.
func (s *Sim) flush(pi int32) {
	p := &s.ports[pi]
	for p.qLen > 0 {
		s.loseToLink(p, s.dequeue(pi))
	}
}

// kick starts serialising the head of port pi's queue if the port is free.
// A packet serialised onto a down link (only a host NIC port queues while
// its link is down: the transport sees no link state and the NIC keeps
// clocking its datagrams out) takes its serialisation time and is lost.
func (s *Sim) kick(pi int32) {
	p := &s.ports[pi]
	if p.busy || p.paused || p.qLen == 0 {
		return
	}
	pk := s.dequeue(pi)
	p.busy = true
	d := p.txTime(pk.Size)
	pk.TxStart, pk.TxEnd = s.now, s.now+d
	s.schedule(event{at: s.now + d, kind: evTxDone, a: pi})
	p.sentPkts++
	p.sentBytes += uint64(pk.Size)
	if !p.up {
		s.loseToLink(p, pk)
		return
	}
	if p.loss > 0 && s.rng.Float64() < p.loss {
		p.lost++
		s.Stats.Lost++
		s.freePacket(pk)
		return
	}
	pk.linkGen = p.gen
	s.schedule(event{at: s.now + d + p.delay, kind: evArrive, a: p.peer, pkt: pk})
}

func (s *Sim) txDone(pi int32) {
	p := &s.ports[pi]
	p.busy = false
	s.kick(pi)
	if p.isHost && !p.busy {
		s.hosts[p.owner].pump()
	}
}

// arrive handles pk arriving at the node owning port pi. A packet whose
// link went down (or down and up again) while it was being serialised or
// on the wire is lost there: kick only checks the link when serialisation
// starts, and a failure cuts what is already on the fibre.
func (s *Sim) arrive(pi int32, pk *Packet) {
	p := &s.ports[pi]
	if from := &s.ports[p.peer]; pk.linkGen != from.gen {
		s.loseToLink(from, pk)
		return
	}
	n := &s.nodes[p.owner]
	switch n.kind {
	case kindHost:
		s.Stats.Delivered++
		s.hosts[p.owner].receive(pk)
		return
	case kindLeaf:
		pk.inPort = pi
		dl := int(pk.Dst) / s.cfg.HostsPerLeaf
		if dl == int(n.index) {
			s.enqueue(n.ports[int(pk.Dst)%s.cfg.HostsPerLeaf], pk)
			return
		}
		up := n.ports[s.cfg.HostsPerLeaf:]
		s.enqueue(s.ecmp(n, up, pk, dl), pk)
	case kindSpine:
		pk.inPort = pi
		s.enqueue(n.ports[int(pk.Dst)/s.cfg.HostsPerLeaf], pk)
	}
}

// ecmp picks an uplink of leaf n for pk by hashing its 5-tuple with the
// leaf's seed. Locally down uplinks are skipped at once; spines whose link
// to the destination leaf is down are skipped once routing has reconverged.
func (s *Sim) ecmp(n *node, up []int32, pk *Packet, dstLeaf int) int32 {
	h := hash5(n.seed, pk)
	if s.failures == 0 {
		return up[h%uint64(len(up))]
	}
	usable := func(sp int) bool {
		return s.ports[up[sp]].up && !s.downKnown[s.dkIndex(int(n.plane), sp, dstLeaf)]
	}
	k := 0
	for sp := range up {
		if usable(sp) {
			k++
		}
	}
	if k == 0 {
		return up[h%uint64(len(up))]
	}
	// The (h mod k)-th usable uplink, in spine order.
	i := int(h % uint64(k))
	for sp := range up {
		if usable(sp) {
			if i == 0 {
				return up[sp]
			}
			i--
		}
	}
	panic("sim: ecmp lost count of its uplinks")
}

// hash5 mixes the UDP 5-tuple (protocol fixed to UDP) with a switch seed.
func hash5(seed uint64, pk *Packet) uint64 {
	x := seed ^ uint64(pk.Src)<<32 ^ uint64(pk.Dst) ^ uint64(pk.SrcPort)<<48 ^ uint64(pk.DstPort)<<16 ^ 17
	x ^= x >> 33
	x *= 0xff51afd7ed558ccd
	x ^= x >> 33
	x *= 0xc4ceb9fe1a85ec53
	x ^= x >> 33
	return x
}

func (s *Sim) observeRx(h *Host, pk *Packet) {
	if s.OnRx != nil {
		s.OnRx(s.now, h, pk)
	}
}

// Describe returns a one-line summary of the fabric.
func (s *Sim) Describe() string {
	c := s.cfg
	return fmt.Sprintf("%d hosts, %d plane(s) × (%d leaves, %d spines, %d hosts/leaf, oversub %.1f), %.0f Gb/s, link delay %d ns, seed %d",
		c.Hosts(), c.Planes, c.Leaves, c.Spines, c.HostsPerLeaf, c.Oversub, c.LinkRate/1e9, c.LinkDelay, c.Seed)
}
