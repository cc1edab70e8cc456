package udp

import (
	"context"
	crand "crypto/rand"
	"encoding/binary"
	"errors"
	"fmt"
	"math/rand/v2"
	"net/netip"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/metaroce/metaroce/transport"
	"github.com/metaroce/metaroce/transport/auth"
	"github.com/metaroce/metaroce/transport/udp/sockio"
)

// Endpoint is one MetaRoCE endpoint on real sockets: a pool of UDP sockets
// per plane, one protocol core and the event-loop goroutine that drives both.
// It dials and accepts connections. Its methods are safe for concurrent use.
type Endpoint struct {
	cfg   resolved
	addrs []netip.AddrPort // listening address per plane
	// laterRelease holds peers of connections that closed during this
	// loop turn, or in the turns before it while the core still owed
	// datagrams (laterWait); they are released after a transmit pass
	// that sent everything the core had due (turnOut).
	laterRelease []transport.RemoteID
	// laterForget holds the connections closed as laterRelease's, and
	// those refused before they had a Conn, whose keys the
	// authenticator forgets with laterRelease.
	laterForget []uint32
	// laterWait counts the turns in a row whose transmit pass left
	// datagrams in the core while laterRelease or laterForget waited
	// (turnOut).
	laterWait int
	// laterRefuse holds accepted connections this turn refuses with a
	// secret. They are closed after the transmit pass has sealed their
	// HELLO_ACKs, which install the keys that the CLOSE telling the
	// dialer is sealed with; heldAcks keeps those HELLO_ACKs until the
	// CLOSEs have left (see refuse).
	laterRefuse []transport.ConnID
	heldAcks    []heldDatagram
	// refuseWait counts the turns in a row that ended with a refusal
	// in laterRefuse still waiting for its HELLO_ACK (refuseWaitTurns).
	refuseWait int
	// early holds CLOSEs that arrived, with a secret, for connections
	// still dialing: they open only with the keys of the HELLO_ACK that
	// follows them (see stashEarly).
	early []earlyDatagram
	// connected holds dialed connections refused early (Conn.refusedEarly)
	// whose EvConnected the current drainEvents delivered; their Dial
	// learns of success when the drain ends, unless the connection closed
	// within it, as the replayed CLOSE makes it.
	connected []*Conn
	epoch     time.Time

	// drive is held by whoever runs a turn of the datapath: the event loop,
	// or a user goroutine that runs one itself (assist.go). Everything
	// below up to the command queue, and the loop-owned fields of Conn and
	// Request, are guarded by it.
	drive sync.Mutex
	dead  bool // the loop has exited and released the sockets
	// finalCore is the core's counters as the loop's exit left them, for
	// Stats once the endpoint has stopped: set by exit under drive before
	// it closes done, so that reading it after done needs no lock.
	finalCore *transport.Counters

	// Set up by Listen, then guarded by drive.
	core      *transport.Endpoint
	socks     []*sockio.Conn // by tag = plane*PortsPerPlane + entropy
	poller    *sockio.Poller
	timer     *timerFD
	peers     *peerTable
	conns     map[transport.ConnID]*Conn
	sendOps   map[uint64]*Request
	recvOps   map[uint64]recvRef
	cookie    uint64
	dropRng   *rand.Rand
	black     []bool // by entropy
	rx        rxState
	tx        txState
	recvBuf   [8]transport.RecvBuf
	listening []int32 // tag of each plane's listening socket (socket 0)

	stopping     bool
	stopDeadline transport.Time
	lastBusy     transport.Time
	nextSweep    transport.Time

	// Command queue shared with user goroutines.
	mu       sync.Mutex
	cmds     []command
	spare    []command
	stopped  bool
	nCmds    atomic.Int32
	sleeping atomic.Bool  // the loop blocks (or is about to) in the poller
	spinners atomic.Int32 // goroutines in spinWait
	// polledAt is when a caller last ran Request.Poll (e.now() units):
	// for WaitSpin after it the loop parks, as while spinners > 0.
	polledAt atomic.Int64
	kick     chan struct{} // wakes a loop parked while spinners > 0
	closing  atomic.Bool

	// acceptMu guards accepted and every Conn's queued flag.
	acceptMu sync.Mutex
	// accepted holds the connections peers opened that wait for Accept,
	// oldest first, at most acceptQueueLen of them. A connection that
	// ends while it waits leaves it (connGone), so that Accept hands out
	// no dead connection and dead ones take no slot a live dialer needs.
	accepted []*Conn
	// acceptReady holds a token while accepted may be non-empty: added
	// by whoever leaves connections in accepted (the loop queueing one,
	// an Accept taking one of several), taken by a waiting Accept, which
	// then looks again. A stale token costs that Accept one more look.
	acceptReady chan struct{}
	done        chan struct{} // closed when the loop has exited and released everything

	counters driverCounters

	// auth seals every outgoing and opens every incoming datagram when the
	// job has a shared secret (nil otherwise). Only the goroutine running
	// a datapath turn touches it.
	auth *auth.Table

	// txTap, when set (by tests, before traffic starts), sees every
	// message the kernel accepted, with the loop time at which the core
	// released its batch: data is its first datagram, segs how many
	// datagrams it carried (more than one for a GSO send) and bytes their
	// total size. It runs under drive and must not keep data.
	txTap func(at transport.Time, data []byte, segs, bytes int)
}

