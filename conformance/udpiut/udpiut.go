// Package udpiut adapts this module's UDP datapath (transport/udp) to the
// conformance.IUT control interface, so the suite can judge it in-process.
// It lives apart from package conformance, which must stay independent of
// the implementation it judges.
package udpiut

import (
	"context"
	"errors"
	"net/netip"
	"sync"

	"github.com/metaroce/metaroce/conformance"
	"github.com/metaroce/metaroce/transport/udp"
)

// compsBuffer is how many completions the channel of Completions holds;
// the others wait in the IUT's queue, which has no bound.
const compsBuffer = 64

// IUT is an in-process UDP endpoint driven through conformance.IUT.
//
// Every finished receive and send is queued, however many finish before
// the suite reads them, and none is dropped: one goroutine per request
// records its completion in queue, and one goroutine (deliver) moves the
// queue, oldest first, into comps. Requests that finish in the same turn
// of the datapath wake their goroutines together, so their completions
// may be queued in either order; the suite matches completions by flow
// and direction, not by order. A
// bounded channel alone dropped every completion past its 64th that
// finished while the suite was not reading, and the case waiting for one
// failed as if the IUT had never reported it.
//
// Its methods may be called from several goroutines, but not while Close
// runs.
type IUT struct {
	ep    *udp.Endpoint
	comps chan conformance.Completion // buffered (compsBuffer), fed by deliver only
	mu    sync.Mutex
	cur   *udp.Conn
	conns []*udp.Conn

	qmu      sync.Mutex
	queue    []conformance.Completion // finished, not yet in comps; oldest first
	more     chan struct{}            // capacity 1: the queue grew
	stop     chan struct{}            // closed by Close: deliver returns
	ops      sync.WaitGroup           // goroutines waiting for a request to finish
	pump     sync.WaitGroup           // deliver
	closing  sync.Once
	closeErr error
}

// Listen starts an endpoint on 127.0.0.1 with a fixed seed.
func Listen(seed uint64) (*IUT, error) {
	ep, err := udp.Listen(udp.Config{Addrs: []netip.Addr{netip.MustParseAddr("127.0.0.1")}, Seed: seed})
	if err != nil {
		return nil, err
	}
	u := &IUT{ep: ep, comps: make(chan conformance.Completion, compsBuffer),
		more: make(chan struct{}, 1), stop: make(chan struct{})}
	u.pump.Add(1)
	go u.deliver()
	return u, nil
}

// finished queues the completion of a request that ended.
func (u *IUT) finished(c conformance.Completion) {
	u.qmu.Lock()
	u.queue = append(u.queue, c)
	u.qmu.Unlock()
	select {
	case u.more <- struct{}{}:
	default: // deliver has been told already
	}
}

// deliver moves queued completions, oldest first, into comps as it has
// room for them, until Close.
func (u *IUT) deliver() {
	defer u.pump.Done()
	for {
		u.qmu.Lock()
		var next conformance.Completion
		var out chan conformance.Completion // nil, which blocks, while nothing is queued
		if len(u.queue) > 0 {
			next, out = u.queue[0], u.comps
		}
		u.qmu.Unlock()
		select {
		case out <- next:
			u.qmu.Lock()
			u.queue[0] = conformance.Completion{} // its buffers are the suite's now
			u.queue = u.queue[1:]
			if len(u.queue) == 0 {
				u.queue = nil
			}
			u.qmu.Unlock()
		case <-u.more:
		case <-u.stop:
			return
		}
	}
}

// ListenAddr implements conformance.IUT.
func (u *IUT) ListenAddr() netip.AddrPort { return u.ep.Addrs()[0] }

// Accept implements conformance.IUT.
func (u *IUT) Accept(ctx context.Context) error {
	c, err := u.ep.Accept(ctx)
	if err != nil {
		return err
	}
	u.mu.Lock()
	u.cur = c
	u.conns = append(u.conns, c)
	u.mu.Unlock()
	return nil
}

func (u *IUT) current() (*udp.Conn, error) {
	u.mu.Lock()
	defer u.mu.Unlock()
	if u.cur == nil {
		return nil, errors.New("udpiut: no accepted connection")
	}
	return u.cur, nil
}

// PostRecv implements conformance.IUT; the completion is delivered by a
// goroutine that ends with the request (connections fail their requests on
// Close).
func (u *IUT) PostRecv(ctx context.Context, flow uint32, caps []uint64, tags []uint32) error {
	c, err := u.current()
	if err != nil {
		return err
	}
	bufs := make([][]byte, len(caps))
	for i, n := range caps {
		bufs[i] = make([]byte, n)
		for j := range bufs[i] {
			bufs[i][j] = conformance.GuardByte
		}
	}
	r, err := c.Recv(flow, bufs, tags)
	if err != nil {
		return err
	}
	u.ops.Add(1)
	go func() {
		defer u.ops.Done()
		<-r.Done()
		comp := conformance.Completion{Flow: flow, Bufs: bufs}
		if err := r.Wait(context.Background()); err != nil {
			comp.Err = err.Error()
		} else {
			comp.Sizes = r.Sizes()
		}
		u.finished(comp)
	}()
	return nil
}

// Send implements conformance.IUT; the send's completion is delivered like
// a receive's.
func (u *IUT) Send(ctx context.Context, flow uint32, data []byte, tag uint32) error {
	c, err := u.current()
	if err != nil {
		return err
	}
	r, err := c.Send(flow, data, tag)
	if err != nil {
		return err
	}
	u.ops.Add(1)
	go func() {
		defer u.ops.Done()
		<-r.Done()
		comp := conformance.Completion{Send: true, Flow: flow}
		if err := r.Wait(context.Background()); err != nil {
			comp.Err = err.Error()
		} else {
			comp.Sizes = []int{len(data)}
		}
		u.finished(comp)
	}()
	return nil
}

// Completions implements conformance.IUT. The channel is never closed;
// it delivers nothing more after Close.
func (u *IUT) Completions() <-chan conformance.Completion { return u.comps }

// Close closes every accepted connection and the endpoint, which ends
// every request, and returns once the IUT's goroutines have ended; the
// completions still queued then are dropped, as nobody reads them any
// more. Later calls return what the first did.
func (u *IUT) Close() error {
	u.closing.Do(func() {
		u.mu.Lock()
		conns := u.conns
		u.conns = nil
		u.mu.Unlock()
		for _, c := range conns {
			c.Close()
		}
		u.closeErr = u.ep.Close()
		u.ops.Wait()
		close(u.stop)
		u.pump.Wait()
	})
	return u.closeErr
}
