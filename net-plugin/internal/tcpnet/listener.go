package tcpnet

import (
	"errors"
	"fmt"
	"io"
	"net"
	"net/netip"
	"os"
	"sync"
	"time"

	"golang.org/x/sys/unix"

	"github.com/metaroce/metaroce/net-plugin/internal/backend"
)

// maxPendingConns bounds the connections per listener that are half
// assembled or await their dialer's confirmation; more simultaneous
// strangers than this are refused. Connections whose dialer
// gave up, or that carry data before they are complete, do not count for
// long: see dropAbandonedLocked.
const maxPendingConns = 64

// maxDroppedConns bounds how many connection ids of recently dropped
// half-assembled connections a listener remembers (listener.dropped):
// four passes of dropAbandonedLocked at maxPendingConns each, far more
// than dialers left alive after their connection was dropped, while the
// memory stays a few kilobytes whatever a peer sends.
const maxDroppedConns = 4 * maxPendingConns

// listener accepts TCP sockets in a goroutine, groups them by connection id
// and hands complete connections, once their dialer confirmed them, to
// Accept through a buffered channel.
type listener struct {
	cfg    Config
	ln     *net.TCPListener
	handle []byte
	nonce  uint64
	ready  chan *recvConn
	done   chan struct{}

	mu      sync.Mutex
	err     error                      // first fatal accept error
	pending map[uint64]*[]*net.TCPConn // connID -> sockets by index
	// since holds when each connection of l.pending filed its first
	// socket, for dropAbandonedLocked's age limit.
	since map[uint64]time.Time
	// confirming holds the complete connections whose dialer's
	// connConfirmed has not been read yet (awaitConfirm), by connID.
	confirming map[uint64][]*net.TCPConn
	// dropped holds, by connID, when dropAbandonedLocked dropped each
	// half-assembled connection it dropped within the last twice
	// cfg.Timeout, at most maxDroppedConns of them: a later socket of
	// such a connection is refused (file) instead of opening a fresh one
	// under the same id (see rememberDroppedLocked).
	dropped map[uint64]time.Time
	closed  bool

	// Test hooks, nil except in tests; set before the first connection
	// and read under mu. answering runs in greet after a socket is filed
	// and before its answer is written; last tells whether the socket
	// completed its connection. settled runs once a complete connection
	// is queued for Accept (true) or dropped unconfirmed (false).
	answering func(last bool)
	settled   func(handedOut bool)
	// queueing runs once a connection is confirmed, before it is queued
	// for Accept.
	queueing func()
	// now reads the clock for the pending connections' ages (time.Now
	// outside tests).
	now func() time.Time
}

func newListener(cfg Config, at netip.AddrPort, nonce uint64) (*listener, error) {
	ln, err := net.ListenTCP("tcp", net.TCPAddrFromAddrPort(at))
	if err != nil {
		return nil, fmt.Errorf("tcpnet: listen on %v: %w", at, err)
	}
	bound := ln.Addr().(*net.TCPAddr).AddrPort()
	h := listenHandle{Addr: netip.AddrPortFrom(at.Addr(), bound.Port()), Socks: cfg.Socks, Nonce: nonce}
	hb, err := h.Append(nil)
	if err != nil {
		_ = ln.Close()
		return nil, err
	}
	l := &listener{cfg: cfg, ln: ln, handle: hb, nonce: nonce, ready: make(chan *recvConn, 16), done: make(chan struct{}), pending: map[uint64]*[]*net.TCPConn{}, since: map[uint64]time.Time{}, confirming: map[uint64][]*net.TCPConn{}, dropped: map[uint64]time.Time{}, now: time.Now}
	go l.acceptLoop()
	return l, nil
}

func (l *listener) Handle() []byte { return l.handle }

func (l *listener) acceptLoop() {
	for {
		c, err := l.ln.AcceptTCP()
		if err != nil {
			l.mu.Lock()
			if !l.closed && l.err == nil {
				l.err = fmt.Errorf("tcpnet: accept on %v: %w", l.ln.Addr(), err)
			}
			l.mu.Unlock()
			return
		}
		go l.greet(c)
	}
}

