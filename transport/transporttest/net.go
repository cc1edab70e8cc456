package transporttest

import (
	"encoding/binary"
	"fmt"
	"math/rand/v2"

	"github.com/metaroce/metaroce/internal/eventq"
	"github.com/metaroce/metaroce/transport"
	"github.com/metaroce/metaroce/transport/wire"
)

// Packet is one datagram on the scripted network.
type Packet struct {
	Src, Dst  int             // node indices
	Route     transport.Route // as the sender's core chose it
	Op        wire.Opcode
	Sequenced bool // consumes a PSN (DATA, RECV_READY, NACK, PROBE)
	ECN       transport.ECN
	Data      []byte
	Sent      transport.Time
	wireLen   int
	copy      bool // the network's duplicate of another packet
}

// pathKey names one route through the network.
type pathKey struct {
	src, dst int
	plane    uint8
	entropy  uint16
}

type pathState struct {
	delay      transport.Time
	lastArrive transport.Time
}

// NetStats counts what the network did to packets.
type NetStats struct {
	Sent       uint64 // datagrams handed to the network
	Delivered  uint64 // datagrams handed to an endpoint
	Dropped    uint64 // all drops
	SeqDropped uint64 // dropped DATA, RECV_READY and NACK packets (what the core must retransmit)
	AckDropped uint64 // dropped ACKs
	QueueDrops uint64 // drops at a full ingress queue
	Duplicated uint64
	Marked     uint64 // packets marked CE
	// Redelivered counts sequenced packets whose content (the same DATA
	// segment, RECV_READY or NACK) reached the endpoint a second time
	// although the network did not duplicate it: spurious retransmissions
	// as the receiver sees them, independent of the core's own counters.
	Redelivered uint64
	PayloadSent uint64 // DATA payload bytes handed to the network
}

// Net is the scripted network and its endpoints. It is not safe for
// concurrent use; nothing in it starts a goroutine.
type Net struct {
	cfg   NetConfig
	rng   *rand.Rand
	now   transport.Time
	nodes []*Node
	q     eventq.Queue[event]
	paths map[pathKey]*pathState
	ge    map[[2]int]bool // Gilbert-Elliott state per node pair: true = bad
	rules []Rule
	conns map[connKey]connKey // both directions of every connection made by Connect
	seen  map[contentKey]bool // content of sequenced packets delivered so far

	// Stats counts what the network did.
	Stats NetStats
	// OnPlace, if set, is called for every placement the harness copies.
	OnPlace func(node int, now transport.Time, bytes int)
	// OnArrive, if set, is called when a packet reaches an ingress queue,
	// with the queue length in bytes it found.
	OnArrive func(p *Packet, now transport.Time, queued int)
	// ExtraDelay, if set, returns a delay added to the one-way delay of a
	// packet that departs at the given time: a queue on its way that the
	// network does not model, such as one on a single direction of a
	// route. Packets of one path still arrive in order.
	ExtraDelay func(p *Packet, departs transport.Time) transport.Time
	// MemCheck, if set, is called on every endpoint during Check and every
	// 4096 steps; it returns an error when the endpoint's memory exceeds
	// its bounds (the core's tests install an accessor of its internals).
	MemCheck func(node int, ep *transport.Endpoint) error

	violations []string
	steps      int
	buf        []byte
}

// New returns an empty network.
func New(cfg NetConfig) *Net {
	cfg = cfg.withDefaults()
	return &Net{
		cfg:   cfg,
		rng:   rand.New(rand.NewPCG(cfg.Seed, 0x6d657461726f6365)),
		paths: make(map[pathKey]*pathState),
		ge:    make(map[[2]int]bool),
		conns: make(map[connKey]connKey),
		seen:  make(map[contentKey]bool),
		buf:   make([]byte, 1<<16),
	}
}

// Now returns the virtual time.
func (n *Net) Now() transport.Time { return n.now }

// Config returns the network's configuration, defaults filled in.
func (n *Net) Config() NetConfig { return n.cfg }

// Node returns node i.
func (n *Net) Node(i int) *Node { return n.nodes[i] }

// Nodes returns the number of nodes.
func (n *Net) Nodes() int { return len(n.nodes) }

// AddNode creates an endpoint with cfg and returns its node index, which is
// also the RemoteID other endpoints use for it. It panics with the
// *transport.ConfigError (wrapped, naming the node) when transport.New
// refuses cfg: a test bed's configuration is the test's own, and the panic
// fails the test at the line that made the mistake, where an endpoint
// built anyway would fail only later, its dials with ErrInvalid and its
// peers' dials to it as handshake timeouts. TryAddNode returns the error
// instead.
func (n *Net) AddNode(cfg transport.Config) int {
	i, err := n.TryAddNode(cfg)
	if err != nil {
		panic(err)
	}
	return i
}

