package udpnet

import (
	"fmt"
	"sync"

	"github.com/metaroce/metaroce/net-plugin/internal/backend"
	"github.com/metaroce/metaroce/transport/udp"
)

// recvReq is one grouped irecv in its comm's fixed slot array.
type recvReq struct {
	c    *recvConn
	idx  int32
	used bool // guarded by c.mu
	r    *udp.Request
	tags [backend.MaxRecvs]uint32
}

// recvConn is the receiving end of one flow on a shared connection.
type recvConn struct {
	p    *peer
	flow uint32

	mu     sync.Mutex
	closed bool
	free   []int32
	reqs   [MaxRecvRequests]recvReq
}

func newRecvConn(p *peer, flow uint32) *recvConn {
	r := &recvConn{p: p, flow: flow, free: make([]int32, MaxRecvRequests)}
	for i := range r.reqs {
		r.reqs[i].c, r.reqs[i].idx = r, int32(i)
		r.free[i] = int32(MaxRecvRequests - 1 - i)
	}
	return r
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
	if r.closed {
		return nil, fmt.Errorf("udpnet: receive on closed comm from %s: %w", r.p.name, backend.ErrInternal)
	}
	if len(r.free) == 0 {
		return nil, nil
	}
	q := &r.reqs[r.free[len(r.free)-1]]
	for i, t := range tags {
		q.tags[i] = uint32(t)
	}
	u, err := r.p.conn.Recv(r.flow, bufs, q.tags[:n])
	if err != nil {
		return nil, opErr("receive", r.p, r.flow, err)
	}
	r.free = r.free[:len(r.free)-1]
	q.used, q.r = true, u
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
	done, err := u.Test()
	if !done {
		r.mu.Unlock()
		return false, nil
	}
	q.used, q.r = false, nil
	r.free = append(r.free, q.idx)
	r.mu.Unlock()
	if err != nil {
		return false, opErr("receive", r.p, r.flow, err)
	}
	copy(sizes, u.Sizes())
	return true, nil
}

// Close waits (bounded) for receives in flight and drops the connection
// reference.
func (r *recvConn) Close() error {
	r.mu.Lock()
	if r.closed {
		r.mu.Unlock()
		return nil
	}
	r.closed = true
	var inflight []*udp.Request
	for i := range r.reqs {
		if q := &r.reqs[i]; q.used {
			inflight = append(inflight, q.r)
		}
	}
	r.mu.Unlock()
	drain(r.p, r.flow, inflight)
	return nil
}
