package udpnet

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"net/netip"
	"slices"
	"strings"
	"sync"

	"github.com/metaroce/metaroce/net-plugin/internal/backend"
	"github.com/metaroce/metaroce/net-plugin/internal/netdev"
	"github.com/metaroce/metaroce/transport"
	"github.com/metaroce/metaroce/transport/udp"
)

// maxReady bounds the announced flows a listener holds before Accept.
const maxReady = 64

// maxAbandoned bounds the connects a peer remembers as given up with their
// answers still to come (peer.abandoned). Each entry lives one round trip
// to the listener, so only a burst of connects timing out together fills
// it; past the bound the oldest is forgotten, and its late accept is
// ignored, leaving the listener's comm queued until the listener closes.
const maxAbandoned = 64

// maxListenFlow is the largest flow id a listener takes (listeners
// number theirs 1, 2, 3, …; ctrlFlow is 0). A comm's data flow is twice
// its listener's flow or one more (peer.dataFlow), and has to fit the
// datapath's 32-bit flow ids.
const maxListenFlow = 1<<31 - 1

// device is one plugin device: one udp.Endpoint over all planes, the shared
// connections to peers and the listeners waiting for announcements.
type device struct {
	b     *Backend
	info  backend.Device
	addrs []netip.Addr
	done  chan struct{} // closed by close
	wg    sync.WaitGroup

	mu        sync.Mutex
	ep        *udp.Endpoint
	closed    bool
	peers     map[string]*peer         // peer key -> connection new comms use
	dials     map[string]chan struct{} // peer key -> closed when a Dial in progress ends
	listeners map[uint32]*listener     // by flow id
	waiters   map[waitKey]chan ctrlMsg // dialers waiting for accept/reject
	nextFlow  uint32                   // the flow id of the latest listener, ≤ maxListenFlow

	// Test hooks, nil in production; set and read under mu, run without
	// it. beforeAnnounce runs on a connection's control goroutine when an
	// announcement arrives, before the listener looks at it;
	// awaitingAnswer runs on a dialer's goroutine once its announcement
	// is sent, before it waits for the answer.
	beforeAnnounce, awaitingAnswer func()
}

// waitKey names an announcement awaiting its answer.
type waitKey struct {
	p    *peer
	flow uint32
}

func newDevice(b *Backend, info backend.Device, planes []netdev.Iface) *device {
	d := &device{
		b: b, info: info, done: make(chan struct{}),
		peers: map[string]*peer{}, dials: map[string]chan struct{}{},
		listeners: map[uint32]*listener{}, waiters: map[waitKey]chan ctrlMsg{},
	}
	for _, p := range planes {
		d.addrs = append(d.addrs, p.Addr)
	}
	return d
}

func (d *device) logf(format string, args ...any) {
	if d.b.cfg.Logf != nil {
		d.b.cfg.Logf(format, args...)
	}
}

// endpoint returns the device's endpoint, opening it (and starting its
// accept loop) on first use; d.mu must be held.
func (d *device) endpointLocked() (*udp.Endpoint, error) {
	if d.closed {
		return nil, fmt.Errorf("udpnet: device %s is closed: %w", d.info.Name, backend.ErrClosed)
	}
	if d.ep != nil {
		return d.ep, nil
	}
	cfg := d.b.cfg
	ep, err := udp.Listen(udp.Config{
		Addrs:         d.addrs,
		PortsPerPlane: cfg.PortsPerPlane,
		Seed:          cfg.Seed,
		Secret:        cfg.Secret,
		Logf:          cfg.Logf,
		Core: transport.Config{
			IdleTimeout:      transport.Time(cfg.Timeout),
			HandshakeTimeout: transport.Time(cfg.Timeout),
			MaxFlowsPerConn:  maxFlowsPerConn,
			MaxConns:         cmp.Or(cfg.MaxPeers, DefaultMaxPeers),
		},
	})
	if err != nil {
		return nil, fmt.Errorf("udpnet: opening the MetaRoCE endpoint on %s (%s): %w", d.info.IfName, d.info.Addr, err)
	}
	d.ep = ep
	d.wg.Add(1)
	go d.acceptLoop(ep)
	return ep, nil
}

