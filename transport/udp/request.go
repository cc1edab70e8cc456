package udp

import (
	"context"
	"fmt"
	"sync/atomic"
	"time"

	"github.com/metaroce/metaroce/transport"
)

// Request is one asynchronous Send or Recv. It completes exactly once; after
// Done is closed, Test, Wait and Sizes report its outcome. The buffers it was
// given belong to the endpoint until it completes.
type Request struct {
	done     chan struct{}
	finished atomic.Bool
	err      error
	sizes    []int
	notify   func() // called once on completion, after done is closed
	// Set before the request is queued and never changed: what Wait's
	// error says it waited for.
	flow   uint32
	isRecv bool

	// Guarded by the endpoint's drive lock until completion.
	conn *Conn
	send []byte   // Send: the message
	recv [][]byte // Recv: the posted buffers
	tags []uint32 // Recv: their tags
	left int      // Recv: buffers not yet completed
}

func newRequest(c *Conn, n int) *Request {
	return &Request{done: make(chan struct{}), conn: c, sizes: make([]int, n)}
}

// Done is closed when the request completes.
func (r *Request) Done() <-chan struct{} { return r.done }

// Wait blocks until the request completes and returns its error, or, if ctx
// ends first, ctx.Err() wrapped in a PeerError that names the peer and the
// request's flow (the request then stays outstanding and its buffers stay
// lent; errors.Is sees the context's error). It first drives the datapath from the calling
// goroutine while that makes progress, for up to Config.WaitSpin without
// any, which saves the two thread wake-ups of a hand-off to the event loop.
// The spin ends too when ctx does: a spin that makes progress (other
// traffic) or a long WaitSpin would otherwise keep a cancelled wait going.
func (r *Request) Wait(ctx context.Context) error {
	stop := r.finished.Load
	if ended := ctx.Done(); ended != nil {
		// A context that can end: so can the spin. (Background's
		// cannot, and its waits keep the plain test.)
		stop = func() bool {
			select {
			case <-ended:
				return true
			default:
				return r.finished.Load()
			}
		}
	}
	if r.conn.ep.spinWait(stop) && r.finished.Load() {
		return r.err
	}
	select {
	case <-r.done:
		return r.err
	case <-ctx.Done():
		select {
		case <-r.done:
			return r.err
		default:
		}
		return r.waitErr(ctx.Err())
	}
}

// waitErr is the error of a Wait that err, its context's error, ended
// before the request completed: it names the peer, as every failure of
// the package does, and the request, so that a caller waiting on many
// connections knows which one is stuck.
func (r *Request) waitErr(err error) error {
	what := "send"
	if r.isRecv {
		what = "receive"
	}
	return peerErr(r.conn.remote, fmt.Errorf("wait for the %s on flow %d: %w", what, r.flow, err))
}

// Progress drives the datapath from the calling goroutine, as Wait does,
// until done reports true or Config.WaitSpin passes without progress, and
// reports done's last answer. A goroutine that waits for several requests
// at once (a collective's executor, whose notify callbacks fill a channel)
// calls it before it blocks, which saves the wake-ups of a hand-off to the
// event loop for each completion. done is called often and must be cheap;
// it may run under the endpoint's drive lock.
func (e *Endpoint) Progress(done func() bool) bool {
	return e.spinWait(done)
}

// Poll runs one turn of the datapath (read what arrived, run what is due,
// transmit) in the calling goroutine when nobody else is running one, and
// returns at once either way; on a finished request it does nothing. A
// caller that tests its requests in a loop instead of waiting on them (an
// NCCL proxy thread calling test()) polls between tests: its own thread
// then moves the data, and a completion needs no wake-up of the event
// loop, which on a busy host takes tens to hundreds of microseconds. For
// Config.WaitSpin after each Poll the event loop parks, as it does while a
// goroutine spins in Wait, so that it does not take the datagrams the
// poller reads itself; it resumes when the polls stop.
func (r *Request) Poll() {
	if r.finished.Load() {
		return
	}
	e := r.conn.ep
	if e.cfg.WaitSpin > 0 {
		e.polledAt.Store(int64(e.now()))
	}
	e.progress(nil)
}

// pollLease reports how much longer the loop may leave the datapath to
// the callers of Request.Poll (0: it must run it itself).
func (e *Endpoint) pollLease(now transport.Time) time.Duration {
	at := e.polledAt.Load()
	if at == 0 {
		return 0
	}
	left := transport.Time(at) + transport.Time(e.cfg.WaitSpin) - now
	return max(time.Duration(left), 0)
}

// Test reports without blocking whether the request completed, and its error.
func (r *Request) Test() (done bool, err error) {
	if !r.finished.Load() {
		return false, nil
	}
	return true, r.err
}

// Sizes returns the bytes received in each buffer (Recv) or the bytes sent
// (Send, one entry). It is valid after completion; before, it is nil.
func (r *Request) Sizes() []int {
	if !r.finished.Load() {
		return nil
	}
	return r.sizes
}

// finish completes r with err (the first error wins for grouped receives);
// it is called under the endpoint's drive lock only.
func (r *Request) finish(err error) {
	if r.finished.Load() {
		return
	}
	if r.err == nil {
		r.err = err
	}
	r.send, r.recv = nil, nil
	r.finished.Store(true)
	close(r.done)
	if r.notify != nil {
		r.notify()
	}
}