// TryAddNode is AddNode returning transport.New's error, with no node
// added, instead of panicking.
func (n *Net) TryAddNode(cfg transport.Config) (int, error) {
	i := len(n.nodes)
	rng := rand.New(rand.NewPCG(n.cfg.Seed^uint64(i+1)*0x9e3779b97f4a7c15, uint64(i)))
	ep, err := transport.New(cfg, rng)
	if err != nil {
		return 0, fmt.Errorf("transporttest: node %d: %w", i, err)
	}
	nd := &Node{
		Index:    i,
		EP:       ep,
		net:      n,
		sendBufs: make(map[uint64][]byte),
		recvBufs: make(map[uint64]*RecvBuffer),
		flows:    make(map[flowKey]*flowLog),
	}
	n.nodes = append(n.nodes, nd)
	return i, nil
}

// AddRule installs a scripted fault.
func (n *Net) AddRule(r Rule) { n.rules = append(n.rules, r) }

// Blackhole drops every packet from node src on plane/entropy from time at.
func (n *Net) Blackhole(src, plane, entropy int, at transport.Time) {
	r := AnyRule(at)
	r.Src, r.Plane, r.Entropy = src, plane, entropy
	n.AddRule(r)
}

// Isolate drops every packet to and from node i from time at (a dead peer).
func (n *Net) Isolate(i int, at transport.Time) {
	r := AnyRule(at)
	r.Src = i
	n.AddRule(r)
	r = AnyRule(at)
	r.Dst = i
	n.AddRule(r)
}

// violate records a broken invariant; Check reports them all.
func (n *Net) violate(format string, args ...any) {
	if len(n.violations) < 100 {
		n.violations = append(n.violations, fmt.Sprintf("t=%v: ", n.now)+fmt.Sprintf(format, args...))
	}
}

func (n *Net) wireTime(bytes int) transport.Time {
	if n.cfg.LinkRate == 0 {
		return 0
	}
	return transport.Time(uint64(bytes) * uint64(transport.Second) / n.cfg.LinkRate)
}

func (n *Net) ingressTime(bytes int) transport.Time {
	if n.cfg.IngressRate == 0 {
		return n.wireTime(bytes)
	}
	return transport.Time(uint64(bytes) * uint64(transport.Second) / n.cfg.IngressRate)
}

// launch puts a packet the node just produced on the network: faults and
// random loss first, then duplication, then the path's delay to the
// receiver's ingress queue.
func (n *Net) launch(p *Packet, departs transport.Time) {
	n.Stats.Sent++
	if p.Op == wire.OpData {
		hdr := wire.DataHeaderLen
		if len(p.Data) >= 4 && wire.Flags(binary.BigEndian.Uint16(p.Data[2:]))&wire.FlagPiggyAck != 0 {
			hdr += wire.PiggyLen // a piggybacked acknowledgement is no payload
		}
		n.Stats.PayloadSent += uint64(len(p.Data) - hdr)
	}
	if n.lose(p) {
		n.dropped(p)
		return
	}
	copies := 1
	if n.cfg.Dup > 0 && n.rng.Float64() < n.cfg.Dup {
		copies = 2
		n.Stats.Duplicated++
	}
	k := pathKey{p.Src, p.Dst, p.Route.Plane, p.Route.Entropy}
	ps := n.paths[k]
	if ps == nil {
		ps = &pathState{delay: n.cfg.BaseDelay}
		if n.cfg.PathSpread > 0 {
			ps.delay += transport.Time(n.rng.Int64N(int64(n.cfg.PathSpread)))
		}
		n.paths[k] = ps
	}
	for c := 0; c < copies; c++ {
		at := departs + ps.delay
		if n.ExtraDelay != nil {
			at += n.ExtraDelay(p, departs)
		}
		if n.cfg.Jitter > 0 {
			at += transport.Time(n.rng.Int64N(int64(n.cfg.Jitter)))
		}
		if !n.cfg.ReorderInPath && at < ps.lastArrive {
			at = ps.lastArrive // FIFO within a path: jitter never overtakes
		}
		ps.lastArrive = max(ps.lastArrive, at)
		q := p
		if c > 0 {
			cp := *p
			cp.Data = append([]byte(nil), p.Data...)
			cp.copy = true
			q = &cp
		}
		n.q.Push(int64(at), event{at: at, kind: evArrive, pkt: q})
	}
}