// acceptLoop adopts every connection peers open to the endpoint.
func (d *device) acceptLoop(ep *udp.Endpoint) {
	defer d.wg.Done()
	ctx, cancel := context.WithCancel(context.Background())
	go func() {
		<-d.done
		cancel()
	}()
	for {
		c, err := ep.Accept(ctx)
		if err != nil {
			return
		}
		d.adopt(c, false)
	}
}

// peer is one shared connection. refs counts the comms (and connects in
// progress) using it; it closes when refs returns to zero.
type peer struct {
	d    *device
	conn *udp.Conn
	key  string
	name string // printable per-plane addresses of the peer

	// dialed is true when this side dialed the connection (the other side
	// accepted it); both ends agree on it, which makes dataFlow agree.
	dialed bool

	// Guarded by d.mu.
	refs int
	dead bool
	// flows holds, for every send comm of this side open on the
	// connection, the peer's listener flow it connected to: a second
	// connect with the handle of an open comm then fails here with a clear
	// error. A comm's entry goes when it closes (release), so that a
	// connection outliving many comms holds only the open ones. Once the
	// entry is gone the listener still refuses the handle: its flow ids
	// are never reused, a closed listener is refused by flow and nonce,
	// and an open one accepts each connection only once (listener.from).
	flows map[uint32]bool
	// abandoned holds the announcements on this connection whose connect
	// gave up (its deadline, an abort) before the listener's answer came,
	// oldest first, at most maxAbandoned: the only accepts that
	// declineAccept may act on. An entry goes when its answer arrives,
	// when a new connect announces the same flow, or with the peer.
	abandoned []abandonedConnect
}

// abandonedConnect is an announcement whose connect gave up before its
// answer came: the peer's listener flow and nonce, from the listen handle.
type abandonedConnect struct {
	flow  uint32
	nonce uint64
}

// abandonLocked records that the connect announcing listener flow flow
// with nonce gave up before its answer came, forgetting the oldest record
// past maxAbandoned; d.mu must be held.
func (p *peer) abandonLocked(flow uint32, nonce uint64) {
	p.forgetAbandonedLocked(flow)
	if len(p.abandoned) == maxAbandoned {
		p.abandoned = slices.Delete(p.abandoned, 0, 1)
	}
	p.abandoned = append(p.abandoned, abandonedConnect{flow, nonce})
}

// forgetAbandonedLocked drops the record of a given-up connect to listener
// flow flow, if any; d.mu must be held.
func (p *peer) forgetAbandonedLocked(flow uint32) {
	p.abandoned = slices.DeleteFunc(p.abandoned, func(a abandonedConnect) bool { return a.flow == flow })
}

// takeAbandonedLocked reports whether a connect to listener flow flow with
// nonce gave up here before its answer came, and drops that record, which
// the answer uses up; d.mu must be held. A mismatched nonce leaves the
// record for the real answer.
func (p *peer) takeAbandonedLocked(flow uint32, nonce uint64) bool {
	i := slices.Index(p.abandoned, abandonedConnect{flow, nonce})
	if i < 0 {
		return false
	}
	p.abandoned = slices.Delete(p.abandoned, i, i+1)
	return true
}

// dataFlow is the flow a comm uses on p's connection, from the flow its
// listener allocated and whether that listener is on this side. Each side
// numbers its listeners 1, 2, 3, … on its own, so the listener's number
// alone is not unique on a connection both sides listen over; doubling it
// and adding whether the listener's side dialed the connection is. A comm's
// two ends compute the same flow, and no flow is ever used twice on a
// connection, so each can be released when its comm closes.
func (p *peer) dataFlow(listenFlow uint32, listenerHere bool) uint32 {
	listenerDialed := p.dialed == listenerHere
	f := 2 * listenFlow
	if listenerDialed {
		f++
	}
	return f
}

// peerKey identifies a remote endpoint by its per-plane addresses.
func peerKey(addrs []netip.AddrPort) string {
	var b strings.Builder
	for i, a := range addrs {
		if i > 0 {
			b.WriteByte(',')
		}
		b.WriteString(netip.AddrPortFrom(a.Addr().Unmap(), a.Port()).String())
	}
	return b.String()
}