// greet reads the hello of one socket (bounded by cfg.Timeout), answers it
// (helloAccepted, helloStale or helloRefused) and files the socket under
// its connection; the last socket completes the connection, which is
// handed out once its dialer confirms it (awaitConfirm). A socket
// whose first bytes are not a hello of this version is closed unanswered:
// its other end is no dialer of this version and expects no answer.
func (l *listener) greet(c *net.TCPConn) {
	var buf [helloLen]byte
	_ = c.SetReadDeadline(time.Now().Add(l.cfg.Timeout))
	var h hello
	if _, err := io.ReadFull(c, buf[:]); err != nil {
		_ = c.Close()
		return
	}
	if _, err := parseHello(&h, buf[:]); err != nil {
		_ = c.Close()
		return
	}
	if h.Nonce != l.nonce || h.Socks != l.cfg.Socks {
		l.refuse(c, helloStale)
		return
	}
	_ = c.SetReadDeadline(time.Time{})
	tuneSocket(c, l.cfg.Timeout)

	complete, verdict := l.file(c, h)
	if verdict != helloAccepted {
		l.refuse(c, verdict)
		return
	}
	l.mu.Lock()
	answering := l.answering
	l.mu.Unlock()
	if answering != nil {
		answering(complete != nil)
	}
	// The answer goes out after the socket is filed, so that it is never
	// accepted and then dropped. If it cannot be written the dialer is
	// gone, and it confirms nothing.
	_ = l.answer(c, helloAccepted)
	if complete != nil {
		l.awaitConfirm(h.ConnID, complete)
	}
}

// awaitConfirm reads the dialer's connConfirmed on socket 0 of the
// complete connection id (socks, held in l.confirming) and then queues the
// connection for Accept. A dialer whose connect ended before it read the
// acceptance of its last socket (its deadline, an abort) closes its
// sockets instead of confirming: the read ends at the end of the stream,
// and the connection, whose sender is gone, is dropped rather than handed
// to NCCL to fail on first use. So is one that answers another byte, or
// nothing within twice cfg.Timeout: a live dialer confirms as soon as the
// acceptance reaches it, and each of the two bytes is delivered within
// cfg.Timeout or its socket fails (TCP_USER_TIMEOUT), so the wait never
// cuts off a connection its dialer took, while one whose dialer stalls
// does not hold its slot for ever. Nothing else reads socket 0 meanwhile:
// the connection left l.pending, whose sockets dropAbandonedLocked peeks.
func (l *listener) awaitConfirm(id uint64, socks []*net.TCPConn) {
	c := socks[0]
	wait := 2 * l.cfg.Timeout
	_ = c.SetReadDeadline(time.Now().Add(wait))
	var b [1]byte
	_, err := io.ReadFull(c, b[:])
	_ = c.SetReadDeadline(time.Time{})
	l.mu.Lock()
	_, mine := l.confirming[id]
	delete(l.confirming, id)
	settled, queueing := l.settled, l.queueing
	l.mu.Unlock()
	if !mine {
		return // Close took the connection and closed its sockets
	}
	if err != nil || b[0] != connConfirmed {
		switch {
		case errors.Is(err, os.ErrDeadlineExceeded):
			l.cfg.logf("NET/MetaRoCE : tcpnet: peer %v did not confirm its connection to listener %v within %v of the acceptance of its sockets: dropped the connection", c.RemoteAddr(), l.ln.Addr(), wait)
		case err != nil:
			l.cfg.logf("NET/MetaRoCE : tcpnet: peer %v gave up its connect to listener %v after all its sockets were accepted (its connect timed out or was aborted there; %v): dropped the connection", c.RemoteAddr(), l.ln.Addr(), err)
		default:
			l.cfg.logf("NET/MetaRoCE : tcpnet: peer %v answered the acceptance of its connection to listener %v with %#02x instead of a confirmation (not a MetaRoCE tcp dialer of this version, or a faulty one): dropped the connection", c.RemoteAddr(), l.ln.Addr(), b[0])
		}
		for _, s := range socks {
			_ = s.Close()
		}
		if settled != nil {
			settled(false)
		}
		return
	}
	if queueing != nil {
		queueing()
	}
	rc := newRecvConn(socks)
	select {
	case l.ready <- rc:
		// Close may have come between the check above and the send, and
		// drained the queue before rc joined it; select picks either
		// case when both are ready. Close shuts l.done before it
		// drains, so a send that came after its drain sees l.done shut
		// here and drains the queue itself.
		select {
		case <-l.done:
			l.drainReady()
		default:
		}
	case <-l.done:
		_ = rc.Close()
	}
	if settled != nil {
		settled(true)
	}
}

// drainReady closes the connections queued for Accept, for a listener
// that closed.
func (l *listener) drainReady() {
	for {
		select {
		case rc := <-l.ready:
			_ = rc.Close()
		default:
			return
		}
	}
}

