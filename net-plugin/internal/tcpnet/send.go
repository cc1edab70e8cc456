package tcpnet

import (
	"fmt"
	"net"
	"sync"
	"sync/atomic"
	"syscall"

	"golang.org/x/sys/unix"

	"github.com/metaroce/metaroce/net-plugin/internal/backend"
)

// inlineMax is the largest message Isend writes itself, in bytes, when its
// socket has nothing queued: one non-blocking writev in the caller's thread
// costs less than waking the socket's writer goroutine (tens of µs on a busy
// host), and small messages are the latency-bound ones.
const inlineMax = 16 << 10

// MaxSendRequests is the number of sends one connection can have in flight:
// NCCL_NET_MAX_REQUESTS (32) times backend.MaxRecvs, so that 32 grouped
// receives can be fed at once.
const MaxSendRequests = 32 * backend.MaxRecvs

// sendReq is one isend. It lives in its connection's fixed slot array.
type sendReq struct {
	conn *sendConn
	hdr  [frameLen]byte
	buf  []byte
	off  int // bytes of hdr+buf already written (by an inline write)
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
	raws   []syscall.RawConn
	// wmu[i] is held while bytes go to socket i; pending[i] counts messages
	// queued for socket i and not yet fully written. Isend writes inline
	// only when pending[i] is 0 and wmu[i] is free, which keeps each
	// socket's messages whole and in order.
	wmu     []sync.Mutex
	pending []atomic.Int32
	stop    chan struct{}
	wg      sync.WaitGroup
	down    sync.Once // shutdown

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
	s.wmu = make([]sync.Mutex, len(socks))
	s.pending = make([]atomic.Int32, len(socks))
	for i := range socks {
		if rc, err := socks[i].SyscallConn(); err == nil {
			s.raws = append(s.raws, rc)
		}
	}
	if len(s.raws) != len(socks) {
		s.raws = nil // no inline writes
	}
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
			var bufs net.Buffers
			if r.off < frameLen {
				bufs = net.Buffers{r.hdr[r.off:], r.buf}
			} else {
				bufs = net.Buffers{r.buf[r.off-frameLen:]}
			}
			s.wmu[i].Lock()
			_, err := bufs.WriteTo(c)
			s.pending[i].Add(-1)
			s.wmu[i].Unlock()
			if err != nil {
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
	r.buf, r.used, r.off = buf, true, 0
	r.done.Store(false)
	i := s.next % uint64(len(s.queues))
	s.next++
	if s.raws != nil && len(buf) <= inlineMax && s.pending[i].Load() == 0 && s.wmu[i].TryLock() {
		r.off = s.writeNow(int(i), r)
		if r.off == frameLen+len(buf) {
			s.wmu[i].Unlock()
			r.done.Store(true)
			return r, nil
		}
		// The rest (or, after an error, all of it) goes through the
		// writer, which reports any failure; it cannot overtake us
		// because we still hold the socket.
		s.pending[i].Add(1)
		s.queues[i] <- r
		s.wmu[i].Unlock()
		return r, nil
	}
	s.pending[i].Add(1)
	s.queues[i] <- r // never blocks: a queue holds at most MaxSendRequests
	return r, nil
}

// writeNow writes r's header and payload to socket i without blocking and
// returns how many bytes went out (0 on EAGAIN or an error).
func (s *sendConn) writeNow(i int, r *sendReq) int {
	var n int
	var werr error
	err := s.raws[i].Write(func(fd uintptr) bool {
		n, werr = unix.Writev(int(fd), [][]byte{r.hdr[:], r.buf})
		return true
	})
	if err != nil || werr != nil || n < 0 {
		// EAGAIN: the socket buffer is full. Any other error the writer
		// meets again, and it fails the connection.
		return 0
	}
	return n
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

// Abort fails the requests in flight and stops the writers; once it
// returns no goroutine reads a caller's buffer any more.
func (s *sendConn) Abort() {
	s.mu.Lock()
	if s.err == nil {
		s.err = fmt.Errorf("tcpnet: connection to %s aborted (its memory was deregistered with requests in flight): %w", s.peer, backend.ErrInternal)
	}
	s.mu.Unlock()
	s.shutdown()
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
	s.shutdown()
	return nil
}

// shutdown stops the writers, closes the sockets and waits for the
// writers to be gone; later calls do nothing.
func (s *sendConn) shutdown() {
	s.down.Do(func() {
		close(s.stop)
		for _, c := range s.socks {
			_ = c.Close()
		}
		s.wg.Wait()
	})
}
