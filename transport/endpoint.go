package transport

import (
	"math/rand/v2"

	"github.com/metaroce/metaroce/transport/cc"
	"github.com/metaroce/metaroce/transport/wire"
)

const dataHdr = wire.DataHeaderLen

// DropReason classifies a received datagram the endpoint discarded.
type DropReason int

const (
	DropMalformed    DropReason = iota // failed to parse
	DropUnknownConn                    // DstConn names no connection
	DropBadToken                       // token does not match the connection
	DropDuplicate                      // PSN already received
	DropBeyondWindow                   // not used: PSNs beyond the window slide it
	DropNotReady                       // DATA for a receive not posted (NACKed)
	DropBadPlacement                   // DATA outside the posted buffer or inconsistent
	DropNotListening                   // HELLO to an endpoint that does not accept
	DropConnLimit                      // HELLO beyond MaxConns
	DropStale                          // for a message already completed
	numDropReasons
)

var dropNames = [...]string{"malformed", "unknown-conn", "bad-token", "duplicate", "beyond-window",
	"not-ready", "bad-placement", "not-listening", "conn-limit", "stale"}

func (r DropReason) String() string {
	if r >= 0 && int(r) < len(dropNames) {
		return dropNames[r]
	}
	return "?"
}

// Counters are endpoint-wide counts of discarded input, by reason. Every
// datagram the endpoint does not act on is counted exactly once here.
type Counters struct {
	Dropped [numDropReasons]uint64
}

// Total returns the number of discarded datagrams.
func (c *Counters) Total() uint64 {
	var n uint64
	for _, v := range c.Dropped {
		n += v
	}
	return n
}

// Endpoint is one MetaRoCE endpoint: the set of connections of one local
// address set (one address per plane). It is not safe for concurrent use:
// exactly one driver goroutine calls it.
type Endpoint struct {
	cfg      Config
	rng      *rand.Rand
	conns    map[ConnID]*Conn
	order    []*Conn // connections in creation order, for round-robin service
	rr       int
	byPeer   map[uint64]*Conn // accepted connections by the initiator's token
	nextID   ConnID
	events   []Event
	evHead   int
	ctrl     []ctrlOut // unsequenced replies not tied to a live connection
	counters Counters

	// Rate-hint state (docs/spec.md §3.5).
	activeAt    Time
	activeCount int

	// Unknown-connection NACK budget: at most one per 100 µs.
	nackNext Time

	// Scratch parse targets, reused so that parsing allocates nothing.
	hdr   wire.Header
	data  wire.Data
	ack   wire.Ack
	rr2   wire.RecvReady
	nack  wire.Nack
	hello wire.Hello
	probe wire.Probe
	close wire.Close
}

// ctrlOut is an unsequenced packet queued at endpoint level.
type ctrlOut struct {
	route   Route
	isClose bool
	nack    wire.Nack
	close   wire.Close
}

// NewEndpoint returns an endpoint with the given configuration. rng drives
// every random choice (connection ids and tokens, entropy picks); pass a
// seeded source for reproducible runs and a cryptographically seeded one in
// production, since tokens are the only proof a packet comes from the peer.
func NewEndpoint(cfg Config, rng *rand.Rand) *Endpoint {
	cfg = cfg.withDefaults()
	if len(cfg.Addr) > wire.MaxAddrBlob {
		cfg.Addr = cfg.Addr[:wire.MaxAddrBlob]
	}
	return &Endpoint{
		cfg:    cfg,
		rng:    rng,
		conns:  make(map[ConnID]*Conn),
		byPeer: make(map[uint64]*Conn),
	}
}

// Config returns the endpoint's effective configuration (defaults filled in).
func (e *Endpoint) Config() Config { return e.cfg }

// Counters returns the endpoint-wide drop counters.
func (e *Endpoint) Counters() Counters { return e.counters }

// NumConns returns the number of live connections (including handshaking).
func (e *Endpoint) NumConns() int { return len(e.conns) }

func (e *Endpoint) drop(r DropReason) { e.counters.Dropped[r]++ }

// newConn allocates a connection with a fresh id and token.
func (e *Endpoint) newConn(now Time, remote RemoteID) (*Conn, error) {
	if len(e.conns) >= e.cfg.MaxConns {
		return nil, ErrLimit
	}
	id := e.nextID
	for {
		id = ConnID(e.rng.Uint32())
		if id != 0 && e.conns[id] == nil {
			break
		}
	}
	tok := e.rng.Uint64()
	for tok == 0 {
		tok = e.rng.Uint64()
	}
	c := &Conn{
		ep:       e,
		id:       id,
		remote:   remote,
		localTok: tok,
		flows:    make(map[uint32]*flow),
		created:  now,
		lastRecv: now,
		lastSent: now,
	}
	ccfg := e.cfg.CC
	c.cc = cc.NewAIMD(ccfg)
	e.conns[id] = c
	e.order = append(e.order, c)
	return c, nil
}

