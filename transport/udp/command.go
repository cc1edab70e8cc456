package udp

import (
	"errors"
	"fmt"

	"github.com/metaroce/metaroce/transport"
	"github.com/metaroce/metaroce/transport/auth"
)

// cmdKind says what a user call asks of the event loop.
type cmdKind uint8

const (
	cmdDial cmdKind = iota + 1
	cmdSend
	cmdRecv
	cmdClose
	cmdRelease // release a flow (transport.Endpoint.ReleaseFlow)
	cmdAbort   // abort a flow (transport.Endpoint.AbortFlow), then fn
	cmdShutdown
	cmdFunc // run fn on the loop (statistics)
)

// command is one queued user call.
type command struct {
	kind cmdKind
	conn *Conn
	req  *Request
	flow uint32
	tag  uint32
	blob []byte // cmdDial: the remote's address blob
	fn   func()
}

// recvRef locates the buffer behind a receive cookie.
type recvRef struct {
	req *Request
	idx int
}

// runCommands takes the queued commands and applies them to the core. It
// reports whether there were any.
func (e *Endpoint) runCommands(now transport.Time) bool {
	if e.nCmds.Load() == 0 {
		return false
	}
	e.mu.Lock()
	cmds := e.cmds
	e.cmds = e.spare[:0]
	e.nCmds.Store(0)
	e.mu.Unlock()
	for i := range cmds {
		e.apply(now, &cmds[i])
		cmds[i] = command{}
	}
	e.spare = cmds[:0]
	return len(cmds) > 0
}

func (e *Endpoint) apply(now transport.Time, cmd *command) {
	c := cmd.conn
	switch cmd.kind {
	case cmdDial:
		if e.stopping {
			// Shutdown has closed every connection already: one
			// opened now would outlive it and be dropped at the
			// deadline without a word to the peer.
			c.gone = true
			c.err = peerErr(c.remote, ErrEndpointClosed)
			close(c.closed)
			c.dialed <- c.err
			return
		}
		p := e.peers.known(c.remote, cmd.blob)
		p.refs++
		id, err := e.core.Dial(now, p.id)
		if err != nil {
			e.peers.release(p.id)
			c.gone = true
			c.err = peerErr(c.remote, err)
			close(c.closed)
			c.dialed <- c.err
			return
		}
		c.id, c.rid, c.dialing = id, p.id, true
		e.conns[id] = c
	case cmdSend:
		r := cmd.req
		if c.gone {
			r.finish(c.goneErr())
			return
		}
		e.cookie++
		e.sendOps[e.cookie] = r
		if err := e.core.Send(now, c.id, cmd.flow, uint64(len(r.send)), cmd.tag, e.cookie); err != nil {
			delete(e.sendOps, e.cookie)
			r.finish(peerErr(c.remote, err))
		}
	case cmdRecv:
		r := cmd.req
		if c.gone {
			r.finish(c.goneErr())
			return
		}
		n := len(r.recv)
		first := e.cookie + 1
		for i, b := range r.recv {
			e.cookie++
			e.recvOps[e.cookie] = recvRef{req: r, idx: i}
			e.recvBuf[i] = transport.RecvBuf{Cap: uint64(len(b)), Tag: r.tags[i], Cookie: e.cookie}
		}
		if err := e.core.PostRecv(now, c.id, cmd.flow, e.recvBuf[:n]); err != nil {
			for k := first; k <= e.cookie; k++ {
				delete(e.recvOps, k)
			}
			r.finish(peerErr(c.remote, err))
		}
	case cmdClose:
		if !c.gone && c.id != 0 {
			c.closing = true
			e.core.Close(now, c.id)
		}
	case cmdRelease:
		if !c.gone && c.id != 0 {
			_ = e.core.ReleaseFlow(now, c.id, cmd.flow)
		}
	case cmdAbort:
		if !c.gone && c.id != 0 {
			_ = e.core.AbortFlow(now, c.id, cmd.flow)
			e.drainEvents() // the flow's requests finish before fn
		}
		cmd.fn()
	case cmdShutdown:
		if !e.stopping {
			e.stopping = true
			e.core.Shutdown(now)
			e.stopDeadline = now + 4*e.core.Config().HandshakeRetry + 50*transport.Millisecond
		}
	case cmdFunc:
		cmd.fn()
	}
}

