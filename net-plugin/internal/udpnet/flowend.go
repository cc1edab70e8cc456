package udpnet

import (
	"errors"
	"fmt"
	"sync"

	"github.com/metaroce/metaroce/net-plugin/internal/backend"
	"github.com/metaroce/metaroce/transport"
	"github.com/metaroce/metaroce/transport/udp"
)

// slot is the bookkeeping part of one request slot of a comm: requests
// live in fixed arrays so that handing one out allocates nothing.
type slot struct {
	idx  int32
	used bool         // guarded by the comm's mu
	r    *udp.Request // the datapath request while used
}

// flowEnd is what the sending and the receiving comm of a flow share: the
// peer connection, the flow, and the free list of request slots. Its lock
// guards the slots' used and r fields and the free list.
type flowEnd struct {
	p    *peer
	flow uint32
	// connected is, for a send comm, the peer's listener flow it
	// connected to (its entry in p.flows, dropped when it closes); 0 for
	// a receive comm.
	connected uint32

	mu      sync.Mutex
	closed  bool
	aborted bool    // by Abort: the flow is gone, the peer reference held
	free    []int32 // indices of unused slots, the next one last
	slots   []*slot // every slot, by index
}

// init makes every slot free, lowest index first out.
func (f *flowEnd) init(p *peer, flow uint32, slots []*slot) {
	f.p, f.flow, f.slots = p, flow, slots
	f.free = make([]int32, len(slots))
	for i, s := range slots {
		s.idx = int32(i)
		f.free[i] = int32(len(slots) - 1 - i)
	}
}

// next returns the slot the next request takes, nil when all are busy; the
// caller holds mu and calls take once the request is in flight.
func (f *flowEnd) next() *slot {
	if len(f.free) == 0 {
		return nil
	}
	return f.slots[f.free[len(f.free)-1]]
}

// take marks the slot returned by next as carrying r; the caller holds mu.
func (f *flowEnd) take(s *slot, r *udp.Request) {
	f.free = f.free[:len(f.free)-1]
	s.used, s.r = true, r
}

// put frees s; the caller holds mu.
func (f *flowEnd) put(s *slot) {
	s.used, s.r = false, nil
	f.free = append(f.free, s.idx)
}

// inflight returns the datapath requests in flight; the caller holds mu.
func (f *flowEnd) inflight() []*udp.Request {
	var out []*udp.Request
	for _, s := range f.slots {
		if s.used {
			out = append(out, s.r)
		}
	}
	return out
}

// usable returns the error of a request on a comm that was closed or
// aborted, nil otherwise; the caller holds mu.
func (f *flowEnd) usable(what string) error {
	switch {
	case f.closed:
		return fmt.Errorf("udpnet: %s on closed comm to %s: %w", what, f.p.name, backend.ErrInternal)
	case f.aborted:
		return fmt.Errorf("udpnet: %s on comm to %s, aborted when its memory was deregistered with requests in flight: %w", what, f.p.name, backend.ErrInternal)
	}
	return nil
}

// reqErr is the error of a failed request of the comm; the caller holds mu.
// A request that this side's own abort failed (Abort: deregMr of memory in
// use, which NCCL does only when it tears an aborted comm down; or Close
// with requests in flight) is reported as an internal error, as requests
// posted after the abort are (usable) and as the tcp backend reports it:
// the peer did nothing wrong. Any other abort of the flow is the peer's
// (opErr). A request the peer's abort failed just before this side's own
// is reported as this side's: both ends were aborting the comm.
func (f *flowEnd) reqErr(op string, err error) error {
	if errors.Is(err, transport.ErrFlowAborted) && (f.aborted || f.closed) {
		return fmt.Errorf("udpnet: %s on flow %d with peer %s: aborted here, as the comm's memory was deregistered or the comm closed with requests in flight: %v: %w", op, f.flow, f.p.name, err, backend.ErrInternal)
	}
	return opErr(op, f.p, f.flow, err)
}

// Abort aborts the comm's flow (see drain): its requests fail, and once
// Abort returns the datapath touches none of their buffers. The comm keeps
// its reference on the connection until Close.
func (f *flowEnd) Abort() {
	f.mu.Lock()
	if f.closed || f.aborted {
		f.mu.Unlock()
		return
	}
	f.aborted = true
	n := len(f.inflight())
	f.mu.Unlock()
	f.p.d.logf("NET/MetaRoCE : udpnet: comm on flow %d to peer %s aborted with %d request(s) in flight", f.flow, f.p.name, n)
	f.p.conn.AbortFlow(f.flow)
}

// Close aborts the comm's flow (see drain), failing the requests still in
// flight on either side, and drops the comm's reference on the
// connection. A second Close does nothing.
func (f *flowEnd) Close() error {
	f.mu.Lock()
	if f.closed {
		f.mu.Unlock()
		return nil
	}
	f.closed = true
	if f.aborted {
		f.mu.Unlock()
		f.p.d.release(f.p, f.connected) // the abort released the flow
		return nil
	}
	inflight := f.inflight()
	f.mu.Unlock()
	drain(f, inflight)
	return nil
}

// testLocked reports whether the request of sl, a slot in use, is done,
// and its error. The caller holds f.mu, and holds it again on return. A
// request not done yet gets one turn of the datapath on the calling thread
// (udp.Request.Poll: NCCL's proxy thread polls test() rather than
// blocking, so it is the one that moves the data) and is looked at again;
// the turn runs without the lock, as it may complete requests of other
// comms, and a slot released or reused meanwhile reports not done.
func (f *flowEnd) testLocked(sl *slot) (bool, error) {
	u := sl.r
	if done, err := u.Test(); done {
		return true, err
	}
	f.mu.Unlock()
	u.Poll()
	f.mu.Lock()
	if !sl.used || sl.r != u {
		return false, nil
	}
	return u.Test()
}
