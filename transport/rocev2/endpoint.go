package rocev2

import (
	"fmt"
	"math"
	"math/rand/v2"

	"github.com/metaroce/metaroce/internal/eventq"
	"github.com/metaroce/metaroce/transport/cc"
)

// Endpoint is the RoCEv2 NIC model of one host: its connections, each made
// of QPsPerConn queue pairs. It is sans-I/O and not safe for concurrent use.
type Endpoint struct {
	cfg      Config
	rng      *rand.Rand
	conns    map[uint32]*conn
	accepted map[[2]uint32]uint32 // (remote, peer conn) → local conn
	nextID   uint32
	events   []Event
	evHead   int
	ctl      []ctlItem
	ctlHead  int
	active   []*qp
	rr       int
	timers   eventq.Queue[timer]
	stats    Stats
}

type ctlItem struct {
	c   *conn
	q   *qp
	op  Opcode
	psn uint32
}

type conn struct {
	id, peer uint32
	remote   uint32
	dialer   bool
	ready    bool
	closed   bool
	tries    int
	qps      []*qp
	// cts is the queue pair of the CTSs (Config.Rendezvous; nil without):
	// its requester half sends this end's CTSs, its responder half takes
	// the peer's. It is numbered len(qps), after the data QPs, and has its
	// own PSN space, so a CTS waits for no DATA of this end (see PostRecv).
	cts   *qp
	flows map[uint32]*flow
	msgs  []*sendMsg // sends not yet complete, in order
}

type flow struct {
	sendSeq  uint32
	recvBase uint32 // message number of recvs[0]
	recvs    []*recvBuf
	// With Config.Rendezvous: the peer has announced receives for the
	// messages numbered below cleared; held are the sends at and after
	// it, in order, not yet striped over the QPs.
	cleared uint32
	held    []*sendMsg
}

type recvBuf struct {
	cap, got, msgLen uint64
	tag              uint32
	cookie           uint64
	seen, done       bool
	err              error
}

type sendMsg struct {
	flow    uint32
	seq     uint32 // message number within the flow
	cookie  uint64
	length  uint64
	tag     uint32
	stripes int
	done    bool
	// cts marks the announcement of receive seq of flow (OpCTS): it
	// travels like a message but completes no send.
	cts bool
}

type stripe struct {
	msg      *sendMsg
	off, end uint64
}

type pktDesc struct {
	msg  *sendMsg
	off  uint64
	n    uint32
	last bool
}

// qp is one queue pair: a requester (send) half and a responder (receive)
// half sharing the QP number, plane and source port.
type qp struct {
	c       *conn
	idx     uint16
	plane   uint8
	entropy uint16
	// requester; PSNs are kept unwrapped, the wire carries 24 bits
	una, nxt, max uint32
	descs         []pktDesc // PSNs una..max-1
	descHead      int
	pending       []stripe
	pendHead      int
	rate          *cc.DCQCN
	nextSend      int64
	lastProgress  int64
	retries       int
	rtoArmed      bool
	paceArmed     bool
	inActive      bool
	// responder
	epsn     uint32
	nakSent  bool
	unacked  int
	ackQueue bool
	cnpQueue bool
	lastCNP  int64
}

// NewEndpoint returns an endpoint; rng chooses source ports.
func NewEndpoint(cfg Config, rng *rand.Rand) (*Endpoint, error) {
	if err := cfg.fill(); err != nil {
		return nil, err
	}
	return &Endpoint{cfg: cfg, rng: rng, conns: map[uint32]*conn{}, accepted: map[[2]uint32]uint32{}}, nil
}

// Stats returns the endpoint counters.
func (e *Endpoint) Stats() Stats { return e.stats }

// Config returns the filled-in configuration.
func (e *Endpoint) Config() Config { return e.cfg }

func (e *Endpoint) newConn(remote uint32, dialer bool) *conn {
	e.nextID++
	c := &conn{id: e.nextID, remote: remote, dialer: dialer, flows: map[uint32]*flow{}}
	for i := 0; i < e.cfg.QPsPerConn; i++ {
		q := &qp{c: c, idx: uint16(i), plane: uint8(i % e.cfg.Planes),
			entropy: uint16(e.rng.IntN(e.cfg.EntropiesPerPlane)), lastCNP: math.MinInt64 / 2}
		if e.cfg.DCQCN {
			q.rate = cc.NewDCQCN(e.cfg.CC)
		}
		c.qps = append(c.qps, q)
	}
	if e.cfg.Rendezvous {
		// The CTS QP leaves by QP 0's plane and source port, the path the
		// CTSs took when they were sequenced on QP 0: a port of its own
		// would draw from rng and re-roll the source port of every later
		// connection, burying the queueing change under path changes
		// (a CTS is 64 bytes; which path it takes matters little).
		q0 := c.qps[0]
		c.cts = &qp{c: c, idx: uint16(len(c.qps)), plane: q0.plane, entropy: q0.entropy, lastCNP: math.MinInt64 / 2}
		if e.cfg.DCQCN {
			c.cts.rate = cc.NewDCQCN(e.cfg.CC)
		}
	}
	e.conns[c.id] = c
	return c
}