// lose applies scripted faults, random loss and bursty loss to p.
func (n *Net) lose(p *Packet) bool {
	for i := range n.rules {
		if n.rules[i].match(p, n.now) {
			return true
		}
	}
	if n.cfg.LossOn != nil && !n.cfg.LossOn(p) {
		return false
	}
	if n.cfg.Loss > 0 && n.rng.Float64() < n.cfg.Loss {
		return true
	}
	if g := n.cfg.Burst; g.on() {
		k := [2]int{p.Src, p.Dst}
		bad := n.ge[k]
		if bad {
			bad = n.rng.Float64() >= g.PBadGood
		} else {
			bad = n.rng.Float64() < g.PGoodBad
		}
		n.ge[k] = bad
		pl := g.LossGood
		if bad {
			pl = g.LossBad
		}
		if pl > 0 && n.rng.Float64() < pl {
			return true
		}
	}
	return false
}

func (n *Net) dropped(p *Packet) {
	n.Stats.Dropped++
	switch {
	case p.Op == wire.OpAck:
		n.Stats.AckDropped++
	case p.Sequenced && p.Op != wire.OpProbe:
		n.Stats.SeqDropped++
	}
}

// arrive puts p into its receiver's ingress FIFO: marked CE above the
// marking threshold, dropped above the queue limit, serialised at the link
// rate.
func (n *Net) arrive(p *Packet) {
	nd := n.nodes[p.Dst]
	if n.OnArrive != nil {
		n.OnArrive(p, n.now, nd.ingQueued)
	}
	if n.cfg.QueueLimit > 0 && nd.ingQueued+p.wireLen > n.cfg.QueueLimit {
		n.Stats.QueueDrops++
		n.dropped(p)
		return
	}
	if n.cfg.MarkThreshold > 0 && nd.ingQueued > n.cfg.MarkThreshold && p.ECN != transport.NotECT {
		p.ECN = transport.CE
		n.Stats.Marked++
	}
	nd.ingQueued += p.wireLen
	nd.ingBusy = max(nd.ingBusy, n.now) + n.ingressTime(p.wireLen)
	n.q.Push(int64(nd.ingBusy), event{at: nd.ingBusy, kind: evDeliver, pkt: p})
}

// deliver hands p to its endpoint and copies what the core places.
func (n *Net) deliver(p *Packet) {
	nd := n.nodes[p.Dst]
	nd.ingQueued -= p.wireLen
	n.Stats.Delivered++
	if k, ok := contentOf(p); ok && !p.copy {
		if n.seen[k] {
			n.Stats.Redelivered++
		}
		n.seen[k] = true
	}
	pl := nd.EP.HandleDatagram(n.now, transport.Datagram{
		From: transport.RemoteID(p.Src), Plane: p.Route.Plane, ECN: p.ECN, Data: p.Data})
	if pl.OK {
		nd.place(pl)
	}
}

// next returns the time of the next thing to do.
func (n *Net) next() transport.Time {
	t := transport.Never
	if at, ok := n.q.Next(); ok {
		t = transport.Time(at)
	}
	for _, nd := range n.nodes {
		nt := nd.EP.NextTimeout()
		if nt <= n.now {
			// Due now after HandleTimeout ran: the endpoint wants to
			// transmit (an ACK, a paced packet, a probe), which waits for
			// the egress link.
			nt = max(nt, nd.txFree)
		}
		t = min(t, nt)
		if nd.txMore {
			t = min(t, max(nd.txFree, n.now))
		}
	}
	return t
}

// step services every node, then advances time to the next event (not
// beyond horizon) and runs what is due. It reports false when nothing is due
// up to horizon.
func (n *Net) step(horizon transport.Time) bool {
	for _, nd := range n.nodes {
		nd.service()
	}
	t := n.next()
	if t == transport.Never || t > horizon {
		if horizon != transport.Never && horizon > n.now {
			n.now = horizon
		}
		return false
	}
	if t > n.now {
		n.now = t
	}
	for n.q.Len() > 0 {
		if at, _ := n.q.Next(); transport.Time(at) > n.now {
			break
		}
		_, e := n.q.Pop()
		switch e.kind {
		case evArrive:
			n.arrive(e.pkt)
		case evDeliver:
			n.deliver(e.pkt)
		}
	}
	for _, nd := range n.nodes {
		if nd.EP.NextTimeout() <= n.now {
			nd.EP.HandleTimeout(n.now)
		}
		nd.collect()
	}
	n.steps++
	if n.MemCheck != nil && n.steps%4096 == 0 {
		n.memCheck()
	}
	return true
}

