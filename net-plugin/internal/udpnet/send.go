package udpnet

import (
	"fmt"

	"github.com/metaroce/metaroce/net-plugin/internal/backend"
)

// sendReq is one isend, living in its comm's fixed slot array so that
// handing it out allocates nothing.
type sendReq struct {
	slot
	c    *sendConn
	size int
}

// sendConn is the sending end of one flow on a shared connection.
type sendConn struct {
	flowEnd
	reqs [MaxSendRequests]sendReq
}

// newSendConn returns the send comm connected to the peer's listener flow
// listenFlow over p's connection.
func newSendConn(p *peer, listenFlow uint32) *sendConn {
	s := &sendConn{}
	slots := make([]*slot, len(s.reqs))
	for i := range s.reqs {
		s.reqs[i].c = s
		slots[i] = &s.reqs[i].slot
	}
	s.init(p, p.dataFlow(listenFlow, false), slots)
	s.connected = listenFlow
	return s
}

// Isend sends buf with tag on the comm's flow; (nil, nil) when every slot
// is busy.
func (s *sendConn) Isend(buf []byte, tag int32) (backend.Request, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.usable("send"); err != nil {
		return nil, err
	}
	sl := s.next()
	if sl == nil {
		return nil, nil
	}
	r, err := s.p.conn.Send(s.flow, buf, uint32(tag))
	if err != nil {
		return nil, opErr("send", s.p, s.flow, err)
	}
	q := &s.reqs[sl.idx]
	s.take(sl, r)
	q.size = len(buf)
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
	done, err := s.testLocked(&q.slot)
	if !done {
		s.mu.Unlock()
		return false, nil
	}
	size := q.size
	s.put(&q.slot)
	if err != nil {
		err = s.reqErr("send", err)
	}
	s.mu.Unlock()
	if err != nil {
		return false, err
	}
	if len(sizes) > 0 {
		sizes[0] = size
	}
	return true, nil
}