// qp returns the queue pair numbered idx on c (a data QP, or the CTS QP
// when c has one), nil if there is none.
func (c *conn) qp(idx uint16) *qp {
	if int(idx) < len(c.qps) {
		return c.qps[idx]
	}
	if c.cts != nil && idx == c.cts.idx {
		return c.cts
	}
	return nil
}

// Dial opens a connection to remote; EvConnected (or EvClosed with
// ErrHandshake) follows.
func (e *Endpoint) Dial(now int64, remote uint32) (uint32, error) {
	if len(e.conns) >= e.cfg.MaxConns {
		return 0, fmt.Errorf("%w: %d connections", ErrInvalid, len(e.conns))
	}
	c := e.newConn(remote, true)
	c.tries = 1
	e.pushCtl(ctlItem{c: c, op: OpConnReq})
	e.arm(timer{at: now + e.cfg.HandshakeRetry, c: c, kind: tmHandshake})
	return c.id, nil
}

// Close drops a connection at once; EvClosed follows. Outstanding work
// completes with ErrClosed.
func (e *Endpoint) Close(now int64, id uint32) {
	if c := e.conns[id]; c != nil {
		e.fail(c, nil)
	}
}

func (e *Endpoint) flow(c *conn, id uint32) *flow {
	f := c.flows[id]
	if f == nil {
		f = &flow{}
		c.flows[id] = f
	}
	return f
}

// Send queues a message of length bytes on flow; it is striped over the
// connection's QPs in MTU-aligned pieces. EvSendDone with cookie follows.
func (e *Endpoint) Send(now int64, id, flowID uint32, length uint64, tag uint32, cookie uint64) error {
	c := e.conns[id]
	if c == nil {
		return fmt.Errorf("%w: %d", ErrUnknownConn, id)
	}
	if length > 1<<48 {
		return fmt.Errorf("%w: message of %d bytes", ErrInvalid, length)
	}
	f := e.flow(c, flowID)
	m := &sendMsg{flow: flowID, seq: f.sendSeq, cookie: cookie, length: length, tag: tag}
	f.sendSeq++
	c.msgs = append(c.msgs, m)
	if e.cfg.Rendezvous && int32(m.seq-f.cleared) >= 0 {
		f.held = append(f.held, m)
		return nil
	}
	e.stripe(c, m)
	return nil
}

// stripe queues message m on the QPs of c in MTU-aligned contiguous
// pieces, one per QP.
func (e *Endpoint) stripe(c *conn, m *sendMsg) {
	mtu := uint64(e.cfg.MTU)
	q := uint64(len(c.qps))
	per := (m.length + q - 1) / q
	per = (per + mtu - 1) / mtu * mtu
	for i := uint64(0); i < q; i++ {
		off := i * per
		if off >= m.length && i > 0 {
			break
		}
		end := min(off+per, m.length)
		m.stripes++
		qq := c.qps[i]
		qq.pending = append(qq.pending, stripe{msg: m, off: off, end: end})
		e.activate(qq)
	}
}

// onCTS records the peer's announcement of receive msg of flowID (a CTS)
// and starts the held sends it allows. CTSs come in order on the CTS QP,
// so each one clears the next message.
func (e *Endpoint) onCTS(c *conn, flowID, msg uint32) {
	f := e.flow(c, flowID)
	if int32(msg+1-f.cleared) > 0 {
		f.cleared = msg + 1
	}
	for len(f.held) > 0 && int32(f.held[0].seq-f.cleared) < 0 {
		e.stripe(c, f.held[0])
		f.held[0] = nil
		f.held = f.held[1:]
	}
}

// PostRecv posts one receive buffer on flow; messages of the flow fill
// posted buffers in posting order (RC Send semantics). EvRecvDone follows.
func (e *Endpoint) PostRecv(now int64, id, flowID uint32, capacity uint64, tag uint32, cookie uint64) error {
	c := e.conns[id]
	if c == nil {
		return fmt.Errorf("%w: %d", ErrUnknownConn, id)
	}
	f := e.flow(c, flowID)
	msg := f.recvBase + uint32(len(f.recvs))
	f.recvs = append(f.recvs, &recvBuf{cap: capacity, tag: tag, cookie: cookie})
	if e.cfg.Rendezvous {
		// NCCL writes the CTS from the receive side of the connection (its
		// recv comm's QP), a QP that carries none of this host's own sends
		// to the peer; the NIC arbitrates between QPs. Queued on a data QP
		// it waited behind every byte this end was sending the peer (in
		// the simulator, a 4 KiB receive posted while this end sent 4 MiB
		// to the peer filled 101 µs after the post instead of 2.3 µs). On
		// the CTS QP it waits for its round-robin turn only, and stays
		// sequenced: a lost CTS is resent by NAK or timeout.
		m := &sendMsg{flow: flowID, seq: msg, length: CTSLen, stripes: 1, cts: true}
		q := c.cts
		q.pending = append(q.pending, stripe{msg: m, end: CTSLen})
		e.activate(q)
		e.stats.CTSSent++
	}
	return nil
}