// driverCounters are the datapath's own counts, readable from any goroutine.
type driverCounters struct {
	rxDatagrams atomic.Uint64
	txDatagrams atomic.Uint64
	faultDrops  atomic.Uint64
	sendErrors  atomic.Uint64
	txDrops     atomic.Uint64
	authDrops   atomic.Uint64
}

// EndpointStats are an endpoint's datapath counters.
type EndpointStats struct {
	RxDatagrams uint64 // datagrams handed to the core
	TxDatagrams uint64 // datagrams handed to the kernel
	FaultDrops  uint64 // datagrams dropped by DropProb or Blackhole
	SendErrors  uint64 // datagrams the kernel refused (other than EAGAIN)
	TxDrops     uint64 // datagrams dropped for want of a route or buffer
	AuthDrops   uint64 // received datagrams that failed authentication (or lacked it)
	Conns       int    // connections the core holds
	Core        transport.Counters
}

// Listen opens the sockets of every plane, starts the event loop and returns
// the endpoint, which accepts incoming connections at once.
func Listen(cfg Config) (*Endpoint, error) {
	r, err := cfg.resolve()
	if err != nil {
		return nil, err
	}
	e := &Endpoint{
		cfg:         r,
		epoch:       time.Now(),
		peers:       newPeerTable(),
		conns:       make(map[transport.ConnID]*Conn),
		sendOps:     make(map[uint64]*Request),
		recvOps:     make(map[uint64]recvRef),
		acceptReady: make(chan struct{}, 1),
		done:        make(chan struct{}),
		kick:        make(chan struct{}, 1),
		black:       make([]bool, r.PortsPerPlane),
	}
	for _, b := range r.Blackhole {
		e.black[b] = true
	}
	if r.Secret != nil {
		t, err := auth.New(auth.Config{Secret: r.Secret, MaxConns: r.Core.MaxConns})
		if err != nil {
			return nil, fmt.Errorf("udp: authentication: %w", err)
		}
		e.auth = t
	}
	if err := e.openSockets(); err != nil {
		e.release()
		return nil, err
	}
	blob, err := EncodeAddrs(nil, e.addrs)
	if err != nil {
		e.release()
		return nil, err
	}
	r.Core.Addr = blob
	if r.Core.CC.ConnWindow <= 0 {
		r.Core.CC.ConnWindow = max(e.socks[0].RcvBuf()/2, 4*r.MaxDatagram)
	}
	seed, err := seedBytes(r.Seed)
	if err != nil {
		e.release()
		return nil, err
	}
	e.core = transport.NewEndpoint(r.Core, rand.New(rand.NewChaCha8(seed)))
	e.cfg.Core = e.core.Config() // the core's defaults filled in too
	e.dropRng = rand.New(rand.NewPCG(binary.LittleEndian.Uint64(seed[:8]), binary.LittleEndian.Uint64(seed[8:16])))
	e.rx.init()
	e.tx.init(len(e.socks), r.MaxDatagram)
	go e.run()
	return e, nil
}