// removeConn forgets c; its events were already queued.
func (e *Endpoint) removeConn(c *Conn) {
	delete(e.conns, c.id)
	if c.accepted {
		if e.byPeer[c.peerTok] == c {
			delete(e.byPeer, c.peerTok)
		}
	}
	for i, o := range e.order {
		if o == c {
			copy(e.order[i:], e.order[i+1:])
			e.order[len(e.order)-1] = nil
			e.order = e.order[:len(e.order)-1]
			break
		}
	}
	if e.rr >= len(e.order) {
		e.rr = 0
	}
}

func (e *Endpoint) emit(ev Event) { e.events = append(e.events, ev) }

// PollEvent returns the next pending event.
func (e *Endpoint) PollEvent() (Event, bool) {
	if e.evHead >= len(e.events) {
		if e.evHead > 0 {
			clear(e.events)
			e.events = e.events[:0]
			e.evHead = 0
		}
		return Event{}, false
	}
	ev := e.events[e.evHead]
	e.events[e.evHead] = Event{}
	e.evHead++
	return ev, true
}

// Dial starts a connection to remote. The result arrives as EvConnected, or
// EvClosed with ErrHandshakeTimeout.
func (e *Endpoint) Dial(now Time, remote RemoteID) (ConnID, error) {
	c, err := e.newConn(now, remote)
	if err != nil {
		return 0, err
	}
	c.state = stateDialing
	c.setupPaths(now)
	c.helloDue = now
	c.deadline = now + e.cfg.HandshakeTimeout
	return c.id, nil
}

// Send queues a message of length bytes on flow of connection id. Cookie
// names the driver's send buffer; the message is matched to the peer's
// receive groups in posting order, its tag selecting the buffer within a
// group (docs/spec.md §3.4).
func (e *Endpoint) Send(now Time, id ConnID, flow uint32, length uint64, tag uint32, cookie uint64) error {
	c := e.conns[id]
	if c == nil {
		return &ConnError{Conn: id, Err: ErrUnknownConn}
	}
	return c.send(now, flow, length, tag, cookie)
}

// PostRecv posts a grouped receive of 1..8 buffers on flow of connection id.
func (e *Endpoint) PostRecv(now Time, id ConnID, flow uint32, bufs []RecvBuf) error {
	c := e.conns[id]
	if c == nil {
		return &ConnError{Conn: id, Err: ErrUnknownConn}
	}
	return c.postRecv(now, flow, bufs)
}

// Close closes connection id: outstanding sends and receives fail with
// ErrClosed and the peer is told. EvClosed follows.
func (e *Endpoint) Close(now Time, id ConnID) {
	if c := e.conns[id]; c != nil {
		c.closeLocal(now, wire.CloseNormal)
	}
}

// Shutdown closes every connection.
func (e *Endpoint) Shutdown(now Time) {
	for _, c := range append([]*Conn(nil), e.order...) {
		c.closeLocal(now, wire.CloseShutdown)
	}
}

// activeSenders returns how many connections are expected to send to us:
// those that sent DATA within ActiveWindow and those for which receives are
// posted and not complete (docs/spec.md §3.5). It is recomputed at most
// every ActiveWindow/4, and at once after a connection became active
// (markActive), so that the first hints of an incast already divide the
// inbound rate among all its senders.
func (e *Endpoint) activeSenders(now Time) int {
	if now-e.activeAt < e.cfg.ActiveWindow/4 && e.activeCount > 0 {
		return e.activeCount
	}
	n := 0
	for _, c := range e.order {
		if c.lastData != 0 && now-c.lastData < e.cfg.ActiveWindow || c.expectsData() {
			n++
		}
	}
	e.activeAt, e.activeCount = now, max(n, 1)
	return e.activeCount
}

// markActive invalidates the cached active-sender count: c just became
// active (its first DATA after a quiet ActiveWindow, or a receive posted).
// Before this fix the count lagged by up to ActiveWindow/4 = 250 µs, so an
// incast's first hints offered the whole inbound rate to every sender.
func (e *Endpoint) markActive() { e.activeAt = -Never }

// expectsData reports whether receives are posted on c and not complete:
// the receiver knows these senders will send, before their DATA arrives.
func (c *Conn) expectsData() bool {
	for _, f := range c.flows {
		if len(f.recvs) > 0 {
			return true
		}
	}
	return false
}

// rateHint is the fair share of the inbound capacity for one active sender,
// in kbit/s as carried in ACKs; 0 when the endpoint gives no hints.
func (e *Endpoint) rateHint(now Time) uint32 {
	if e.cfg.InboundRate == 0 {
		return 0
	}
	share := e.cfg.InboundRate / uint64(e.activeSenders(now))
	k := share * 8 / 1000
	if k == 0 {
		k = 1
	}
	if k > 0xffffffff {
		k = 0xffffffff
	}
	return uint32(k)
}