// file puts socket c (whose hello is h) into its connection's slot. It
// returns helloAccepted, with the connection's sockets when c was the
// last one missing, or the refusal to send. A complete connection moves
// from l.pending to l.confirming, where it keeps its slot until
// awaitConfirm settles it. The lines dropAbandonedLocked collects are
// logged once l.mu is released.
func (l *listener) file(c *net.TCPConn, h hello) (complete []*net.TCPConn, verdict byte) {
	var lines []string
	l.mu.Lock()
	defer func() {
		l.mu.Unlock()
		for _, line := range lines {
			l.cfg.logf("%s", line)
		}
	}()
	socks, ok := l.pending[h.ConnID]
	if !ok {
		if _, dup := l.confirming[h.ConnID]; l.closed || dup {
			return nil, helloRefused
		}
		now := l.now()
		if at, gone := l.dropped[h.ConnID]; gone && now.Sub(at) <= 2*l.cfg.Timeout {
			lines = append(lines, fmt.Sprintf("NET/MetaRoCE : tcpnet: refused socket %d of %d from peer %v on listener %v: its connection was dropped %v ago, half set up for longer than twice the connect timeout (%v); is METAROCE_TIMEOUT_MS the same on every rank? (a dialer whose timeout is longer may open its sockets that late)", h.Index+1, h.Socks, c.RemoteAddr(), l.ln.Addr(), now.Sub(at).Round(time.Millisecond), l.cfg.Timeout))
			return nil, helloRefused
		}
		l.dropAbandonedLocked(now, &lines)
		if len(l.pending)+len(l.confirming) >= maxPendingConns {
			return nil, helloRefused
		}
		s := make([]*net.TCPConn, h.Socks)
		socks = &s
		l.pending[h.ConnID] = socks
		l.since[h.ConnID] = now
	}
	if (*socks)[h.Index] != nil {
		return nil, helloRefused
	}
	(*socks)[h.Index] = c
	for _, s := range *socks {
		if s == nil {
			return nil, helloAccepted
		}
	}
	delete(l.pending, h.ConnID)
	delete(l.since, h.ConnID)
	l.confirming[h.ConnID] = *socks
	return *socks, helloAccepted
}

// dropAbandonedLocked closes and forgets the half-assembled connections
// that can never complete: one of whose sockets its dialer has given up,
// one of whose sockets carries bytes, or one that is older than
// twice cfg.Timeout. It appends a line for cfg.Logf to *lines for each
// drop worth telling (not for a dialer that gave up, which is ordinary),
// for the caller to log once it has released l.mu: cfg.Logf is NCCL's
// logger in the plugin, and a pass may drop up to maxPendingConns
// connections, so logging under l.mu would hold up every other socket's
// hello and every confirmation for as long as those lines take.
//
// A dialer that fails or is aborted closes the sockets it holds, and a
// dead dialer's kernel does, or (host gone) the socket's keepalive and
// TCP_USER_TIMEOUT turn the silence into a socket error within about
// cfg.Timeout. A dialer of this version writes nothing after a hello until
// every socket of its connection is accepted, which takes the connection
// out of l.pending first; bytes waiting on a socket still here come from
// no such dialer (or a faulty one), and they would also hide its end of
// the stream from the peek for good, the connection holding its slot even
// after its peer closed. A dialer whose sockets all stay open and silent
// is alive or stalled: a live one opens every socket of a connection
// within its connect timeout or gives them all up, so, where that timeout
// is cfg.Timeout as it should be (METAROCE_TIMEOUT_MS, the same on every
// rank), a connection still missing sockets twice that long after its
// first arrived belongs to a peer that will not finish it. A dialer whose
// timeout is longer may still be alive and open its last socket later:
// the dropped connection's id is remembered (rememberDroppedLocked) and
// that socket refused, so that the connect fails naming the likely cause,
// instead of the socket opening a fresh connection under the same id,
// accepted, and the dialer confirming a connection whose other sockets
// the listener closed.
//
// Without this, such connections would stay until Close, and
// maxPendingConns of them would make the listener refuse every later
// connection. It runs, at now, when a socket opens a new connection, so
// it needs no goroutine or timer of its own. The caller holds l.mu.
func (l *listener) dropAbandonedLocked(now time.Time, lines *[]string) {
	for id, at := range l.dropped {
		if now.Sub(at) > 2*l.cfg.Timeout {
			delete(l.dropped, id)
		}
	}
	for id, socks := range l.pending {
		drop := false
		if age := now.Sub(l.since[id]); age > 2*l.cfg.Timeout {
			drop = true
			*lines = append(*lines, fmt.Sprintf("NET/MetaRoCE : tcpnet: dropped a connection from peer %v half set up on listener %v: %d of its %d sockets arrived, the first %v ago, and the connect timeout is %v (a stalled peer, a peer whose METAROCE_TIMEOUT_MS is longer than this side's, or not a MetaRoCE tcp dialer)", peerOf(*socks), l.ln.Addr(), filed(*socks), len(*socks), age.Round(time.Millisecond), l.cfg.Timeout))
		}
		for _, s := range *socks {
			if drop {
				break
			}
			if s == nil {
				continue
			}
			switch peek(s) {
			case peekEnded:
				drop = true
			case peekData:
				drop = true
				*lines = append(*lines, fmt.Sprintf("NET/MetaRoCE : tcpnet: dropped a connection from peer %v half set up on listener %v: it sent data before all %d of its sockets had joined (not a MetaRoCE tcp dialer of this version, or a faulty one)", s.RemoteAddr(), l.ln.Addr(), len(*socks)))
			}
		}
		if !drop {
			continue
		}
		for _, s := range *socks {
			if s != nil {
				_ = s.Close()
			}
		}
		delete(l.pending, id)
		delete(l.since, id)
		l.rememberDroppedLocked(id, now)
	}
}