// seedBytes expands Config.Seed, or draws 32 random bytes when it is 0.
func seedBytes(s uint64) ([32]byte, error) {
	var b [32]byte
	if s == 0 {
		if _, err := crand.Read(b[:]); err != nil {
			return b, fmt.Errorf("udp: random seed: %w", err)
		}
		return b, nil
	}
	x := rand.New(rand.NewPCG(s, s^0x6a09e667f3bcc908))
	for i := 0; i < 32; i += 8 {
		binary.LittleEndian.PutUint64(b[i:], x.Uint64())
	}
	return b, nil
}

// openSockets opens PortsPerPlane sockets per plane, registers them with a
// new poller and creates the loop's timer.
func (e *Endpoint) openSockets() error {
	r := &e.cfg
	n := r.PortsPerPlane
	for p, a := range r.Addrs {
		for i := 0; i < n; i++ {
			port := 0
			switch {
			case r.Port != 0:
				port = r.Port + i
			case p > 0:
				port = int(e.socks[i].LocalAddr().Port()) // same number as plane 0 where free
			}
			s, err := sockio.Open(sockio.Config{Local: netip.AddrPortFrom(a, uint16(port))})
			if err != nil && r.Port == 0 && port != 0 {
				s, err = sockio.Open(sockio.Config{Local: netip.AddrPortFrom(a, 0)})
			}
			if err != nil {
				return fmt.Errorf("udp: plane %d socket %d: %w", p, i, err)
			}
			e.socks = append(e.socks, s)
		}
		e.addrs = append(e.addrs, e.socks[p*n].LocalAddr())
		e.listening = append(e.listening, int32(p*n))
	}
	var err error
	if e.poller, err = sockio.NewPoller(); err != nil {
		return err
	}
	// The loop mutes the listening sockets and its timer while it parks
	// (loop.go): peers address every datagram to a listening socket, so
	// the others (the paths' source ports, which send) seldom turn
	// readable, and leaving them in spares each mute and unmute
	// 2 × (PortsPerPlane-1) epoll_ctl calls per plane; that was 66 of the
	// 75 epoll_ctl per 4-rank 1 MiB all-to-all (perf stat -e
	// 'syscalls:sys_enter_epoll_ctl' of the collectives' BusBW benchmark).
	// Left in, they keep the kernel's write-space wake-up attempt per
	// datagram sent (Poller.arm); the trade measured faster and cheaper
	// per byte all the same (docs/results.md).
	for tag, s := range e.socks {
		add := e.poller.AddAlways
		if tag%n == 0 {
			add = e.poller.Add
		}
		if err := add(s.Fd(), int32(tag)); err != nil {
			return err
		}
	}
	if e.timer, err = newTimerFD(); err != nil {
		return err
	}
	return e.poller.Add(e.timer.fd, timerTag)
}

// release closes the poller, timer and sockets (the loop's last act, or a
// failed Listen's cleanup).
func (e *Endpoint) release() {
	if e.poller != nil {
		e.poller.Close()
	}
	if e.timer != nil {
		e.timer.close()
	}
	for _, s := range e.socks {
		s.Close()
	}
}

// Addrs returns the listening address of every plane, to hand to peers.
func (e *Endpoint) Addrs() []netip.AddrPort { return append([]netip.AddrPort(nil), e.addrs...) }

// Config returns the effective configuration (defaults filled in, the core's
// included).
func (e *Endpoint) Config() Config { return e.cfg.Config }

