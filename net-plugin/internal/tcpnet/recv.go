package tcpnet

import (
	"errors"
	"fmt"
	"io"
	"net"
	"slices"
	"sync"

	"github.com/metaroce/metaroce/net-plugin/internal/backend"
)

// MaxRecvRequests is the number of grouped receives one connection can have
// posted at once (NCCL_NET_MAX_REQUESTS is 32).
const MaxRecvRequests = 64

// recvGroup is one grouped receive: n buffers that together take the next n
// messages of the connection (indices start..start+n-1), each landing in the
// buffer whose tag equals the message's tag.
type recvGroup struct {
	conn    *recvConn
	idx     int32
	used    bool
	start   uint64
	n       int
	filled  int // messages fully received
	bufs    [backend.MaxRecvs][]byte
	tags    [backend.MaxRecvs]int32
	sizes   [backend.MaxRecvs]int
	claimed [backend.MaxRecvs]bool
}

// recvConn reads message k from socket k mod len(socks); one reader goroutine
// per socket parses the header, waits for the receive that covers k, and
// reads the payload straight into the chosen buffer.
type recvConn struct {
	peer  string
	socks []*net.TCPConn
	wg    sync.WaitGroup
	down  sync.Once // shutdown

	mu     sync.Mutex
	cond   sync.Cond
	posted uint64 // messages covered by posted receives
	err    error  // first failure; sticky
	closed bool
	eof    []bool   // socket i ended cleanly at a message boundary
	nextK  []uint64 // next message index socket i will read
	order  []int32  // posted, unreleased groups in posting order
	free   []int32
	groups [MaxRecvRequests]recvGroup
}

func newRecvConn(socks []*net.TCPConn) *recvConn {
	r := &recvConn{peer: socks[0].RemoteAddr().String(), socks: socks, eof: make([]bool, len(socks)), nextK: make([]uint64, len(socks))}
	r.cond.L = &r.mu
	r.free = make([]int32, MaxRecvRequests)
	r.order = make([]int32, 0, MaxRecvRequests)
	for i := range r.groups {
		r.groups[i].conn, r.groups[i].idx = r, int32(i)
		r.free[i] = int32(MaxRecvRequests - 1 - i)
	}
	for i := range socks {
		r.nextK[i] = uint64(i)
		r.wg.Add(1)
		go r.reader(i)
	}
	return r
}

func (r *recvConn) reader(i int) {
	defer r.wg.Done()
	c := r.socks[i]
	var hb [frameLen]byte
	var fh frameHeader
	for k := uint64(i); ; k += uint64(len(r.socks)) {
		n, err := io.ReadFull(c, hb[:])
		if err != nil {
			if n == 0 && errors.Is(err, io.EOF) {
				r.mu.Lock()
				r.eof[i] = true
				r.cond.Broadcast()
				r.mu.Unlock()
				return
			}
			r.fail(fmt.Errorf("tcpnet: receiving header of message %d from peer %s: %w (peer process exited or network failed)", k, r.peer, err))
			return
		}
		if _, err := parseFrameHeader(&fh, hb[:]); err != nil {
			r.fail(fmt.Errorf("%w (from peer %s, message %d)", err, r.peer, k))
			return
		}
		buf, slot, g, err := r.claim(k, fh)
		if err != nil {
			r.fail(err)
			return
		}
		if g == nil {
			return // closed; buf may be empty for a 0-byte message
		}
		if _, err := io.ReadFull(c, buf); err != nil {
			r.fail(fmt.Errorf("tcpnet: receiving %d-byte message %d from peer %s: %w (peer process exited or network failed mid-message)", fh.Size, k, r.peer, err))
			return
		}
		r.mu.Lock()
		g.sizes[slot] = len(buf)
		g.filled++
		r.nextK[i] = k + uint64(len(r.socks))
		r.mu.Unlock()
	}
}

// claim waits until a receive covering message k is posted, then picks the
// buffer by tag and returns it cut to the message size (empty, possibly
// nil, for a 0-byte message). It returns a nil group (and no error) when
// the connection is closed meanwhile.
func (r *recvConn) claim(k uint64, fh frameHeader) ([]byte, int, *recvGroup, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for r.posted <= k && !r.closed && r.err == nil {
		r.cond.Wait()
	}
	if r.closed || r.err != nil {
		return nil, 0, nil, nil
	}
	for _, gi := range r.order {
		g := &r.groups[gi]
		if k < g.start || k >= g.start+uint64(g.n) {
			continue
		}
		for s := range g.n {
			if g.claimed[s] || g.tags[s] != fh.Tag {
				continue
			}
			if fh.Size > uint64(len(g.bufs[s])) {
				return nil, 0, nil, fmt.Errorf("tcpnet: peer %s sent %d bytes with tag %d but the posted receive holds only %d bytes (message truncated): %w", r.peer, fh.Size, fh.Tag, len(g.bufs[s]), backend.ErrInvalidUsage)
			}
			g.claimed[s] = true
			return g.bufs[s][:fh.Size:fh.Size], s, g, nil
		}
		return nil, 0, nil, fmt.Errorf("tcpnet: message %d from peer %s has tag %d, but the grouped receive it belongs to expects tags %v: %w", k, r.peer, fh.Tag, g.tags[:g.n], backend.ErrInvalidUsage)
	}
	return nil, 0, nil, fmt.Errorf("tcpnet: message %d from peer %s matches no posted receive: %w", k, r.peer, backend.ErrInternal)
}