// goneErr is the error of calls on a connection that is gone.
func (c *Conn) goneErr() error {
	if c.err != nil {
		return c.err
	}
	return peerErr(c.remote, transport.ErrClosed)
}

// drainEvents hands the core's events to the requests and connections they
// concern.
func (e *Endpoint) drainEvents() {
	for {
		ev, ok := e.core.PollEvent()
		if !ok {
			e.reportConnected()
			return
		}
		switch ev.Kind {
		case transport.EvConnected:
			if c := e.conns[ev.Conn]; c != nil && c.dialing {
				if c.refusedEarly {
					// Dial hears of it when the drain ends: the
					// replayed CLOSE (a refusal, see refuse)
					// fails it instead.
					e.connected = append(e.connected, c)
				} else {
					// A CLOSE that came after the HELLO_ACK is
					// not a refusal: the peer accepted and then
					// closed, and the connection's users see
					// that as ErrClosed.
					c.dialing = false
					c.dialed <- nil
				}
			}
		case transport.EvAccepted:
			e.onAccepted(ev)
		case transport.EvSendDone:
			r := e.sendOps[ev.Cookie]
			if r == nil {
				continue
			}
			delete(e.sendOps, ev.Cookie)
			if ev.Err == nil {
				r.sizes[0] = int(ev.Len)
			} else {
				e.goneBeforeOps(ev)
			}
			r.finish(peerErr(r.conn.remote, ev.Err))
		case transport.EvRecvDone:
			ref, ok := e.recvOps[ev.Cookie]
			if !ok {
				continue
			}
			delete(e.recvOps, ev.Cookie)
			r := ref.req
			if ev.Err != nil {
				e.goneBeforeOps(ev)
				if r.err == nil {
					r.err = peerErr(r.conn.remote, ev.Err)
				}
			} else {
				r.sizes[ref.idx] = int(ev.Len)
			}
			r.left--
			if r.left == 0 {
				r.finish(nil)
			}
		case transport.EvClosed:
			if e.auth != nil {
				// Forget its keys once a transmit pass has sent
				// everything the core owed (turnOut): the datagrams
				// it may still owe the peer after this event (the
				// reply to its CLOSE, the CLOSEs of a connection that
				// gave it up) are sealed in this turn's transmit
				// pass, or a later one where the budget put them
				// off. Also those of a connection refused before it
				// had a Conn (onAccepted), whose sealed HELLO_ACK
				// installed keys all the same: kept, each such
				// refusal took one of the key table's MaxConns
				// places for ever, until the endpoint could seal no
				// handshake at all.
				e.laterForget = append(e.laterForget, uint32(ev.Conn))
			}
			c := e.conns[ev.Conn]
			if c == nil {
				continue
			}
			delete(e.conns, ev.Conn)
			if ev.Final != nil {
				c.final = ev.Final
			}
			// Keep the peer's addresses as long as its keys, for
			// the same datagrams.
			e.laterRelease = append(e.laterRelease, c.rid)
			err := ev.Err
			if err == nil {
				err = transport.ErrClosed
			}
			if c.dialing {
				err = e.dialFailure(c, err)
			}
			e.connGone(c, peerErr(c.remote, err))
		}
	}
}

// reportConnected tells the Dial of every connection in e.connected that
// is still up that it succeeded.
func (e *Endpoint) reportConnected() {
	for i, c := range e.connected {
		if c.dialing && !c.gone {
			c.dialing = false
			c.dialed <- nil
		}
		e.connected[i] = nil
	}
	e.connected = e.connected[:0]
}

// dialFailure is the error a Dial returns for err, the core's reason why
// the connection ended before Dial returned, with what the core cannot
// know added: that a peer which closes the connection during the
// handshake refused it, and that with authentication on a handshake that
// times out may meet a peer holding another secret, since such a peer
// drops the HELLO without an answer (an unauthenticated refusal could be
// forged by anyone). A handshake that the endpoint's Close ends fails
// with ErrEndpointClosed, as Dial says of every Dial once Close has been
// called: the core's Shutdown gives it the bare ErrClosed, which reads as
// the peer or a Conn.Close having closed it.
func (e *Endpoint) dialFailure(c *Conn, err error) error {
	switch {
	case errors.Is(err, transport.ErrClosed) && !c.closing && !e.stopping:
		return fmt.Errorf("%w (it closed the connection during the handshake; its log says why, e.g. plane addresses that do not match its planes, a full accept queue, or its endpoint closing): %w", ErrRefused, err)
	case errors.Is(err, transport.ErrClosed) && !c.closing && e.stopping:
		return fmt.Errorf("%w (it was closed while the handshake ran): %w", ErrEndpointClosed, err)
	case errors.Is(err, transport.ErrHandshakeTimeout) && e.auth != nil:
		return fmt.Errorf("%w; or the peer holds a different secret, or none: it drops a HELLO it cannot authenticate without answering, and every rank needs the same %s", err, auth.EnvSecret)
	case errors.Is(err, transport.ErrHandshakeTimeout):
		return fmt.Errorf("%w; or the peer requires authentication (%s) and this endpoint has no secret", err, auth.EnvSecret)
	}
	return err
}

