package transport

import (
	"fmt"
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
	DropDuplicate                      // PSN, segment or announced receive group already received
	DropNotReady                       // DATA for a receive not posted (NACKed)
	DropBadPlacement                   // DATA outside the posted buffer or inconsistent
	DropNotListening                   // HELLO to an endpoint that does not accept (Listen unset, or its Config invalid)
	DropConnLimit                      // HELLO beyond MaxConns
	DropStale                          // for a message or receive group already completed
	// DropClosing: DATA that arrived after Close, for a message not
	// already complete. It is neither placed nor acknowledged, so that the
	// peer's send fails instead of completing (docs/spec.md §3.3).
	DropClosing
	// DropPeerLimit: a RECV_READY that would take this side beyond
	// MaxFlowsPerConn or MaxPendingRecvs. Its path acknowledgement has
	// already covered it, so dropping it alone would stall the flow for
	// ever: the connection fails instead (docs/spec.md §3.4).
	DropPeerLimit
	// DropAborted: DATA of an aborted flow, for a message that had not
	// landed when the abort came. Neither placed nor acknowledged, so
	// that the peer's send fails on the NACK FLOW_ABORTED instead of
	// completing (docs/spec.md §3.4).
	DropAborted
	numDropReasons
)

var dropNames = [numDropReasons]string{"malformed", "unknown-conn", "bad-token", "duplicate",
	"not-ready", "bad-placement", "not-listening", "conn-limit", "stale", "closing", "peer-limit", "aborted"}

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
	cfg Config
	// cfgErr is what Config.Validate said of the configuration given to
	// NewEndpoint: non-nil, the endpoint neither dials nor accepts.
	cfgErr   error
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
	// byPeerID indexes the established connections by the peer's
	// connection id and token, which a NACK UNKNOWN_CONN echoes
	// (onUnknownConnNack): such a NACK needs no token of ours, so finding
	// its connection must not cost a scan of every connection.
	byPeerID map[peerID]*Conn

	// Timers (timers.go): the deadline heap, the connections touched
	// since it was last brought up to date, and scratch for the expired.
	tq         timerq
	dirty      []*Conn
	dueScratch []*Conn

	// Rate-hint state (docs/spec.md §3.5).
	activeUntil Time // the cached count holds until then
	activeCount int
	activeData  int  // of activeCount, those counted for DATA within the window
	activeStale bool // recount at the next hint (markActive)
	activeFor   Time // a sender stays counted this long after its DATA or post

	// Receiver-side ECN scaling of the hints (docs/spec.md §3.5): DATA
	// packets and CE-marked DATA packets received this round, the round's
	// end, and the scale applied to every hint.
	hintRx, hintCE int
	hintBytes      uint64 // datagram bytes of the DATA counted in hintRx
	hintFrom       Time   // when this round's counting began
	hintRoundEnd   Time
	hintSkip       Time // DATA arriving before this is not counted
	hintScale      float64

	// planeFree[p] is when plane p's NIC port will have sent the
	// sequenced packets the endpoint gave it, at LineRate/Planes; nil with
	// one plane or an unknown line rate. Paths on a free plane are picked
	// first, so that all connections together spread over the ports
	// instead of queueing behind one while another idles.
	planeFree []Time
	portRate  uint64 // bytes/s of one plane's port

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

