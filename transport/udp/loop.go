package udp

import (
	"errors"
	"time"

	"github.com/metaroce/metaroce/transport"
	"github.com/metaroce/metaroce/transport/udp/sockio"
)

// sweepEvery is how often the loop forgets unused peers; transient peers
// silent for staleAfter are forgotten then.
const (
	sweepEvery = transport.Second
	staleAfter = 30 * transport.Second
)

// parkLimit bounds one park of the loop while goroutines spin in
// Request.Wait.
const parkLimit = time.Millisecond

// run is the event loop goroutine. Each iteration waits for readiness (or
// polls, while busy), takes the drive lock and runs one turn, then decides
// how long it may sleep. Callers run turns of their own under the same lock
// (see assist.go); the loop is what makes progress when nobody else does.
func (e *Endpoint) run() {
	defer func() {
		if r := recover(); r != nil {
			// A bug: crash with it. exit would wait for ever on the
			// drive lock the panicking turn holds, leaving every caller
			// hanging on an endpoint whose loop is gone.
			panic(r)
		}
		e.exit()
	}()
	var ready [64]int32
	timeout := time.Duration(0)
	park := time.NewTimer(parkLimit)
	park.Stop()
	// mutedAt is when the loop last muted the sockets, -1 while they are
	// not muted; unmuted says whether the last unmute succeeded.
	mutedAt, unmuted := transport.Time(-1), true
	unmute := func() {
		unmuted = e.mute(false)
		mutedAt = -1
	}
	for {
		n, _, err := e.poller.Wait(timeout, ready[:])
		if err != nil {
			e.logf("udp: event loop stops: %v", err)
			return
		}
		e.drive.Lock()
		e.sleeping.Store(false)
		now, more := e.turn(ready[:n])
		// A stopping loop ends once no connection is left and the
		// transmit pass sent all the core had due (connections that gave
		// their peers up at once may owe more CLOSEs than one pass
		// sends), or at the deadline.
		if e.stopping && ((e.core.NumConns() == 0 && !more) || now >= e.stopDeadline) {
			e.drive.Unlock()
			return
		}
		next := e.nextWake()
		lease := e.pollLease(now)
		parkOff := e.spinners.Load() > 0 || lease > 0
		if !parkOff {
			// Nobody else reads the sockets: the loop must see them,
			// also while it goes round at once below.
			unmute()
		}
		if more || next <= now {
			e.drive.Unlock()
			timeout = 0
			continue
		}
		if parkOff {
			// A goroutine spins in Request.Wait, or polls with
			// Request.Poll, and runs the turns itself: park off the
			// poller with the sockets muted, so that datagrams
			// arriving for it wake no thread (not even one of the
			// runtime's poller, which watches ours), until the last
			// spinner leaves, a command needs the loop, or parkLimit
			// passes (spinners read only the listening sockets; a
			// stray datagram on another one waits at most that
			// long). A poller's lease ends the park sooner: its polls
			// may have stopped.
			e.drive.Unlock()
			if mutedAt >= 0 && now-mutedAt >= transport.Time(parkLimit) {
				// Muted for parkLimit, kicks ending every park before
				// its timer: read what the sockets hold (a stray
				// datagram on a socket the spinners do not read) in
				// the next turn, then park again.
				unmute()
				timeout = 0
				continue
			}
			limit := parkLimit
			if e.spinners.Load() == 0 {
				limit = min(limit, lease)
			}
			if mutedAt < 0 {
				e.mute(true)
				mutedAt = now
			}
			park.Reset(limit)
			select {
			case <-e.kick:
			case <-park.C:
				// As above: the sockets are read before the next park.
				unmute()
			}
			park.Stop()
			timeout = 0
			continue
		}
		if spin := transport.Time(e.cfg.Spin); spin > 0 && now-e.lastBusy < spin {
			// Spinning: yield the processor at every turn, or the user
			// goroutine this loop just woke (and the peer's loop, when
			// both live in one process) may wait for a free P until the
			// spin ends.
			e.drive.Unlock()
			e.yield()
			timeout = 0
			continue
		}
		// Sleep until a socket is readable, a command arrives or the next
		// timer fires. The sleeping flag tells enqueue to wake us; checking
		// the queue after setting it closes the race with a command that
		// was queued just before.
		e.timer.arm(now, next)
		e.sleeping.Store(true)
		switch {
		case e.nCmds.Load() > 0:
			e.sleeping.Store(false)
			timeout = 0
		case !unmuted:
			// A socket may still be out of the poller (sockio's Mute
			// retries it at the next call): wake within parkLimit
			// rather than wait on it for ever.
			timeout = parkLimit
		default:
			timeout = -1
		}
		e.drive.Unlock()
	}
}

