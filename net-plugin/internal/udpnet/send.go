package udpnet

import (
	"fmt"
	"sync"

	"github.com/metaroce/metaroce/net-plugin/internal/backend"
	"github.com/metaroce/metaroce/transport/udp"
)

// sendReq is one isend, living in its comm's fixed slot array so that
// handing it out allocates nothing.
type sendReq struct {
	c    *sendConn
	idx  int32
	used bool // guarded by c.mu
	r    *udp.Request
	size int
}

// sendConn is the sending end of one flow on a shared connection.
type sendConn struct {
	p    *peer
	flow uint32

	mu     sync.Mutex
	closed bool
	free   []int32
	reqs   [MaxSendRequests]sendReq
}

func newSendConn(p *peer, flow uint32) *sendConn {
	s := &sendConn{p: p, flow: flow, free: make([]int32, MaxSendRequests)}
	for i := range s.reqs {
		s.reqs[i].c, s.reqs[i].idx = s, int32(i)
		s.free[i] = int32(MaxSendRequests - 1 - i)
	}
	return s
}

// Isend sends buf with tag on the comm's flow; (nil, nil) when every slot
// is busy.
func (s *sendConn) Isend(buf []byte, tag int32) (backend.Request, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return nil, fmt.Errorf("udpnet: send on closed comm to %s: %w", s.p.name, backend.ErrInternal)
	}
	if len(s.free) == 0 {
		return nil, nil
	}
	r, err := s.p.conn.Send(s.flow, buf, uint32(tag))
	if err != nil {
		return nil, opErr("send", s.p, s.flow, err)
	}
	q := &s.reqs[s.free[len(s.free)-1]]
	s.free = s.free[:len(s.free)-1]
	q.used, q.r, q.size = true, r, len(buf)
	return q, nil
}

// Test reports the send done once the receiver acknowledged every byte.
func (q *sendReq) Test(sizes []int) (bool, error) {
	s := q.c
	s.mu.Lock()
	if !q.used {
		s.mu.Unlock()
		return false, fmt.Errorf("udpnet: test of a send request that is not in flight: %w", backend.ErrInternal)
	}
	done, err := q.r.Test()
	if !done {
		s.mu.Unlock()
		return false, nil
	}
	size := q.size
	q.used, q.r = false, nil
	s.free = append(s.free, q.idx)
	s.mu.Unlock()
	if err != nil {
		return false, opErr("send", s.p, s.flow, err)
	}
	if len(sizes) > 0 {
		sizes[0] = size
	}
	return true, nil
}

// Close waits (bounded) for sends in flight and drops the connection
// reference.
func (s *sendConn) Close() error {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return nil
	}
	s.closed = true
	var inflight []*udp.Request
	for i := range s.reqs {
		if q := &s.reqs[i]; q.used {
			inflight = append(inflight, q.r)
		}
	}
	s.mu.Unlock()
	drain(s.p, s.flow, inflight)
	return nil
}