// peerID names a connection by what the peer calls it: its connection id
// and token.
type peerID struct {
	conn uint32
	tok  uint64
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
//
// NewEndpoint cannot return an error; New, which can, is the constructor
// to use. An endpoint built from a configuration that Config.Validate
// refuses connects to nobody, instead of sending handshakes that its
// peers refuse or that overflow its timers: Dial returns the
// validation's *ConfigError (ErrInvalid) at once, where every dial would
// otherwise fail only after HandshakeTimeout, and HELLOs from peers are
// dropped as DropNotListening.
func NewEndpoint(cfg Config, rng *rand.Rand) *Endpoint {
	cfgErr := cfg.Validate()
	cfg = cfg.withDefaults()
	if len(cfg.Addr) > wire.MaxAddrBlob {
		cfg.Addr = cfg.Addr[:wire.MaxAddrBlob]
	}
	e := &Endpoint{
		cfg:      cfg,
		cfgErr:   cfgErr,
		rng:      rng,
		conns:    make(map[ConnID]*Conn),
		byPeer:   make(map[uint64]*Conn),
		byPeerID: make(map[peerID]*Conn),
	}
	// Planes out of range is not allocated for.
	if cfgErr == nil && cfg.Planes > 1 && cfg.CC.LineRate > 0 {
		e.planeFree = make([]Time, cfg.Planes)
		e.portRate = cfg.CC.LineRate / uint64(cfg.Planes)
	}
	return e
}

// New returns an endpoint with the given configuration (see NewEndpoint),
// or, when cfg.Validate refuses it, a *ConfigError (ErrInvalid) that names
// the field, its value and what it takes.
func New(cfg Config, rng *rand.Rand) (*Endpoint, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	return NewEndpoint(cfg, rng), nil
}

// planeSent accounts a datagram of n bytes handed to plane p's port.
func (e *Endpoint) planeSent(now Time, p uint8, n int) {
	if e.planeFree == nil || int(p) >= len(e.planeFree) || e.portRate == 0 {
		return
	}
	e.planeFree[p] = max(e.planeFree[p], now) + Time(n)*Second/Time(e.portRate)
}

// Config returns the endpoint's effective configuration (defaults filled in).
func (e *Endpoint) Config() Config { return e.cfg }

// Counters returns the endpoint-wide drop counters.
func (e *Endpoint) Counters() Counters { return e.counters }

// NumConns returns the number of live connections (including handshaking).
func (e *Endpoint) NumConns() int { return len(e.conns) }

// HasConn reports whether the endpoint still holds connection id:
// handshaking, established or closing, exactly the connections that Stats
// and the API calls taking an id still know. It is one map lookup, for a
// driver that only needs to know whether a connection is gone (its
// operations failed because it ended, not because of a flow or a
// message), where Stats would build a whole snapshot to answer.
func (e *Endpoint) HasConn(id ConnID) bool { return e.conns[id] != nil }

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
		tidx:     -1,
	}
	ccfg := e.cfg.CC
	c.cc = cc.NewAIMD(ccfg)
	e.conns[id] = c
	e.order = append(e.order, c)
	e.touch(c)
	return c, nil
}