// adopt registers a new connection and starts its control loop. A dialed
// connection starts with one reference (the connect that made it).
func (d *device) adopt(c *udp.Conn, dialed bool) *peer {
	p := &peer{d: d, conn: c, key: peerKey(c.RemoteAddrs()), dialed: dialed, flows: map[uint32]bool{}}
	p.name = p.key
	d.mu.Lock()
	if d.closed {
		d.mu.Unlock()
		_ = c.Close()
		return nil
	}
	if old := d.peers[p.key]; old == nil || dialed {
		d.peers[p.key] = p
	}
	if dialed {
		p.refs = 1
	}
	d.wg.Add(1)
	d.mu.Unlock()
	go p.control()
	return p
}

// control keeps a receive posted on the control flow and handles what
// arrives, until the connection ends.
func (p *peer) control() {
	d := p.d
	defer d.wg.Done()
	buf := make([]byte, ctrlLen)
	for {
		r, err := p.conn.Recv(ctrlFlow, [][]byte{buf}, []uint32{ctrlTag})
		if err != nil {
			d.gone(p, err)
			return
		}
		select {
		case <-r.Done():
		case <-d.done:
			return
		}
		if _, err := r.Test(); err != nil {
			if errors.Is(err, transport.ErrMessageTooLarge) || errors.Is(err, transport.ErrTagMismatch) {
				d.logf("NET/MetaRoCE : udpnet: dropped a malformed control message from peer %s: %v", p.name, err)
				continue
			}
			d.gone(p, err)
			return
		}
		var m ctrlMsg
		if _, err := parseCtrl(&m, buf[:r.Sizes()[0]]); err != nil {
			d.logf("NET/MetaRoCE : udpnet: dropped a control message from peer %s: %v", p.name, err)
			continue
		}
		d.handleCtrl(p, m)
	}
}

// handleCtrl acts on one control message from p.
func (d *device) handleCtrl(p *peer, m ctrlMsg) {
	switch m.Kind {
	case ctrlAnnounce:
		d.announced(p, m)
	case ctrlWithdraw:
		d.withdrawn(p, m)
	default:
		d.answered(p, m)
	}
}

// answered hands the listener's answer m to the connect waiting for it
// (announce). The answer goes into the waiter's channel (one slot, one
// answer per waiter) under d.mu, in the step that removes the waiter: a
// connect that ends meanwhile removes its waiter under d.mu as well, and
// then finds either the answer in its channel or, its waiter having been
// still there, that the answer will come here to nobody, and records it
// as abandoned (peer.abandoned). An accept that nobody waits for and that
// matches such a record, flow and nonce, is one whose connect ended after
// it announced: the listener queued a comm for a connect that has failed
// here, and declineAccept has it dropped. Any other accept nobody waits
// for (a duplicate, one past the record's bound, or one from a faulty or
// hostile peer, which may name the flow of a live comm or one beyond
// every listener's) is logged and ignored: aborting a flow on its word
// could end a working comm, or, for a listener flow of 2^31 or more, whose
// data flow wraps to ctrlFlow, the connection's control channel. The
// flow's range and p.flows are checked as well, so that no record can
// lead to either.
func (d *device) answered(p *peer, m ctrlMsg) {
	key := waitKey{p, m.Flow}
	decline, stray := false, false
	d.mu.Lock()
	ch := d.waiters[key]
	switch {
	case ch != nil:
		delete(d.waiters, key)
		ch <- m
	case p.takeAbandonedLocked(m.Flow, m.Nonce):
		decline = m.Kind == ctrlAccept && m.Flow >= 1 && m.Flow <= maxListenFlow && !p.flows[m.Flow]
		stray = m.Kind == ctrlAccept && !decline
	default:
		stray = m.Kind == ctrlAccept
	}
	d.mu.Unlock()
	switch {
	case decline:
		d.declineAccept(p, m)
	case stray:
		d.logf("NET/MetaRoCE : udpnet: ignored an accept of flow %d from peer %s that no connect here gave up on (a duplicate, or a faulty peer)", m.Flow, p.name)
	}
}

