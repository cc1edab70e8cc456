package tcpnet

import (
	"fmt"
	"net"
	"sync"
	"sync/atomic"

	"github.com/metaroce/metaroce/net-plugin/internal/backend"
)

// MaxSendRequests is the number of sends one connection can have in flight:
// NCCL_NET_MAX_REQUESTS (32) times backend.MaxRecvs, so that 32 grouped
// receives can be fed at once.
const MaxSendRequests = 32 * backend.MaxRecvs

// sendReq is one isend. It lives in its connection's fixed slot array.
type sendReq struct {
	conn *sendConn
	hdr  [frameLen]byte
	buf  []byte
	done atomic.Bool
	idx  int32 // slot index in conn.reqs
	used bool  // guarded by conn.mu
}

// sendConn writes message k whole on socket k mod len(socks); one writer
// goroutine per socket drains that socket's queue in order.
type sendConn struct {
	peer   string
	socks  []*net.TCPConn
	queues []chan *sendReq
	stop   chan struct{}
	wg     sync.WaitGroup

	mu     sync.Mutex
	next   uint64 // messages posted so far
	err    error  // first failure; sticky
	closed bool
	free   []int32 // free slot indices
	reqs   [MaxSendRequests]sendReq
}

func newSendConn(socks []*net.TCPConn) *sendConn {
	s := &sendConn{peer: socks[0].RemoteAddr().String(), socks: socks, stop: make(chan struct{})}
	s.free = make([]int32, MaxSendRequests)
	for i := range s.reqs {
		s.reqs[i].conn, s.reqs[i].idx = s, int32(i)
		s.free[i] = int32(MaxSendRequests - 1 - i)
	}
	s.queues = make([]chan *sendReq, len(socks))
	for i := range socks {
		s.queues[i] = make(chan *sendReq, MaxSendRequests)
		s.wg.Add(1)
		go s.writer(i)
	}
	return s
}

func (s *sendConn) writer(i int) {
	defer s.wg.Done()
	c := s.socks[i]
	for {
		select {
		case <-s.stop:
			return
		case r := <-s.queues[i]:
			bufs := net.Buffers{r.hdr[:], r.buf}
			if _, err := bufs.WriteTo(c); err != nil {
				s.fail(fmt.Errorf("tcpnet: sending %d bytes to peer %s: %w (peer process exited or network failed)", len(r.buf), s.peer, err))
				return
			}
			r.done.Store(true)
		}
	}
}

// fail records the first error and shuts every socket so that all writers
// stop and the peer sees the connection end.
func (s *sendConn) fail(err error) {
	s.mu.Lock()
	if s.err == nil {
		s.err = err
	}
	s.mu.Unlock()
	for _, c := range s.socks {
		_ = c.Close()
	}
}

// Isend queues buf; it returns (nil, nil) when every slot is busy.
func (s *sendConn) Isend(buf []byte, tag int32) (backend.Request, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return nil, fmt.Errorf("tcpnet: send on closed connection to %s: %w", s.peer, backend.ErrInternal)
	}
	if s.err != nil {
		return nil, s.err
	}
	if len(s.free) == 0 {
		return nil, nil
	}
	idx := s.free[len(s.free)-1]
	r := &s.reqs[idx]
	fh := frameHeader{Tag: tag, Size: uint64(len(buf))}
	if _, err := fh.Append(r.hdr[:0]); err != nil {
		return nil, err
	}
	s.free = s.free[:len(s.free)-1]
	r.buf, r.used = buf, true
	r.done.Store(false)
	q := s.queues[s.next%uint64(len(s.queues))]
	s.next++
	q <- r // never blocks: a queue holds at most MaxSendRequests
	return r, nil
}

// Test reports completion once the message is in the kernel's socket buffer.
func (r *sendReq) Test(sizes []int) (bool, error) {
	s := r.conn
	if r.done.Load() {
		s.mu.Lock()
		r.release()
		s.mu.Unlock()
		if len(sizes) > 0 {
			sizes[0] = len(r.buf)
		}
		return true, nil
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if !r.used {
		return false, fmt.Errorf("tcpnet: test of a send request that is not in flight: %w", backend.ErrInternal)
	}
	if s.err != nil {
		r.release()
		return false, s.err
	}
	return false, nil
}

// release returns r to the free list; s.mu must be held.
func (r *sendReq) release() {
	if r.used {
		r.used = false
		r.conn.free = append(r.conn.free, r.idx)
	}
}

// Close stops the writers and closes the sockets. Once it returns no
// goroutine touches a caller's buffer any more.
func (s *sendConn) Close() error {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return nil
	}
	s.closed = true
	s.mu.Unlock()
	close(s.stop)
	for _, c := range s.socks {
		_ = c.Close()
	}
	s.wg.Wait()
	return nil
}