// removeConn forgets c; its events were already queued.
func (e *Endpoint) removeConn(c *Conn) {
	delete(e.conns, c.id)
	e.tq.remove(c)
	if c.accepted {
		if e.byPeer[c.peerTok] == c {
			delete(e.byPeer, c.peerTok)
		}
	}
	if k := (peerID{c.peerConn, c.peerTok}); e.byPeerID[k] == c {
		delete(e.byPeerID, k)
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
// EvClosed with ErrHandshakeTimeout. An endpoint whose configuration is
// invalid returns its *ConfigError (see NewEndpoint). Beyond MaxConns it fails with an
// ErrLimit error that names the bound, as the other ErrLimit errors do,
// so that the user knows which limit the dial met (newConn's own error
// stays bare: a refused HELLO must not allocate).
func (e *Endpoint) Dial(now Time, remote RemoteID) (ConnID, error) {
	if e.cfgErr != nil {
		return 0, e.cfgErr
	}
	c, err := e.newConn(now, remote)
	if err != nil {
		return 0, fmt.Errorf("%w: this endpoint holds MaxConns (%d) connections, those handshaking or closing included; close the ones it no longer needs, or raise MaxConns", err, e.cfg.MaxConns)
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
	e.touch(c)
	return c.send(now, flow, length, tag, cookie)
}

// PostRecv posts a grouped receive of 1..8 buffers on flow of connection id.
func (e *Endpoint) PostRecv(now Time, id ConnID, flow uint32, bufs []RecvBuf) error {
	c := e.conns[id]
	if c == nil {
		return &ConnError{Conn: id, Err: ErrUnknownConn}
	}
	e.touch(c)
	return c.postRecv(now, flow, bufs)
}

// Close closes connection id: outstanding sends and receives fail with
// ErrClosed and the peer is told. EvClosed follows.
func (e *Endpoint) Close(now Time, id ConnID) {
	if c := e.conns[id]; c != nil {
		e.touch(c)
		c.closeLocal(now, wire.CloseNormal)
	}
}

// Shutdown closes every connection.
func (e *Endpoint) Shutdown(now Time) {
	for _, c := range append([]*Conn(nil), e.order...) {
		e.touch(c)
		c.closeLocal(now, wire.CloseShutdown)
	}
}

// activeSenders returns how many connections are sending to us or about to
// (docs/spec.md §3.5): those with receives posted and not complete (a peer
// sends DATA only into announced receives) whose DATA arrived within the
// activity window W, or whose latest receive was posted within
// max(W, 2 × InitialRTT) (its DATA arrives about an RTT after the post)
// and not answered as idle (Conn.postIdle: the peer acknowledged the
// post's RECV_READY with FlagIdle before sending any DATA into it). A
// post for a peer farther than the nearest one sending DATA counts only
// from the difference of their minimum RTTs after it (postCountsFrom).
// W (activityWindow) is four packet gaps of a sender at the current share,
// so a sender using under a quarter of its share stops counting and the
// others' shares grow, and one whose transfer ended stops counting within
// W rather than ActiveWindow. Receives posted long ago without DATA do not
// count: a pairwise all-to-all posts every receive up front and has one
// peer sending at a time, and counting every connection with receives
// posted hinted that sender 1/63 of the link at 64 hosts for its whole
// transfer. The count is cached until the first counted connection would
// stop counting (at most ActiveWindow/4), and recomputed at once after a
// connection became active (markActive).
func (e *Endpoint) activeSenders(now Time) int {
	if !e.activeStale && now < e.activeUntil && e.activeCount > 0 {
		return e.activeCount
	}
	e.activeFor = e.activityWindow()
	w, wp := e.activeFor, max(e.activeFor, 2*e.cfg.InitialRTT)
	n, nd := 0, 0
	until := now + e.cfg.ActiveWindow/4
	var nearest Time // least minimum RTT of a connection sending DATA
	for _, c := range e.order {
		if c.minRTT != 0 && c.lastData != 0 && now-c.lastData < w && c.expectsData() && (nearest == 0 || c.minRTT < nearest) {
			nearest = c.minRTT
		}
	}
	// A deferred post is not counted yet; the count is recomputed when it
	// would be (until).
	for _, c := range e.order {
		if !c.expectsData() {
			continue
		}
		var end Time
		if c.lastData != 0 && now-c.lastData < w {
			end = c.lastData + w
			nd++
		}
		if c.lastPost != 0 && now-c.lastPost < wp && !c.postIdle {
			if from := c.postCountsFrom(nearest); now < from {
				until = min(until, from)
			} else {
				end = max(end, c.lastPost+wp)
			}
		}
		if end != 0 {
			n++
			until = min(until, end)
		}
	}
	e.activeUntil, e.activeCount, e.activeStale = until, max(n, 1), false
	e.activeData = nd
	return e.activeCount
}

// activityWindow is W of activeSenders: four gaps between the packets of a
// sender paced at the current share, MSS × count / (InboundRate × scale),
// at least InitialRTT (ACK clocking and jitter leave gaps of about an RTT)
// and at most ActiveWindow. It is recomputed with the count, and place
// marks a connection active after a quiet W of the latest recount, so no
// sender starts counting unnoticed.
func (e *Endpoint) activityWindow() Time {
	scale := e.hintScale
	if scale <= 0 {
		scale = 1
	}
	w := e.cfg.ActiveWindow
	if r := float64(e.cfg.InboundRate) * scale; r > 0 {
		gap := float64(e.cfg.CC.MSS) * float64(max(e.activeCount, 1)) / r * 1e9
		w = min(w, Time(4*gap))
	}
	return min(max(w, e.cfg.InitialRTT), e.cfg.ActiveWindow)
}

// markActive invalidates the cached active-sender count: c just became
// active (its first DATA after a quiet activity window, or a receive posted).
// A flag, not a time in the far past: now minus such a time overflows, and
// an earlier version froze the count at its first value (1) that way, so
// every incast sender was hinted the whole inbound rate.
func (e *Endpoint) markActive() { e.activeStale = true }

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

// postedBytes is the capacity of c's receives that are not complete.
func (c *Conn) postedBytes() uint64 {
	var b uint64
	for _, f := range c.flows {
		for _, g := range f.recvs {
			for i := range g.entries[:g.n] {
				if !g.entries[i].done {
					b += g.entries[i].capacity
				}
			}
		}
	}
	return b
}

// rateHint is the fair share of the inbound capacity for the sender of c,
// in kbit/s as carried in ACKs; 0 when the endpoint gives no hints.
//
// A connection that has not sent us DATA within the activity window
// (activeSenders) is starting:
// its hint divides the capacity by every established connection, not only
// by the active ones. Drivers post the receives of an incast one at a time,
// and each post sends its hint at once, so counting only the active
// connections hinted the k-th of N senders capacity/k, in sum H(N) ≈ 4.7
// times the capacity for N = 63, for the whole first RTT. The next hint,
// one RTT later, carries the active count. While other connections could
// send too, the starting hint is moreover halved when their first packets
// make a queue longer than the receiver tolerates (startQueueTooLong) and
// their announced transfer outlasts it (startOutlastsQueue):
// every sender of an incast puts its first packet into the receiver's queue
// at once (63 × 4 KiB = 265 KB, above a 100 KB marking threshold), and at
// exactly the fair share that queue would never drain; at half the share it
// is gone within about an RTT, when the next hint restores the full share.
// Where the minimum RTTs show that some connections cannot send before
// c's first acknowledgement corrects its rate (nearStarting), the starting
// hint divides the capacity among the near ones only, and at least among
// those already sending.
func (e *Endpoint) rateHint(now Time, c *Conn) uint32 {
	if e.cfg.InboundRate == 0 {
		return 0
	}
	n := e.activeSenders(now)
	div := uint64(1)
	if c.lastData == 0 || now-c.lastData >= e.activeFor {
		if near := e.nearStarting(c); near > 0 {
			n = max(e.activeData, near)
			c.nearHinted = true
		} else {
			n = max(n, e.startingSenders())
		}
		if e.startQueueTooLong(n) && !e.startOutlastsQueue(n, c) {
			div = 2
		}
	}
	share := uint64(float64(e.cfg.InboundRate/uint64(n)/div) * e.hintFactor(now))
	if e.activeData > 1 {
		share -= share / hintHeadroom
	}
	k := share * 8 / 1000
	if k == 0 {
		k = 1
	}
	if k > 0xffffffff {
		k = 0xffffffff
	}
	return uint32(k)
}

// hintHeadroom: while two or more connections send DATA, every hint is
// 1/hintHeadroom short of its share of the inbound rate. Each hinted
// sender's jittered pacing gaps (pollSequenced) make its arrivals a random
// walk around its share; with shares that add up to the whole rate, the
// walk of their sum has no drift, and the queue wandered up to the marking
// threshold and stood there, turned back by CE marks alone: the
// simulator's 63-sender incast crossed Kmin again 50 to 120 RTTs after
// settling at six seeds of eight. A drift of 1/256 of the rate (0.2 KB/µs
// at 400 Gb/s) outweighs that walk within tens of µs, and no seed's queue
// came back. A lone sender keeps the whole rate: it cannot outrun its own
// line, which is no faster than the receiver's port. Counting connections
// that merely have receives posted instead (activeSenders) cut the
// 64-rank 1 MiB all-reduce's hints while one peer sent, and its rows under
// 0.1% loss took 162.4 µs instead of 152.5 (median over seeds 1–8).
const hintHeadroom = 256

// startQueueTooLong reports whether n senders that start together, each
// putting its first packet into the receiver's queue at once, leave a
// queue longer than the receiver tolerates: an eighth of InitialRTT at the
// inbound rate, the queueing that the senders' drain factor also lets
// stand (cc.AIMD.drain). Only then is the starting share halved: 63 senders
// of 4 KiB packets at 400 Gb/s put 258 KB in front of a 100 KB marking
// threshold, where 4 senders' 16 KB are gone in 0.3 µs, and halving their
// share made each of a 64-rank all-to-all's 16 KiB messages take twice its
// serialisation time.
func (e *Endpoint) startQueueTooLong(n int) bool {
	if n <= 1 {
		return false
	}
	tolerated := float64(e.cfg.InboundRate) * float64(e.cfg.InitialRTT) / float64(Second) / 8
	return float64(n)*float64(e.cfg.CC.MSS) > tolerated
}

// startOutlastsQueue reports whether n senders that each send what c's
// receives announce would together be done within two InitialRTTs at the
// inbound rate. Halving the starting hint drains the queue of their first
// packets within about an RTT, at the cost of half the rate for that RTT;
// a transfer that short ends before the halving pays off, and the queue
// ends with it. A 64-rank all-to-all of 1 MiB (63 messages of 16 KiB into
// each receiver, 258 KB of first packets) took 43.6 µs halved and 38.3 not,
// on the simulated fabric, with the rows under 0.1% and 1% loss within a
// few percent either way over eight seeds.
func (e *Endpoint) startOutlastsQueue(n int, c *Conn) bool {
	limit := 2 * float64(e.cfg.InboundRate) * float64(e.cfg.InitialRTT) / float64(Second)
	return float64(n)*float64(c.postedBytes()) <= limit
}

// hintFactor is the scale applied to every hint: the receiver's own view of
// the queue in front of it. The hints add up to the inbound capacity, so a
// queue built before they took hold (an incast's first packets) would stand
// for ever; once per InitialRTT, a round in which a fraction f of the DATA
// arrived CE-marked multiplies the scale by 1 − f/2, and a round without
// marks, or whose DATA arrived too slowly for the queue to be the
// receiver's (inboundSaturated), returns half the way to 1. Every sender gets the same factor, so
// draining the queue keeps the shares fair; a version that scaled rates at
// each sender from the marks that sender saw was unfair for as long as its
// 1/16-per-RTT recovery took (14 RTTs at N = 32).
func (e *Endpoint) hintFactor(now Time) float64 {
	if e.hintScale == 0 {
		e.hintScale = 1
	}
	if now < e.hintRoundEnd {
		return e.hintScale
	}
	round := e.cfg.InitialRTT
	if e.hintRx > 0 {
		if e.hintCE > 0 && e.inboundSaturated(now) {
			e.hintScale *= 1 - float64(e.hintCE)/float64(e.hintRx)/2
			// The packets of the next RTT left before the senders
			// heard of this cut: their marks are not counted.
			e.hintSkip = now + e.cfg.InitialRTT
			round *= 2
		} else {
			e.hintScale += (1 - e.hintScale) / 2
		}
		e.hintScale = min(max(e.hintScale, 1.0/16), 1)
	}
	e.hintRx, e.hintCE, e.hintBytes = 0, 0, 0
	e.hintFrom = max(now, e.hintSkip)
	e.hintRoundEnd = now + round
	return e.hintScale
}

// saturatedFrac is the share of InboundRate at which DATA must have arrived
// over a hint round for its CE marks to cut the hints (inboundSaturated).
const saturatedFrac = 0.9

// inboundSaturated reports whether the DATA counted this round arrived at
// saturatedFrac of InboundRate or more: only then can the queue that marked
// it stand in front of the receiver, whose port drains at its line rate
// while a queue stands there. Marks that arrive slower were set by a queue
// elsewhere in the fabric (a spine uplink that lost a neighbour), which
// every hint shrinking would not drain sooner: the senders' own windows
// react to it, path by path. Cutting the hints for it as well took a
// sender whose route lost a spine link to 0.28 of its share within ten
// RTTs, and the simulated fabric stayed under 90% of its surviving
// capacity for 18 RTTs instead of 2. A round too short to tell (under a
// microsecond) counts as saturated.
func (e *Endpoint) inboundSaturated(now Time) bool {
	span := now - e.hintFrom
	if span < Microsecond || e.cfg.InboundRate == 0 {
		return true
	}
	rate := float64(e.hintBytes) * float64(Second) / float64(span)
	return rate >= saturatedFrac*float64(e.cfg.InboundRate)
}

// SetConcurrentSenders replaces Config.ConcurrentSenders, the most
// connections the application lets send to the endpoint at once (0:
// unknown), from now on: an application whose pattern changes over time
// declares each phase's bound before it posts the phase's receives (a
// collective's ring has one sender per rank, its all-to-all several). The
// starting hints of receives posted later divide the inbound capacity by
// it (docs/spec.md §3.5). A negative k counts as 0.
func (e *Endpoint) SetConcurrentSenders(k int) {
	e.cfg.ConcurrentSenders = max(k, 0)
}

// startingSenders is how many connections may start sending at once: the
// established ones, at most Config.ConcurrentSenders when that is set.
func (e *Endpoint) startingSenders() int {
	n := e.established()
	if k := e.cfg.ConcurrentSenders; k > 0 {
		n = min(n, k)
	}
	return n
}

// established counts the connections in the established state.
func (e *Endpoint) established() int {
	n := 0
	for _, c := range e.order {
		if c.state == stateEstablished {
			n++
		}
	}
	return n
}