// rememberDroppedLocked records that the half-assembled connection id was
// dropped at now, for file to refuse its later sockets for twice
// cfg.Timeout: that covers a dialer whose connect timeout is up to four
// times the listener's, as the first of its sockets arrived more than
// twice cfg.Timeout before the drop. (Past that, the dialer finds the
// sockets the listener closed at the end of their stream before it
// confirms: see dialer.confirmLocked.) With maxDroppedConns remembered, the
// oldest is forgotten, so that the memory stays bounded whatever peers
// do. The caller holds l.mu.
func (l *listener) rememberDroppedLocked(id uint64, now time.Time) {
	if len(l.dropped) >= maxDroppedConns {
		var oldest uint64
		var first time.Time
		for d, at := range l.dropped {
			if first.IsZero() || at.Before(first) {
				oldest, first = d, at
			}
		}
		delete(l.dropped, oldest)
	}
	l.dropped[id] = now
}

// peerOf is the remote address of a half-assembled connection's first
// socket that arrived.
func peerOf(socks []*net.TCPConn) net.Addr {
	for _, s := range socks {
		if s != nil {
			return s.RemoteAddr()
		}
	}
	return nil
}

// filed counts the sockets of a half-assembled connection that arrived.
func filed(socks []*net.TCPConn) int {
	n := 0
	for _, s := range socks {
		if s != nil {
			n++
		}
	}
	return n
}

// peekResult is what a non-blocking peek finds on a socket.
type peekResult int

const (
	// peekNothing: nothing to read yet; the other end may still be there.
	peekNothing peekResult = iota
	// peekEnded: the other end closed the socket (end of stream with
	// nothing before it), or the socket failed.
	peekEnded
	// peekData: at least one byte waits to be read.
	peekData
)

// peek looks at c without waiting and without consuming anything, so that
// whoever reads c later reads every byte that was waiting.
func peek(c *net.TCPConn) peekResult {
	raw, err := c.SyscallConn()
	if err != nil {
		return peekEnded
	}
	var n int
	var perr error
	var b [1]byte
	err = raw.Read(func(fd uintptr) bool {
		n, _, perr = unix.Recvfrom(int(fd), b[:], unix.MSG_PEEK|unix.MSG_DONTWAIT)
		return true // one look, never a wait
	})
	switch {
	case err != nil:
		return peekEnded
	case perr == nil && n > 0:
		return peekData
	case perr == nil:
		return peekEnded
	case errors.Is(perr, unix.EAGAIN), errors.Is(perr, unix.EINTR):
		return peekNothing
	}
	return peekEnded
}

// answer writes the one-byte answer to a hello, bounded by cfg.Timeout.
func (l *listener) answer(c *net.TCPConn, verdict byte) error {
	_ = c.SetWriteDeadline(time.Now().Add(l.cfg.Timeout))
	_, err := c.Write([]byte{verdict})
	_ = c.SetWriteDeadline(time.Time{})
	return err
}

// refuse answers a hello with a refusal and closes the socket. The hello
// has been read in full, so the close sends a FIN after the answer rather
// than a reset that could overtake it.
func (l *listener) refuse(c *net.TCPConn, verdict byte) {
	_ = l.answer(c, verdict)
	_ = c.Close()
}

// Accept returns a connection if one is complete; it never blocks.
func (l *listener) Accept() (backend.RecvConn, error) {
	select {
	case rc := <-l.ready:
		return rc, nil
	default:
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.closed {
		return nil, fmt.Errorf("tcpnet: accept on closed listener: %w", backend.ErrInternal)
	}
	return nil, l.err
}

// Close stops accepting and drops half-assembled, unconfirmed and
// unaccepted connections.
func (l *listener) Close() error {
	l.mu.Lock()
	if l.closed {
		l.mu.Unlock()
		return nil
	}
	l.closed = true
	close(l.done)
	for id, socks := range l.pending {
		for _, s := range *socks {
			if s != nil {
				_ = s.Close()
			}
		}
		delete(l.pending, id)
		delete(l.since, id)
	}
	for id, socks := range l.confirming {
		for _, s := range socks {
			_ = s.Close()
		}
		delete(l.confirming, id)
	}
	l.mu.Unlock()
	err := l.ln.Close()
	l.drainReady()
	if errors.Is(err, net.ErrClosed) {
		err = nil
	}
	return err
}
