package udp

import (
	"fmt"
	"net/netip"
	"time"

	"github.com/metaroce/metaroce/transport"
	"github.com/metaroce/metaroce/transport/wire"
)

// Conn is one connection to a peer endpoint: ordered flows of messages above,
// every plane and path entropy below. Its methods are safe for concurrent use.
type Conn struct {
	ep     *Endpoint
	remote []netip.AddrPort
	closed chan struct{} // closed once the connection is gone
	err    error         // why it is gone; set before closed is closed
	dialed chan error    // Dial's result, for dialed connections

	// Guarded by the endpoint's drive lock.
	id      transport.ConnID
	rid     transport.RemoteID
	dialing bool
	// refusedEarly: a CLOSE that arrived ahead of the HELLO_ACK was
	// replayed right after it (replayEarly), so the core will report the
	// connection established and closed in the same drain; Dial then fails
	// with ErrRefused rather than returning a closed connection.
	refusedEarly bool
	gone         bool
	closing      bool                  // Close (or a failed Dial's cleanup) asked the core to close it
	final        *transport.FinalStats // the counters as the connection ended (Stats after it is gone)

	// queued: the connection waits in the endpoint's accept queue.
	// Guarded by the endpoint's acceptMu, not by drive.
	queued bool
}

func newConn(e *Endpoint, remote []netip.AddrPort) *Conn {
	return &Conn{ep: e, remote: remote, closed: make(chan struct{})}
}

// RemoteAddrs returns the peer's per-plane listening addresses.
func (c *Conn) RemoteAddrs() []netip.AddrPort { return append([]netip.AddrPort(nil), c.remote...) }

// closedErr returns the error for a call on a connection that is gone, or
// nil while it lives.
func (c *Conn) closedErr() error {
	select {
	case <-c.closed:
		if c.err != nil {
			return c.err
		}
		return peerErr(c.remote, transport.ErrClosed)
	default:
		return nil
	}
}

// Send queues buf as one message on flow with tag. The peer's receive posted
// on the same flow in the same order takes it, into the buffer whose tag
// matches. buf must stay untouched until the request completes.
func (c *Conn) Send(flow uint32, buf []byte, tag uint32) (*Request, error) {
	return c.SendNotify(flow, buf, tag, nil)
}

// SendNotify is Send that also calls notify (when not nil) once the request
// completes, after Done is closed. notify runs on whichever goroutine
// completes the request, possibly inside this call and always while that
// goroutine drives the datapath: it must return at once and must not call
// into the endpoint (a send on a channel with room is the intended use). It
// spares a caller with many requests in flight a goroutine per request.
func (c *Conn) SendNotify(flow uint32, buf []byte, tag uint32, notify func()) (*Request, error) {
	if err := c.closedErr(); err != nil {
		return nil, err
	}
	if uint64(len(buf)) > wire.MaxMessageLen {
		return nil, fmt.Errorf("udp: message of %d bytes exceeds the %d-byte limit", len(buf), uint64(wire.MaxMessageLen))
	}
	r := newRequest(c, 1)
	r.send = buf
	r.notify = notify
	r.flow = flow
	if err := c.ep.enqueueFast(command{kind: cmdSend, conn: c, req: r, flow: flow, tag: tag}); err != nil {
		return nil, peerErr(c.remote, err)
	}
	return r, nil
}

// Recv posts a grouped receive of 1..8 buffers on flow: the next messages the
// peer sends on flow fill them, each going to the buffer whose tag equals its
// own (tags[i] for bufs[i]). The request completes when every buffer did;
// Sizes then says how many bytes each received. A message larger than its
// buffer fails the request (and the peer's send) with
// transport.ErrMessageTooLarge.
func (c *Conn) Recv(flow uint32, bufs [][]byte, tags []uint32) (*Request, error) {
	return c.RecvNotify(flow, bufs, tags, nil)
}

// RecvNotify is Recv that also calls notify (when not nil) once the request
// completes; see SendNotify for what notify may do.
func (c *Conn) RecvNotify(flow uint32, bufs [][]byte, tags []uint32, notify func()) (*Request, error) {
	if len(bufs) == 0 || len(bufs) > wire.MaxRecvEntries {
		return nil, fmt.Errorf("udp: a grouped receive takes 1..%d buffers, got %d", wire.MaxRecvEntries, len(bufs))
	}
	if len(tags) != len(bufs) {
		return nil, fmt.Errorf("udp: %d receive buffers but %d tags", len(bufs), len(tags))
	}
	if err := c.closedErr(); err != nil {
		return nil, err
	}
	r := newRequest(c, len(bufs))
	r.recv = append([][]byte(nil), bufs...)
	r.tags = append([]uint32(nil), tags...)
	r.left = len(bufs)
	r.notify = notify
	r.flow, r.isRecv = flow, true
	if err := c.ep.enqueueFast(command{kind: cmdRecv, conn: c, req: r, flow: flow}); err != nil {
		return nil, peerErr(c.remote, err)
	}
	return r, nil
}

// ReleaseFlow says this side is finished with flow: its state on the
// connection is freed once its requests in flight complete, so that a
// connection carrying many short-lived flows over its life (one per NCCL
// comm, say) does not run into the core's MaxFlowsPerConn. The flow id
// must not be used again on this connection; Send or Recv on it then
// fails. Releasing is local: the peer releases its side on its own.
func (c *Conn) ReleaseFlow(flow uint32) error {
	if err := c.closedErr(); err != nil {
		return err
	}
	return peerErr(c.remote, c.ep.enqueue(command{kind: cmdRelease, conn: c, flow: flow}))
}

