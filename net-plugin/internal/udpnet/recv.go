package udpnet

import (
	"fmt"

	"github.com/metaroce/metaroce/net-plugin/internal/backend"
)

// recvReq is one grouped irecv in its comm's fixed slot array.
type recvReq struct {
	slot
	c    *recvConn
	tags [backend.MaxRecvs]uint32
}

// recvConn is the receiving end of one flow on a shared connection.
type recvConn struct {
	flowEnd
	reqs [MaxRecvRequests]recvReq
}

func newRecvConn(p *peer, flow uint32) *recvConn {
	r := &recvConn{}
	slots := make([]*slot, len(r.reqs))
	for i := range r.reqs {
		r.reqs[i].c = r
		slots[i] = &r.reqs[i].slot
	}
	r.init(p, flow, slots)
	return r
}

// dropUnaccepted ends a comm that its listener took in but that was never
// accepted (the listener closed first, as on an aborted setup). The
// dialer's connect completed, so its side holds a send comm on the flow,
// and the shared connection may live on with other comms: Close aborts the
// flow, as every close does (drain), which tells the dialer's side (a NACK
// FLOW_ABORTED) and fails its sends instead of leaving them waiting for a
// receive that will never be posted. It only logs why first.
func (r *recvConn) dropUnaccepted() {
	r.p.d.logf("NET/MetaRoCE : udpnet: comm on flow %d from peer %s was connected but never accepted before its listener closed: aborting its flow", r.flow, r.p.name)
	_ = r.Close()
}

// Irecv posts a grouped receive on the comm's flow; (nil, nil) when every
// slot is busy.
func (r *recvConn) Irecv(bufs [][]byte, tags []int32) (backend.Request, error) {
	n := len(bufs)
	if n < 1 || n > backend.MaxRecvs || len(tags) != n {
		return nil, fmt.Errorf("udpnet: grouped receive of %d buffers and %d tags (want 1..%d of each): %w", n, len(tags), backend.MaxRecvs, backend.ErrInternal)
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if err := r.usable("receive"); err != nil {
		return nil, err
	}
	s := r.next()
	if s == nil {
		return nil, nil
	}
	q := &r.reqs[s.idx]
	for i, t := range tags {
		q.tags[i] = uint32(t)
	}
	u, err := r.p.conn.Recv(r.flow, bufs, q.tags[:n])
	if err != nil {
		return nil, opErr("receive", r.p, r.flow, err)
	}
	r.take(s, u)
	return q, nil
}

// Test reports the group done when every buffer received its message and
// writes the byte counts.
func (q *recvReq) Test(sizes []int) (bool, error) {
	r := q.c
	r.mu.Lock()
	if !q.used {
		r.mu.Unlock()
		return false, fmt.Errorf("udpnet: test of a receive request that is not in flight: %w", backend.ErrInternal)
	}
	u := q.r
	done, err := r.testLocked(&q.slot)
	if !done {
		r.mu.Unlock()
		return false, nil
	}
	r.put(&q.slot)
	if err != nil {
		err = r.reqErr("receive", err)
	}
	r.mu.Unlock()
	if err != nil {
		return false, err
	}
	copy(sizes, u.Sizes())
	return true, nil
}