// Dial connects to the endpoint whose per-plane listening addresses are
// remote (one per local plane, of the same address family). It returns when
// the handshake completes, fails (within Core.HandshakeTimeout) or ctx ends.
// A peer that refuses the connection (a closing peer refuses every one)
// fails it with ErrRefused, with a secret as without; once Close has been
// called, Dial fails with ErrEndpointClosed. Errors name the peer
// (PeerError), those of ctx included.
func (e *Endpoint) Dial(ctx context.Context, remote []netip.AddrPort) (*Conn, error) {
	if len(remote) != len(e.addrs) {
		return nil, fmt.Errorf("udp: dial needs %d plane addresses (one per local plane), got %d", len(e.addrs), len(remote))
	}
	remote = append([]netip.AddrPort(nil), remote...)
	for i, a := range remote {
		a = netip.AddrPortFrom(a.Addr().Unmap(), a.Port())
		remote[i] = a
		if !a.IsValid() || a.Port() == 0 || a.Addr().IsUnspecified() {
			return nil, fmt.Errorf("udp: dial plane %d: invalid remote address %v", i, a)
		}
		if a.Addr().Is6() != e.addrs[i].Addr().Is6() {
			return nil, fmt.Errorf("udp: dial plane %d: remote %v and local %v differ in address family", i, a, e.addrs[i])
		}
	}
	blob, err := EncodeAddrs(nil, remote)
	if err != nil {
		return nil, err
	}
	if e.closing.Load() {
		return nil, peerErr(remote, ErrEndpointClosed)
	}
	c := newConn(e, remote)
	c.dialed = make(chan error, 1)
	if err := e.enqueue(command{kind: cmdDial, conn: c, blob: blob}); err != nil {
		return nil, peerErr(remote, err)
	}
	select {
	case err := <-c.dialed:
		if err != nil {
			return nil, err
		}
		return c, nil
	case <-ctx.Done():
		e.enqueue(command{kind: cmdClose, conn: c})
		return nil, peerErr(remote, ctx.Err())
	case <-e.done:
		return nil, peerErr(remote, ErrEndpointClosed)
	}
}

// Accept returns the next connection a peer opened to this endpoint, oldest
// first. At most 256 accepted connections wait for Accept; more are
// refused. A connection that ends while it waits (its peer closed it, or
// gave it up) leaves the queue and frees its place: Accept never returns
// one that had ended before it was taken. Once Close has been called
// Accept fails with ErrEndpointClosed, also while connections accepted
// before still wait (Close closes them).
func (e *Endpoint) Accept(ctx context.Context) (*Conn, error) {
	for {
		if e.closing.Load() {
			return nil, ErrEndpointClosed
		}
		if c := e.takeAccepted(); c != nil {
			if e.closing.Load() {
				return nil, ErrEndpointClosed
			}
			return c, nil
		}
		select {
		case <-e.acceptReady:
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-e.done:
			return nil, ErrEndpointClosed
		}
	}
}

// queueAccepted appends c, a connection the core accepted, to the accept
// queue and reports whether there was room. It runs on the datapath.
func (e *Endpoint) queueAccepted(c *Conn) bool {
	e.acceptMu.Lock()
	defer e.acceptMu.Unlock()
	if len(e.accepted) >= acceptQueueLen {
		return false
	}
	e.accepted = append(e.accepted, c)
	c.queued = true
	e.signalAccept()
	return true
}

// takeAccepted removes and returns the oldest connection of the accept
// queue, nil when it is empty. Every connection there lives: one that
// ends leaves the queue before it is marked gone (connGone).
func (e *Endpoint) takeAccepted() *Conn {
	e.acceptMu.Lock()
	defer e.acceptMu.Unlock()
	if len(e.accepted) == 0 {
		return nil
	}
	c := e.accepted[0]
	e.accepted[0] = nil
	e.accepted = e.accepted[1:]
	c.queued = false
	if len(e.accepted) > 0 {
		e.signalAccept() // for another waiting Accept
	}
	return c
}

// unqueueAccepted removes c from the accept queue if it waits there, which
// frees its place for another dialer. It runs on the datapath.
func (e *Endpoint) unqueueAccepted(c *Conn) {
	e.acceptMu.Lock()
	defer e.acceptMu.Unlock()
	if !c.queued {
		return
	}
	c.queued = false
	if i := slices.Index(e.accepted, c); i >= 0 {
		e.accepted = slices.Delete(e.accepted, i, i+1)
	}
}

// signalAccept leaves acceptReady's token for a waiting Accept; the caller
// holds acceptMu.
func (e *Endpoint) signalAccept() {
	select {
	case e.acceptReady <- struct{}{}:
	default:
	}
}