// turn applies queued commands, reads the sockets tagged in ready, runs
// expired timers, delivers events and transmits. It returns the time it
// ended at and whether the transmit budget ran out (more may be waiting).
// The caller holds e.drive.
func (e *Endpoint) turn(ready []int32) (transport.Time, bool) {
	now, busy := e.turnIn(ready)
	return e.turnOut(now, busy)
}

// turnIn is the first half of a turn: commands, reads, timers and the
// events they caused. It reports whether any of them did something.
func (e *Endpoint) turnIn(ready []int32) (transport.Time, bool) {
	now := e.now()
	busy := e.runCommands(now)
	for _, tag := range ready {
		if tag == timerTag {
			e.timer.fired()
			continue
		}
		if e.readSocket(tag, e.now()) > 0 {
			busy = true
		}
	}
	now = e.now()
	if e.core.NextTimeout() <= now {
		e.core.HandleTimeout(now)
	}
	e.drainEvents()
	if busy {
		e.lastBusy = now
	}
	return now, busy
}

// turnOut is the second half: transmit what the core has due, release the
// peers of closed connections and forget stale ones. A turn that stops
// after turnIn leaves the core's output waiting for the next turn.
func (e *Endpoint) turnOut(now transport.Time, busy bool) (transport.Time, bool) {
	sent, more := e.transmit(now)
	if len(e.laterRefuse) > 0 {
		// The refused connections' HELLO_ACKs are sealed and held:
		// close those connections, send their CLOSEs now rather than
		// at the next turn, and the HELLO_ACKs right behind them (see
		// refuse). One whose HELLO_ACK the transmit budget left in the
		// core waits for the next turn, unless the core had nothing
		// more to send: then it has none to send (it could not be
		// routed) and the connection closes all the same. The wait
		// lasts refuseWaitTurns turns at most, so that a transmit
		// budget that stays full cannot put a refusal off for ever:
		// then the turn polls the core past its budget until every
		// refused HELLO_ACK is held (refuseFlush), and closes the
		// connections whether or not it was.
		now = e.now()
		if more && e.refuseWait >= refuseWaitTurns {
			n, m := e.refuseFlush(now)
			sent, more = sent+n, m
		}
		left := e.laterRefuse[:0]
		for _, id := range e.laterRefuse {
			if more && !e.heldAck(id) && e.refuseWait < refuseWaitTurns {
				left = append(left, id)
				continue
			}
			e.core.Close(now, id)
		}
		e.laterRefuse = left
		if len(left) > 0 {
			e.refuseWait++
		} else {
			e.refuseWait = 0
		}
		n, m := e.transmit(now)
		e.sendHeld()
		sent, more = sent+n, more || m || len(left) > 0
	}
	// The peers and keys of connections closed this turn are dropped
	// once a transmit pass has sent everything the core owed: a CLOSE
	// that the budget left for the next turn (connections that gave their
	// peers up together each send one on every path) is routed and sealed
	// with them. A budget that stays full puts it off laterWaitTurns turns
	// at most.
	if !more || e.laterWait >= laterWaitTurns {
		for _, id := range e.laterRelease {
			e.peers.release(id)
		}
		e.laterRelease = e.laterRelease[:0]
		for _, id := range e.laterForget {
			e.auth.Forget(id)
		}
		e.laterForget = e.laterForget[:0]
		e.laterWait = 0
	} else if len(e.laterRelease) > 0 || len(e.laterForget) > 0 {
		e.laterWait++
	}
	e.drainEvents()
	if now >= e.nextSweep {
		e.peers.sweep(now - staleAfter)
		e.nextSweep = now + sweepEvery
	}
	if busy || sent > 0 {
		e.lastBusy = now
	}
	// The turn may have taken a while (a full socket, a long read): timers
	// are armed, and judged due, against when it ended.
	return e.now(), more
}

// laterWaitTurns bounds the turns in a row that turnOut keeps the peers and
// keys of closed connections for the datagrams the core still owes them
// (16 full transmit passes: 4096 datagrams).
const laterWaitTurns = 16

// refuseWaitTurns bounds the turns in a row that turnOut waits for the
// HELLO_ACK of a refused connection to leave the core within the transmit
// budget.
const refuseWaitTurns = 4