func (n *Net) memCheck() {
	for _, nd := range n.nodes {
		if err := n.MemCheck(nd.Index, nd.EP); err != nil {
			n.violate("node %d: %v", nd.Index, err)
		}
	}
}

// RunUntil runs the network until cond holds, failing when virtual time
// passes limit, when nothing is left to do, or when MaxSteps steps pass
// (a core that keeps scheduling work at one instant).
func (n *Net) RunUntil(cond func() bool, limit transport.Time) error {
	start := n.steps
	for !cond() {
		if n.now > limit {
			return fmt.Errorf("transporttest: condition not met by %v (limit %v)", n.now, limit)
		}
		if !n.step(limit + 1) {
			if cond() {
				return nil
			}
			if n.now > limit || n.next() == transport.Never {
				if n.now > limit {
					return fmt.Errorf("transporttest: condition not met by %v", limit)
				}
				return fmt.Errorf("transporttest: network idle at %v with the condition unmet", n.now)
			}
		}
		if n.steps-start > n.cfg.MaxSteps {
			return fmt.Errorf("transporttest: %d steps without meeting the condition (at %v): the core keeps scheduling work%s", n.cfg.MaxSteps, n.now, n.busy())
		}
	}
	return nil
}

// RunFor runs the network for d of virtual time.
func (n *Net) RunFor(d transport.Time) error {
	end := n.now + d
	start := n.steps
	for n.step(end) {
		if n.steps-start > n.cfg.MaxSteps {
			return fmt.Errorf("transporttest: %d steps in %v at %v: the core keeps scheduling work%s", n.cfg.MaxSteps, d, n.now, n.busy())
		}
	}
	return nil
}

// busy names the nodes whose timers or transmit queues keep time from
// advancing, for the error of a run that made no progress.
func (n *Net) busy() string {
	s := ""
	for _, nd := range n.nodes {
		if t := nd.EP.NextTimeout(); t <= n.now && nd.txFree <= n.now {
			s += fmt.Sprintf("; node %d NextTimeout %v does not advance", nd.Index, t)
		}
		if nd.txMore && nd.txFree <= n.now {
			s += fmt.Sprintf("; node %d keeps transmitting", nd.Index)
		}
	}
	return s
}

// contentKey names what a sequenced packet carries, independent of the PSN
// it was sent with.
type contentKey struct {
	dst, src  int
	op        wire.Opcode
	conn      uint32
	flow, msg uint32
	index     uint8
	off       uint64
	reason    wire.NackReason
}

// contentOf returns the content key of a DATA, RECV_READY or NACK packet.
func contentOf(p *Packet) (contentKey, bool) {
	k := contentKey{dst: p.Dst, src: p.Src, op: p.Op}
	switch p.Op {
	case wire.OpData:
		var d wire.Data
		if _, err := wire.ParseData(&d, p.Data); err != nil {
			return k, false
		}
		k.conn, k.flow, k.msg, k.index, k.off = d.DstConn, d.Flow, d.Msg, d.Index, d.Offset
	case wire.OpRecvReady:
		var r wire.RecvReady
		if _, err := wire.ParseRecvReady(&r, p.Data); err != nil {
			return k, false
		}
		k.conn, k.flow, k.msg = r.DstConn, r.Flow, r.Msg
	case wire.OpNack:
		var r wire.Nack
		if _, err := wire.ParseNack(&r, p.Data); err != nil || r.Reason == wire.NackUnknownConn {
			return k, false
		}
		k.conn, k.flow, k.msg, k.index, k.reason, k.off = r.DstConn, r.Flow, r.Msg, r.Index, r.Reason, r.Value
	default:
		return k, false
	}
	return k, true
}

// Inject delivers a datagram to node dst at once, as if it came from node
// src on plane with ecn, bypassing the network; placements are checked and
// copied like any other. Tests use it to feed forged packets.
func (n *Net) Inject(dst, src int, plane uint8, ecn transport.ECN, data []byte) {
	p := &Packet{Src: src, Dst: dst, Route: transport.Route{Remote: transport.RemoteID(dst), Plane: plane},
		Op: wire.PeekOpcode(data), ECN: ecn, Data: data, Sent: n.now}
	p.Sequenced = p.Op.Sequenced()
	n.nodes[dst].ingQueued += p.wireLen
	n.deliver(p)
}