// PollEvent returns the next event.
func (e *Endpoint) PollEvent() (Event, bool) {
	if e.evHead == len(e.events) {
		e.events, e.evHead = e.events[:0], 0
		return Event{}, false
	}
	ev := e.events[e.evHead]
	e.events[e.evHead] = Event{}
	e.evHead++
	return ev, true
}

func (e *Endpoint) emit(ev Event) { e.events = append(e.events, ev) }

func (e *Endpoint) pushCtl(it ctlItem) { e.ctl = append(e.ctl, it) }

func (e *Endpoint) activate(q *qp) {
	if !q.inActive {
		q.inActive = true
		e.active = append(e.active, q)
	}
}

func (q *qp) hasData() bool { return q.nxt != q.max || q.pendHead < len(q.pending) }

// NextTimeout is the earliest time HandleTimeout has work (math.MaxInt64: none).
func (e *Endpoint) NextTimeout() int64 {
	if e.timers.Len() == 0 {
		return math.MaxInt64
	}
	at, _ := e.timers.Next()
	return at
}

// HandleTimeout runs the timers due at now.
func (e *Endpoint) HandleTimeout(now int64) {
	for e.timers.Len() > 0 {
		if at, _ := e.timers.Next(); at > now {
			break
		}
		_, t := e.timers.Pop()
		switch t.kind {
		case tmHandshake:
			c := t.c
			if c.closed || c.ready {
				continue
			}
			if c.tries >= e.cfg.HandshakeTries {
				e.fail(c, fmt.Errorf("%w: peer %d after %d tries", ErrHandshake, c.remote, c.tries))
				continue
			}
			c.tries++
			e.pushCtl(ctlItem{c: c, op: OpConnReq})
			e.arm(timer{at: now + e.cfg.HandshakeRetry, c: c, kind: tmHandshake})
		case tmPace:
			t.q.paceArmed = false
		case tmRTO:
			e.rto(now, t.q)
		}
	}
}

func (e *Endpoint) rto(now int64, q *qp) {
	q.rtoArmed = false
	if q.c.closed || q.una == q.max {
		return
	}
	rto := e.cfg.RTO()
	if now-q.lastProgress < rto {
		e.armRTO(q, q.lastProgress+rto)
		return
	}
	e.stats.Timeouts++
	q.retries++
	if q.retries > e.cfg.RetryLimit {
		e.fail(q.c, fmt.Errorf("%w: QP %d to peer %d stuck at PSN %d after %d timeouts of %d ns",
			ErrRetryExceeded, q.idx, q.c.remote, q.una&psnMask, q.retries-1, rto))
		return
	}
	q.nxt = q.una
	q.lastProgress = now
	e.activate(q)
	e.armRTO(q, now+rto)
}

func (e *Endpoint) armRTO(q *qp, at int64) {
	if !q.rtoArmed {
		q.rtoArmed = true
		e.arm(timer{at: at, q: q, kind: tmRTO})
	}
}

// fail closes c with err (nil: orderly local close) and completes its
// outstanding work.
func (e *Endpoint) fail(c *conn, err error) {
	if c.closed {
		return
	}
	c.closed = true
	delete(e.conns, c.id)
	werr := err
	if werr == nil {
		werr = ErrClosed
	}
	for _, m := range c.msgs {
		if !m.done {
			m.done = true
			e.emit(Event{Kind: EvSendDone, Conn: c.id, Remote: c.remote, Flow: m.flow, Cookie: m.cookie, Err: werr})
		}
	}
	ids := make([]uint32, 0, len(c.flows))
	for id := range c.flows {
		ids = append(ids, id)
	}
	sortU32(ids)
	for _, id := range ids {
		for _, r := range c.flows[id].recvs {
			e.emit(Event{Kind: EvRecvDone, Conn: c.id, Remote: c.remote, Flow: id, Cookie: r.cookie, Err: werr})
		}
	}
	e.emit(Event{Kind: EvClosed, Conn: c.id, Remote: c.remote, Err: err})
}

func sortU32(a []uint32) {
	for i := 1; i < len(a); i++ {
		for j := i; j > 0 && a[j] < a[j-1]; j-- {
			a[j], a[j-1] = a[j-1], a[j]
		}
	}
}
