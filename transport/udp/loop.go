package udp

import (
	"runtime"
	"time"

	"github.com/metaroce/metaroce/transport"
)

// sweepEvery is how often the loop forgets unused peers; transient peers
// silent for staleAfter are forgotten then.
const (
	sweepEvery = transport.Second
	staleAfter = 30 * transport.Second
)

// run is the event loop: the only goroutine that touches the core and the
// sockets. Each iteration waits for readiness (or polls, while busy), applies
// user commands, reads every ready socket, runs expired timers, delivers
// events, transmits, and decides how long it may sleep.
func (e *Endpoint) run() {
	defer e.exit()
	var ready [64]int32
	timeout := time.Duration(0)
	for {
		n, _, err := e.poller.Wait(timeout, ready[:])
		e.sleeping.Store(false)
		if err != nil {
			e.logf("udp: event loop stops: %v", err)
			return
		}
		now := e.now()
		busy := e.runCommands(now)
		for _, tag := range ready[:n] {
			if tag == timerTag {
				e.timer.fired()
				continue
			}
			if e.readSocket(tag, now) > 0 {
				busy = true
			}
		}
		now = e.now()
		if e.core.NextTimeout() <= now {
			e.core.HandleTimeout(now)
		}
		e.drainEvents()
		sent, more := e.transmit(now)
		busy = busy || sent > 0
		for _, id := range e.laterRelease {
			e.peers.release(id)
		}
		e.laterRelease = e.laterRelease[:0]
		e.drainEvents()
		if e.stopping && (e.core.NumConns() == 0 || now >= e.stopDeadline) {
			return
		}
		if now >= e.nextSweep {
			e.peers.sweep(now - staleAfter)
			e.nextSweep = now + sweepEvery
		}
		if busy {
			e.lastBusy = now
		}
		next := e.core.NextTimeout()
		if e.stopping {
			next = min(next, e.stopDeadline)
		}
		spin := transport.Time(e.cfg.Spin)
		if more || next <= now {
			timeout = 0
			continue
		}
		if spin > 0 && now-e.lastBusy < spin {
			// Spinning: yield the processor at every turn, or the user
			// goroutine this loop just woke (and the peer's loop, when
			// both live in one process) may wait for a free P until the
			// spin ends.
			runtime.Gosched()
			timeout = 0
			continue
		}
		// Sleep until a socket is readable, a command arrives or the next
		// timer fires. The sleeping flag tells enqueue to wake us; checking
		// the queue after setting it closes the race with a command that
		// was queued just before.
		e.timer.arm(now, next)
		e.sleeping.Store(true)
		if e.nCmds.Load() > 0 {
			e.sleeping.Store(false)
			timeout = 0
			continue
		}
		timeout = -1
	}
}

// exit fails everything still outstanding, refuses further commands and
// releases the sockets; it runs on the loop goroutine as its last act.
func (e *Endpoint) exit() {
	e.mu.Lock()
	e.stopped = true
	left := e.cmds
	e.cmds = nil
	e.mu.Unlock()
	for i := range left {
		cmd := &left[i]
		switch {
		case cmd.req != nil:
			cmd.req.finish(ErrEndpointClosed)
		case cmd.kind == cmdDial:
			cmd.conn.gone = true
			cmd.conn.err = ErrEndpointClosed
			close(cmd.conn.closed)
			cmd.conn.dialed <- ErrEndpointClosed
		case cmd.kind == cmdFunc:
			cmd.fn()
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
		e.connGone(c, peerErr(c.remote, ErrEndpointClosed))
		delete(e.conns, id)
	}
	e.release()
	close(e.done)
}