// refuseFlush transmits past the budget until the HELLO_ACK of every
// connection in laterRefuse is held or the core has nothing more to send,
// and returns what transmit returns summed up and last. The core serves its
// endpoint-level queue (at most a few budgets of CLOSEs and NACKs) first
// and then its connections round robin, one datagram each, a HELLO_ACK
// before anything else of its connection: the passes it makes reach every
// connection. One whose HELLO_ACK they do not meet owes none (it left
// already, or the connection is gone).
func (e *Endpoint) refuseFlush(now transport.Time) (int, bool) {
	sent, more := 0, true
	for pass := e.core.NumConns()/txBudget + 8; more && pass > 0 && !e.refusalsHeld(); pass-- {
		n, m := e.transmit(now)
		sent, more = sent+n, m
	}
	return sent, more
}

// refusalsHeld reports whether the HELLO_ACK of every connection in
// laterRefuse is held.
func (e *Endpoint) refusalsHeld() bool {
	for _, id := range e.laterRefuse {
		if !e.heldAck(id) {
			return false
		}
	}
	return true
}

// nextWake is when the loop must next run a turn by itself: the core's next
// timer, or the shutdown deadline. The caller holds e.drive.
func (e *Endpoint) nextWake() transport.Time {
	next := e.core.NextTimeout()
	if e.stopping {
		next = min(next, e.stopDeadline)
	}
	return next
}

// exit fails everything still outstanding, refuses further commands and
// releases the sockets; it runs on the loop goroutine as its last act, under
// the drive lock, and marks the endpoint dead so that no caller runs a turn
// on the released sockets afterwards. Every failure names its peer
// (PeerError around ErrEndpointClosed), commands that never reached the
// core included, like every other request's failure. Every queued command
// is answered: the callback of a queued flow abort or function runs too,
// last, once every request has failed, since an abort's callback promises
// that the flow's requests are done (Conn.AbortFlow).
func (e *Endpoint) exit() {
	e.drive.Lock()
	defer e.drive.Unlock()
	e.dead = true
	e.mu.Lock()
	e.stopped = true
	left := e.cmds
	e.cmds = nil
	e.mu.Unlock()
	for i := range left {
		cmd := &left[i]
		switch {
		case cmd.req != nil:
			cmd.req.finish(peerErr(cmd.req.conn.remote, ErrEndpointClosed))
		case cmd.kind == cmdDial:
			cmd.conn.gone = true
			cmd.conn.err = peerErr(cmd.conn.remote, ErrEndpointClosed)
			close(cmd.conn.closed)
			cmd.conn.dialed <- cmd.conn.err
		}
	}
	for _, r := range e.sendOps {
		r.finish(peerErr(r.conn.remote, ErrEndpointClosed))
	}
	for _, ref := range e.recvOps {
		ref.req.finish(peerErr(ref.req.conn.remote, ErrEndpointClosed))
	}
	clear(e.sendOps)
	clear(e.recvOps)
	for id, c := range e.conns {
		if c.final == nil {
			c.final = e.lastStats(id)
		}
		e.connGone(c, peerErr(c.remote, ErrEndpointClosed))
		delete(e.conns, id)
	}
	// Stats reports these once the loop has stopped: after done, and
	// from a Stats command queued before the exit, run just below.
	final := e.core.Counters()
	e.finalCore = &final
	for i := range left {
		if cmd := &left[i]; cmd.fn != nil && (cmd.kind == cmdFunc || cmd.kind == cmdAbort) {
			cmd.fn()
		}
	}
	e.release()
	close(e.done)
}

// lastStats records the counters of connection id, which the endpoint's
// exit tears down while the core still holds it, as the core's EvClosed
// does for a connection that ends on its own: Conn.Stats and
// Conn.PathStats report them once the endpoint is closed. Nil where the
// core no longer knows id.
func (e *Endpoint) lastStats(id transport.ConnID) *transport.FinalStats {
	st, ok := e.core.Stats(id)
	if !ok {
		return nil
	}
	st.State = "closed"
	fin := &transport.FinalStats{Conn: st}
	for i := 0; ; i++ {
		ps, ok := e.core.PathStats(id, i)
		if !ok {
			return fin
		}
		fin.Paths = append(fin.Paths, ps)
	}
}

// mute turns the sockets' readiness reports off (on) or back on, where they
// are not already (sockio.Poller.Mute): off while the loop parks off the
// poller and goroutines read the sockets, so that their datagrams wake no
// thread of the runtime's poller, on before the loop reads or waits on the
// poller again. It reports whether every socket is where it should be.
func (e *Endpoint) mute(on bool) bool {
	err := e.poller.Mute(on)
	if err != nil && !errors.Is(err, sockio.ErrClosed) {
		e.logf("udp: event loop: %v", err)
	}
	return err == nil
}