// fail records the first error, wakes waiters and shuts the sockets.
func (r *recvConn) fail(err error) {
	r.mu.Lock()
	if r.err == nil && !r.closed {
		r.err = err
	}
	r.cond.Broadcast()
	r.mu.Unlock()
	for _, c := range r.socks {
		_ = c.Close()
	}
}

// Irecv posts a grouped receive; (nil, nil) when every slot is busy.
func (r *recvConn) Irecv(bufs [][]byte, tags []int32) (backend.Request, error) {
	n := len(bufs)
	if n < 1 || n > backend.MaxRecvs || len(tags) != n {
		return nil, fmt.Errorf("tcpnet: grouped receive of %d buffers and %d tags (want 1..%d of each): %w", n, len(tags), backend.MaxRecvs, backend.ErrInternal)
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.closed {
		return nil, fmt.Errorf("tcpnet: receive on closed connection from %s: %w", r.peer, backend.ErrInternal)
	}
	if r.err != nil {
		return nil, r.err
	}
	if len(r.free) == 0 {
		return nil, nil
	}
	gi := r.free[len(r.free)-1]
	r.free = r.free[:len(r.free)-1]
	g := &r.groups[gi]
	g.used, g.start, g.n, g.filled = true, r.posted, n, 0
	for s := range n {
		g.bufs[s], g.tags[s], g.sizes[s], g.claimed[s] = bufs[s], tags[s], 0, false
	}
	r.order = append(r.order, gi)
	r.posted += uint64(n)
	r.cond.Broadcast()
	return g, nil
}

// Test reports the group done when all n messages have arrived.
func (g *recvGroup) Test(sizes []int) (bool, error) {
	r := g.conn
	r.mu.Lock()
	defer r.mu.Unlock()
	if !g.used {
		return false, fmt.Errorf("tcpnet: test of a receive request that is not in flight: %w", backend.ErrInternal)
	}
	if g.filled == g.n {
		copy(sizes, g.sizes[:g.n])
		g.release()
		return true, nil
	}
	if r.err != nil {
		g.release()
		return false, r.err
	}
	if k, ok := g.starved(); ok {
		g.release()
		return false, fmt.Errorf("tcpnet: peer %s closed the connection before sending message %d (peer process exited or closed its send side early): %w", r.peer, k, backend.ErrRemote)
	}
	return false, nil
}

// starved reports a message of g that can never arrive because its socket
// ended; r.mu must be held.
func (g *recvGroup) starved() (uint64, bool) {
	r := g.conn
	for k := g.start; k < g.start+uint64(g.n); k++ {
		s := k % uint64(len(r.socks))
		if r.eof[s] && k >= r.nextK[s] {
			return k, true
		}
	}
	return 0, false
}

// release returns g to the free list; r.mu must be held.
func (g *recvGroup) release() {
	if !g.used {
		return
	}
	r := g.conn
	g.used = false
	for s := range g.n {
		g.bufs[s] = nil
	}
	if i := slices.Index(r.order, g.idx); i >= 0 {
		r.order = slices.Delete(r.order, i, i+1)
	}
	r.free = append(r.free, g.idx)
}

// Abort fails the posted receives and stops the readers; once it returns
// no goroutine writes into a caller's buffer any more.
func (r *recvConn) Abort() {
	r.mu.Lock()
	if r.err == nil {
		r.err = fmt.Errorf("tcpnet: connection from %s aborted (its memory was deregistered with requests in flight): %w", r.peer, backend.ErrInternal)
	}
	r.cond.Broadcast()
	r.mu.Unlock()
	r.shutdown()
}

// Close shuts the sockets and waits for the readers, so that once it
// returns no goroutine writes into a caller's buffer.
func (r *recvConn) Close() error {
	r.mu.Lock()
	if r.closed {
		r.mu.Unlock()
		return nil
	}
	r.closed = true
	r.cond.Broadcast()
	r.mu.Unlock()
	r.shutdown()
	return nil
}

// shutdown closes the sockets and waits for the readers to be gone; later
// calls do nothing.
func (r *recvConn) shutdown() {
	r.down.Do(func() {
		for _, c := range r.socks {
			_ = c.Close()
		}
		r.wg.Wait()
	})
}