// declineAccept answers an accept from p that came after its connect here
// had ended (its deadline passed, or the plugin aborted it): the comm's
// flow is aborted, so that a comm that NCCL accepted at the listener
// meanwhile fails when used instead of waiting for sends that never come,
// and the listener is told to drop the comm if it still holds it
// (ctrlWithdraw), which releases its reference on the connection then
// rather than when the listener closes.
func (d *device) declineAccept(p *peer, m ctrlMsg) {
	d.logf("NET/MetaRoCE : udpnet: peer %s accepted flow %d after the connect to it had ended here: withdrawing the flow", p.name, m.Flow)
	p.conn.AbortFlow(p.dataFlow(m.Flow, false))
	_ = p.sendCtrl(ctrlMsg{Kind: ctrlWithdraw, Flow: m.Flow, Nonce: m.Nonce})
}

// withdrawn drops the comm that listener m.Flow queued for p's connect,
// which ended at the dialer before the accept reached it (ctrlWithdraw).
// The listener keeps its record that p connected (listener.from), so the
// handle stays used. A comm that NCCL accepted already is NCCL's to close:
// the dialer aborted its flow, so it fails when used.
func (d *device) withdrawn(p *peer, m ctrlMsg) {
	var rc *recvConn
	d.mu.Lock()
	if l := d.listeners[m.Flow]; l != nil && l.nonce == m.Nonce {
		if i := slices.IndexFunc(l.ready, func(c *recvConn) bool { return c.p == p }); i >= 0 {
			rc = l.ready[i]
			l.ready = slices.Delete(l.ready, i, i+1)
		}
	}
	d.mu.Unlock()
	if rc == nil {
		return
	}
	d.logf("NET/MetaRoCE : udpnet: peer %s withdrew its connect to flow %d, which ended there before this side's accept arrived: dropping the comm", p.name, m.Flow)
	_ = rc.Close()
}

// announced answers p's announcement of a connect to listener m.Flow: the
// listener queues a comm for it and the answer is an accept, or it is a
// reject.
func (d *device) announced(p *peer, m ctrlMsg) {
	d.mu.Lock()
	hook := d.beforeAnnounce
	d.mu.Unlock()
	if hook != nil {
		hook()
	}
	reply := ctrlMsg{Kind: ctrlReject, Flow: m.Flow, Nonce: m.Nonce}
	d.mu.Lock()
	l := d.listeners[m.Flow]
	switch {
	case p.dead:
		d.mu.Unlock()
		return // closing: the dialer sees the connection end and retries
	case l == nil || l.nonce != m.Nonce:
		d.logf("NET/MetaRoCE : udpnet: peer %s connected to flow %d, which has no listener here (stale listen handle?)", p.name, m.Flow)
	case l.from[p] || len(l.ready) >= maxReady:
		d.logf("NET/MetaRoCE : udpnet: peer %s connected to flow %d twice, or too many connects wait for accept", p.name, m.Flow)
	default:
		l.from[p] = true
		p.refs++
		l.ready = append(l.ready, newRecvConn(p, p.dataFlow(m.Flow, true)))
		reply.Kind = ctrlAccept
	}
	d.mu.Unlock()
	p.sendCtrl(reply)
}

// sendCtrl queues a control message; its outcome shows in the peer's answer
// or in the connection ending, so the request is not kept.
func (p *peer) sendCtrl(m ctrlMsg) error {
	b, err := m.Append(make([]byte, 0, ctrlLen))
	if err != nil {
		return err
	}
	_, err = p.conn.Send(ctrlFlow, b, ctrlTag)
	return err
}

// gone forgets a connection that ended, wakes its waiting dialers and
// drops the comms that listeners queued for it, waiting for NCCL's
// accept: nothing can reach them any more, and each holds a reference on
// p. They leave the queues in the step that marks p dead, so that a
// queued comm's connection is always live (Listener.Accept relies on
// it), and are closed, which releases their references, once d.mu is
// free (Close takes it).
func (d *device) gone(p *peer, err error) {
	var ended []*recvConn
	d.mu.Lock()
	p.dead = true
	p.abandoned = nil // no answer comes any more
	if d.peers[p.key] == p {
		delete(d.peers, p.key)
	}
	for k, ch := range d.waiters {
		if k.p == p {
			delete(d.waiters, k)
			close(ch)
		}
	}
	for _, l := range d.listeners {
		l.ready = slices.DeleteFunc(l.ready, func(c *recvConn) bool {
			if c.p == p {
				ended = append(ended, c)
				return true
			}
			return false
		})
	}
	d.mu.Unlock()
	if !errors.Is(err, udp.ErrEndpointClosed) {
		d.logf("NET/MetaRoCE : udpnet: connection to peer %s ended: %v", p.name, err)
	}
	for _, c := range ended {
		d.logf("NET/MetaRoCE : udpnet: comm on flow %d from peer %s was waiting for accept when its connection ended: dropping it", c.flow, p.name)
		_ = c.Close()
	}
}