// AbortFlow gives up on flow at once: its requests still in flight fail
// with transport.ErrFlowAborted (those that had finished complete,
// docs/spec.md §3.4), and when AbortFlow returns they are all done and the
// datapath touches none of their buffers again. The peer is told and
// fails its own requests on flow; the connection and its other flows
// carry on. The flow id is released, as by ReleaseFlow. On a connection
// that is gone it does nothing: its requests have failed already.
func (c *Conn) AbortFlow(flow uint32) {
	if c.closedErr() != nil {
		c.ep.settle()
		return
	}
	c.ep.applyAndWait(command{kind: cmdAbort, conn: c, flow: flow})
}

// closeWait is how long Close waits at least for the connection to end.
// The core itself gives up on an unanswered CLOSE after 4 × HandshakeRetry
// (spec §3.3); the bound only guards against a loop that stopped turning,
// so it is the larger of 5 s and twice the core's own limit.
func (c *Conn) closeWait() time.Duration {
	return max(5*time.Second, 8*time.Duration(c.ep.cfg.Core.HandshakeRetry))
}

// Close closes the connection: outstanding requests fail with
// transport.ErrClosed and the peer is told. It returns once the connection is
// gone: at once when the peer acknowledges, after 4 × Core.HandshakeRetry
// (200 ms at the defaults) when it does not answer.
func (c *Conn) Close() error {
	if c.closedErr() != nil {
		c.ep.settle()
		return nil
	}
	if err := c.ep.enqueue(command{kind: cmdClose, conn: c}); err != nil {
		// The loop's exit refuses commands before it fails the
		// requests and ends the connections: wait for it to finish.
		<-c.ep.done
		return nil
	}
	wait := c.closeWait()
	t := time.NewTimer(wait)
	defer t.Stop()
	select {
	case <-c.closed:
		// The connection may have ended by itself (its peer found dead)
		// in a turn that ran before this Close's command: that turn
		// marks it gone before it fails its requests (goneBeforeOps),
		// so wait for it to end, as a Close that finds it gone does.
		c.ep.settle()
	case <-c.ep.done:
	case <-t.C:
		return fmt.Errorf("udp: close of connection to %v did not finish within %v", c.remote, wait)
	}
	return nil
}

// Stats returns a snapshot of the connection's counters; a closed
// connection reports them as they were when it ended, with State "closed".
func (c *Conn) Stats() transport.ConnStats {
	var st transport.ConnStats
	ran := c.ep.applyAndWait(command{kind: cmdFunc, fn: func() {
		ok := false
		switch {
		case !c.gone:
			st, ok = c.ep.core.Stats(c.id)
		case c.final != nil:
			st, ok = c.final.Conn, true
		}
		if !ok {
			st = transport.ConnStats{State: "closed"}
		}
	}})
	if !ran {
		return c.exitStats().Conn
	}
	return st
}

// exitStats waits until the endpoint's loop has exited (a command was
// refused because it is stopping, or it ended while one waited) and
// returns c's counters as they were when the connection ended: recorded
// by the loop before it closed done, so reading them after done needs no
// lock. A connection the core had already forgotten reports State
// "closed" and nothing else.
func (c *Conn) exitStats() transport.FinalStats {
	<-c.ep.done
	if c.final == nil {
		return transport.FinalStats{Conn: transport.ConnStats{State: "closed"}}
	}
	return *c.final
}

// PathStats returns a snapshot of the counters of every path of the
// connection; once it is closed, as they were when it ended.
func (c *Conn) PathStats() []transport.PathStats {
	var out []transport.PathStats
	ran := c.ep.applyAndWait(command{kind: cmdFunc, fn: func() {
		if c.gone && c.final != nil {
			out = append(out, c.final.Paths...)
		}
		for i := 0; !c.gone; i++ {
			ps, ok := c.ep.core.PathStats(c.id, i)
			if !ok {
				break
			}
			out = append(out, ps)
		}
	}})
	if !ran {
		return c.exitStats().Paths
	}
	return out
}

// settle returns once the turn running now, if any, has ended. A
// connection counts as gone before the turn that ends it has failed all of
// its requests (goneBeforeOps), so a call that finds it gone and promises
// that its requests are done (AbortFlow, Close) waits for that turn first.
func (e *Endpoint) settle() { e.applyAndWait(command{kind: cmdFunc}) }

// applyAndWait queues cmd and returns once a turn has applied it, cmd.fn
// (if any) included, or once the endpoint has stopped (which finishes
// every request); it reports whether cmd.fn ran. A command refused because
// the loop's exit has begun waits for the exit's end too: the exit refuses
// commands from its start and fails the outstanding requests after, so a
// refusal alone does not mean they are done.
func (e *Endpoint) applyAndWait(cmd command) bool {
	done := make(chan struct{})
	fn := cmd.fn
	cmd.fn = func() {
		if fn != nil {
			fn()
		}
		close(done)
	}
	if e.enqueue(cmd) != nil {
		<-e.done
		return false
	}
	select {
	case <-done:
		return true
	case <-e.done:
		// The exit runs the commands it found queued before it ends.
		select {
		case <-done:
			return true
		default:
			return false
		}
	}
}