// goneBeforeOps marks the connection of ev, a request's failure, gone when
// the core has dropped that connection already: the core fails every
// request of a connection that ends before its EvClosed, and a caller woken
// by the first failure must find the connection gone, so that its next Send
// or Recv fails at once with the same error instead of being queued on a
// dead connection. The EvClosed that follows in this drain finds it gone
// and only forgets it. A connection that lives on (a flow aborted, a
// message too large, a local Close still lingering) is left alone.
func (e *Endpoint) goneBeforeOps(ev transport.Event) {
	c := e.conns[ev.Conn]
	if c == nil || c.gone || c.dialing {
		return
	}
	if e.core.HasConn(ev.Conn) {
		return
	}
	e.connGone(c, peerErr(c.remote, ev.Err))
}

// connGone marks c gone with err and wakes whoever waits on it. A
// connection still waiting for Accept leaves the accept queue first, so
// that Accept never takes it once it is gone and its place is free for
// another dialer.
func (e *Endpoint) connGone(c *Conn, err error) {
	if c.gone {
		return
	}
	e.unqueueAccepted(c)
	c.gone = true
	c.err = err
	close(c.closed)
	if c.dialing {
		c.dialing = false
		c.dialed <- err
	}
}

// refuse closes a connection the core accepted. Without a secret the CLOSE
// reaches the dialer during its handshake, and its Dial fails. With one,
// the dialer can open nothing of the connection's before the HELLO_ACK:
// sealing the HELLO_ACK installs here the keys the CLOSE is sealed with,
// and opening it installs them at the dialer. So the close waits for the
// turn's transmit pass, which seals the HELLO_ACK and holds it back
// (holdRefusedAck); the CLOSE leaves first and the HELLO_ACK right behind
// it (laterRefuse, sendHeld). The dialer keeps the CLOSE it cannot open
// yet, opens it right after the HELLO_ACK (stashEarly), and both reach its
// core in one turn: its Dial fails with ErrRefused instead of returning a
// connection that closes at once, or waiting out HandshakeTimeout. Both
// ways need the refusal made before the HELLO_ACK is polled: no transmit
// pass may run between the HELLO and the drain of its EvAccepted (see
// readSocket).
func (e *Endpoint) refuse(id transport.ConnID) {
	if e.auth == nil {
		e.core.Close(e.now(), id)
		return
	}
	e.laterRefuse = append(e.laterRefuse, id)
}

// onAccepted makes a Conn for a connection a peer opened and queues it for
// Accept, or refuses it when the endpoint is closing, the peer's addresses
// are unusable or the queue is full.
func (e *Endpoint) onAccepted(ev transport.Event) {
	if e.stopping {
		// Shutdown closed the connections there were; this one would
		// be dropped at its deadline without a word to the peer, whose
		// Dial would have succeeded.
		e.logf("udp: refusing connection %d: the endpoint is closing", ev.Conn)
		e.refuse(ev.Conn)
		return
	}
	p := e.peers.byID[ev.Remote]
	if p == nil || p.transient || len(p.addrs) != len(e.addrs) {
		e.logf("udp: refusing connection %d: the peer's HELLO carried no usable per-plane addresses for %d planes", ev.Conn, len(e.addrs))
		e.refuse(ev.Conn)
		return
	}
	c := newConn(e, p.addrs)
	c.id, c.rid = ev.Conn, p.id
	p.refs++
	e.conns[c.id] = c
	if !e.queueAccepted(c) {
		e.logf("udp: refusing connection from %v: %d accepted connections wait for Accept", p.addrs, acceptQueueLen)
		e.refuse(c.id)
	}
}