// acquire returns a live connection to remote with a reference taken,
// dialing one if needed. Concurrent acquires of one peer share one Dial.
func (d *device) acquire(ctx context.Context, remote []netip.AddrPort) (*peer, error) {
	key := peerKey(remote)
	for {
		d.mu.Lock()
		ep, err := d.endpointLocked()
		if err != nil {
			d.mu.Unlock()
			return nil, err
		}
		if p := d.peers[key]; p != nil && !p.dead {
			p.refs++
			d.mu.Unlock()
			return p, nil
		}
		if ch := d.dials[key]; ch != nil {
			d.mu.Unlock()
			select {
			case <-ch:
				continue
			case <-ctx.Done():
				return nil, ctx.Err()
			}
		}
		ch := make(chan struct{})
		d.dials[key] = ch
		d.mu.Unlock()

		c, err := ep.Dial(ctx, remote)
		d.mu.Lock()
		delete(d.dials, key)
		close(ch)
		d.mu.Unlock()
		if err != nil {
			return nil, err
		}
		if p := d.adopt(c, true); p != nil {
			return p, nil
		}
		return nil, fmt.Errorf("udpnet: device %s closed while connecting: %w", d.info.Name, backend.ErrClosed)
	}
}

// release drops one reference; the last one closes the connection.
// connected is the listener flow of a closing send comm (flowEnd.connected),
// whose record in p.flows goes with its reference; 0 for anything else.
func (d *device) release(p *peer, connected uint32) {
	d.mu.Lock()
	if connected != 0 {
		delete(p.flows, connected)
	}
	p.refs--
	last := p.refs == 0 && !p.dead
	if last {
		d.retireLocked(p)
	}
	d.mu.Unlock()
}

// retireLocked marks p dead and closes its connection in the background;
// d.mu must be held.
func (d *device) retireLocked(p *peer) {
	p.dead = true
	if d.peers[p.key] == p {
		delete(d.peers, p.key)
	}
	d.wg.Add(1)
	go func() {
		defer d.wg.Done()
		_ = p.conn.Close()
	}()
}

// listen allocates a flow and registers its listener.
//
// Flow ids are never reused while the device lives: once a listener has
// closed, the comms it made may still be open on connections that outlive
// them, and the datapath refuses a released flow id's reuse on a
// connection (docs/spec.md §3.4), so skipping the ids of the listeners
// still open would not be enough. After maxListenFlow listens (2^31 − 1:
// ten thousand a second for nearly three days) the device refuses to
// listen, with an error that says so, rather than wrap onto the control
// flow and the data flows of earlier comms.
func (d *device) listen() (*listener, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	ep, err := d.endpointLocked()
	if err != nil {
		return nil, err
	}
	if d.nextFlow >= maxListenFlow {
		return nil, fmt.Errorf("udpnet: device %s has opened %d listeners, every flow id a listener can take (a comm's flow is never reused on a connection, and its number comes from its listener's): restart the process to listen on it again: %w", d.info.Name, d.nextFlow, backend.ErrInternal)
	}
	d.nextFlow++
	l := &listener{d: d, flow: d.nextFlow, nonce: randomNonZero(), from: map[*peer]bool{}}
	h := listenHandle{Flow: l.flow, Nonce: l.nonce, Addrs: ep.Addrs()}
	if l.handle, err = h.Append(make([]byte, 0, h.Length())); err != nil {
		return nil, err
	}
	d.listeners[l.flow] = l
	return l, nil
}

// close shuts the endpoint down and waits for every goroutine of d.
func (d *device) close() {
	d.mu.Lock()
	if d.closed {
		d.mu.Unlock()
		return
	}
	d.closed = true
	close(d.done)
	ep := d.ep
	d.mu.Unlock()
	if ep != nil {
		_ = ep.Close()
	}
	d.wg.Wait()
}