// Close closes every connection (telling the peers), stops the event loop and
// closes the sockets. Outstanding requests fail with ErrEndpointClosed or the
// connection's close error, either wrapped in a PeerError that names the
// peer. It returns when everything is released, within about
// 4 × Core.HandshakeRetry.
func (e *Endpoint) Close() error {
	if !e.closing.Swap(true) {
		if err := e.enqueue(command{kind: cmdShutdown}); err != nil {
			<-e.done
			return nil
		}
	}
	<-e.done
	return nil
}

// SetConcurrentSenders declares the most connections the application lets
// send to the endpoint at once from now on (transport.Endpoint's
// SetConcurrentSenders; 0: unknown). It takes effect before any send or
// receive queued after it returns. Config().Core still reports the value
// the endpoint was opened with.
func (e *Endpoint) SetConcurrentSenders(k int) error {
	return e.enqueue(command{kind: cmdFunc, fn: func() { e.core.SetConcurrentSenders(k) }})
}

// Stats returns the endpoint's counters. Once the event loop has exited
// (Close), Core is the core's counters as the exit left them and Conns is
// 0, the exit having ended every connection; a call that meets the exit
// waits for it to end and reports the same, as Conn.Stats does.
func (e *Endpoint) Stats() EndpointStats {
	var s EndpointStats
	ran := e.applyAndWait(command{kind: cmdFunc, fn: func() {
		if e.finalCore != nil {
			// The exit runs the commands it found queued last,
			// once it has ended the connections.
			s = e.stoppedStats()
			return
		}
		s = e.driverStats()
		s.Core = e.core.Counters()
		s.Conns = e.core.NumConns()
	}})
	if !ran {
		// Refused by the exit, which records the core's counters
		// after it refuses commands: applyAndWait waited for its end.
		return e.stoppedStats()
	}
	return s
}

// driverStats returns the datapath's own counters, the fields of
// EndpointStats that need no turn of the loop to read.
func (e *Endpoint) driverStats() EndpointStats {
	return EndpointStats{
		RxDatagrams: e.counters.rxDatagrams.Load(),
		TxDatagrams: e.counters.txDatagrams.Load(),
		FaultDrops:  e.counters.faultDrops.Load(),
		SendErrors:  e.counters.sendErrors.Load(),
		TxDrops:     e.counters.txDrops.Load(),
		AuthDrops:   e.counters.authDrops.Load(),
	}
}

// stoppedStats returns the counters of an endpoint whose loop has exited
// (done is closed), or, on the exit's own turn, is ending (finalCore is
// set): the core's as the exit recorded them, and no connection.
func (e *Endpoint) stoppedStats() EndpointStats {
	s := e.driverStats()
	if e.finalCore != nil {
		s.Core = *e.finalCore
	}
	return s
}

// enqueue hands a command to the loop and wakes it if it sleeps. The wake-up
// happens under the lock so that it can never reach a poller the loop has
// already closed. Sends and receives take the fast path of enqueueFast.
func (e *Endpoint) enqueue(c command) error {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.stopped {
		return ErrEndpointClosed
	}
	e.cmds = append(e.cmds, c)
	e.nCmds.Add(1)
	e.wakeLocked()
	return nil
}

// wakeLocked wakes the loop if it sleeps in the poller or is parked; the
// caller holds e.mu.
func (e *Endpoint) wakeLocked() {
	if !e.stopped && e.sleeping.Load() {
		if err := e.poller.Wake(); err != nil && !errors.Is(err, sockio.ErrClosed) {
			e.logf("udp: wake event loop: %v", err)
		}
	}
	e.unpark()
}

// unpark ends a park of the loop (see run); a kick sent while it is not
// parked costs it one extra turn later.
func (e *Endpoint) unpark() {
	select {
	case e.kick <- struct{}{}:
	default:
	}
}

func (e *Endpoint) logf(format string, args ...any) {
	if e.cfg.Logf != nil {
		e.cfg.Logf(format, args...)
	}
}

// now is the loop's clock: monotonic nanoseconds, starting at one second so
// that no event happens at the core's "unset" time 0.
func (e *Endpoint) now() transport.Time {
	return transport.Time(time.Since(e.epoch)) + transport.Second
}
