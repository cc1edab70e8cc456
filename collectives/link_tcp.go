package collectives

import (
	"context"
	"encoding/binary"
	"fmt"
	"io"
	"net"
	"net/netip"
	"slices"
	"sync"
	"time"
)

// tcpFactory opens the kernel-TCP baseline: one TCP connection per (peer,
// channel), as NCCL's socket transport uses several sockets per peer. It is
// the comparison users run beside MetaRoCE on their own network.
type tcpFactory struct {
	ln  net.Listener
	cfg Config
}

func newTCPFactory(cfg Config) (*tcpFactory, error) {
	host := "127.0.0.1"
	if len(cfg.UDP.Addrs) > 0 {
		host = cfg.UDP.Addrs[0].String()
	}
	ln, err := net.Listen("tcp", net.JoinHostPort(host, "0"))
	if err != nil {
		return nil, fmt.Errorf("collectives: opening the TCP baseline listener on %s: %w", host, err)
	}
	return &tcpFactory{ln: ln, cfg: cfg}, nil
}

func (f *tcpFactory) blob() []byte { return []byte(f.ln.Addr().String()) }

func (f *tcpFactory) abort() { f.ln.Close() }

func (f *tcpFactory) connect(ctx context.Context, rank int, blobs [][]byte, dl setupDeadline) (link, error) {
	n, chans := len(blobs), f.cfg.Channels
	l := &tcpLink{streams: make([][]*tcpStream, n), channels: chans, addr: f.ln.Addr().String()}
	for r := range l.streams {
		l.streams[r] = make([]*tcpStream, chans)
	}
	stop := context.AfterFunc(ctx, func() { f.ln.Close() })
	defer stop()
	defer f.ln.Close()
	var d net.Dialer
	for r := 0; r < rank; r++ {
		for ch := 0; ch < chans; ch++ {
			c, err := d.DialContext(ctx, "tcp", string(blobs[r]))
			if err != nil {
				l.close()
				return nil, dl.wrap(fmt.Errorf("collectives: tcp: rank %d connecting to rank %d at %s%s: %w", rank, r, blobs[r], dl.ended(ctx.Err()), err), ctx.Err())
			}
			var hello [8]byte
			binary.BigEndian.PutUint32(hello[:], uint32(rank))
			binary.BigEndian.PutUint32(hello[4:], uint32(ch))
			if _, err := c.Write(hello[:]); err != nil {
				c.Close()
				l.close()
				return nil, fmt.Errorf("collectives: tcp: rank %d greeting rank %d: %w", rank, r, err)
			}
			l.streams[r][ch] = newTCPStream(c, r)
		}
	}
	if err := f.acceptAbove(ctx, rank, l, dl); err != nil {
		l.close()
		return nil, err
	}
	return l, nil
}

// greeting is what acceptAbove learned of one accepted connection: the
// rank and channel its greeting named, or why it sent none. A nil c is the
// listener's own failure.
type greeting struct {
	c        net.Conn
	rank, ch int
	err      error
}

// acceptAbove accepts the connections of the ranks above rank, one per
// channel, into l.streams, until every one has connected or ctx ends (the
// caller closes the listener then, and l); its error names dl where that
// deadline ran out.
//
// The greetings are read concurrently, and a connection whose greeting
// does not name a stream still missing (a port scan, a health check, a
// stray that sends nothing or something else) is closed and does not
// count: the listener is on an ephemeral port that anything may reach.
// Read one after another, a silent one held the setup until its deadline,
// and one with bytes of its own failed New at once, on every rank.
func (f *tcpFactory) acceptAbove(ctx context.Context, rank int, l *tcpLink, dl setupDeadline) error {
	n, chans := len(l.streams), l.channels
	if rank == n-1 {
		return nil
	}
	// reads ends with ctx, or when acceptAbove returns, and ends the
	// greeting reads still in progress then (strays); quit lets their
	// goroutines give back what they read to no one. (ctx itself is what
	// the loop below tests: its error is set before the listener that it
	// closes fails an Accept, while that of a context derived from it may
	// not be yet.)
	reads, cancel := context.WithCancel(ctx)
	defer cancel()
	quit := make(chan struct{})
	defer close(quit)
	got := make(chan greeting)
	deliver := func(g greeting) {
		select {
		case got <- g:
		case <-quit:
			if g.c != nil {
				g.c.Close()
			}
		}
	}
	go func() {
		for {
			c, err := f.ln.Accept()
			if err != nil {
				deliver(greeting{err: err})
				return
			}
			go func() {
				// The read ends with the setup: a connection that sends
				// nothing must not outlive it.
				stop := context.AfterFunc(reads, func() { c.SetReadDeadline(time.Unix(1, 0)) })
				var hello [8]byte
				_, err := io.ReadFull(c, hello[:])
				if !stop() {
					err = reads.Err() // the deadline may be set after any reset here
				}
				if err != nil {
					c.Close()
					return
				}
				deliver(greeting{c: c, rank: int(binary.BigEndian.Uint32(hello[:])), ch: int(binary.BigEndian.Uint32(hello[4:]))})
			}()
		}
	}()
	for left := (n - 1 - rank) * chans; left > 0; {
		var g greeting
		select {
		case g = <-got:
		case <-ctx.Done():
			g.err = ctx.Err()
		}
		if g.c == nil {
			if ctx.Err() != nil {
				g.err = ctx.Err() // the listener was closed because ctx ended
			}
			return dl.wrap(fmt.Errorf("collectives: tcp: rank %d waiting for ranks above it to connect (still missing: %s)%s: %w", rank, missingStreams(l.streams, rank), dl.ended(ctx.Err()), g.err), ctx.Err())
		}
		if g.rank <= rank || g.rank >= n || g.ch < 0 || g.ch >= chans || l.streams[g.rank][g.ch] != nil {
			f.cfg.Logf("rank %d: closed a connection from %v to the TCP baseline's listener: its greeting (rank %d, channel %d) names no stream this rank waits for", rank, g.c.RemoteAddr(), g.rank, g.ch)
			g.c.Close()
			continue
		}
		l.streams[g.rank][g.ch] = newTCPStream(g.c, g.rank)
		left--
	}
	return nil
}

// missingStreams lists the ranks above rank that have not connected every
// channel yet, for errors.
func missingStreams(streams [][]*tcpStream, rank int) string {
	return rankList(ranksWhere(rank+1, len(streams), func(r int) bool {
		return slices.Contains(streams[r], nil)
	}))
}

type tcpLink struct {
	streams  [][]*tcpStream
	channels int
	addr     string
}

func (l *tcpLink) send(peer, ch int, tag uint32, buf []byte, done func()) (pending, error) {
	return l.streams[peer][ch].post(true, tag, buf, done), nil
}

func (l *tcpLink) recv(peer, ch int, tag uint32, buf []byte, done func()) (pending, error) {
	return l.streams[peer][ch].post(false, tag, buf, done), nil
}

// progress returns at once: each TCP stream has goroutines of its own.
func (l *tcpLink) progress(done func() bool) bool { return done() }

// expectSenders does nothing: TCP has no receiver-driven rate hints.
func (l *tcpLink) expectSenders(int) {}

func (l *tcpLink) peerStats() []PeerStats { return nil }

func (l *tcpLink) describe() string {
	return fmt.Sprintf("tcp: kernel TCP baseline at %s, %d socket(s) per peer (one per channel)", l.addr, l.channels)
}

func (l *tcpLink) info() LinkInfo {
	li := LinkInfo{Transport: TransportTCP, Channels: l.channels}
	if ap, err := netip.ParseAddrPort(l.addr); err == nil {
		li.Addrs = []netip.Addr{ap.Addr()}
	}
	return li
}

func (l *tcpLink) close() error {
	for _, row := range l.streams {
		for _, s := range row {
			if s != nil {
				s.shutdown()
			}
		}
	}
	return nil
}

// tcpOp is one send or receive on a stream.
type tcpOp struct {
	buf    []byte
	tag    uint32 // the call's tag (callTag)
	n      int    // bytes moved, set before done is closed
	done   chan struct{}
	err    error
	notify func() // called by complete, when set
}

// complete ends op with err (nil: success) and notifies its poster.
func (o *tcpOp) complete(err error) {
	o.err = err
	close(o.done)
	if o.notify != nil {
		o.notify()
	}
}

// Sizes reports the bytes moved once the operation completed.
func (o *tcpOp) Sizes() []int {
	select {
	case <-o.done:
		return []int{o.n}
	default:
		return nil
	}
}

func (o *tcpOp) Test() (bool, error) {
	select {
	case <-o.done:
		return true, o.err
	default:
		return false, nil
	}
}

// tcpStream is one socket with a writer and a reader goroutine, each
// serving its operations in posting order. A message is a header (an
// 8-byte length and the 4-byte call tag, big endian) followed by the
// bytes.
type tcpStream struct {
	c      net.Conn
	peer   int
	sends  chan *tcpOp
	recvs  chan *tcpOp
	once   sync.Once
	closed chan struct{}
	mu     sync.Mutex
	err    error
	// down is set, under mu, before closed is closed: a post that finds
	// it set fails at once, and one that does not has queued its op
	// before the goroutines drain their queues on closed, so that no op
	// is left in a queue nobody reads.
	down bool
}

func newTCPStream(c net.Conn, peer int) *tcpStream {
	if tc, ok := c.(*net.TCPConn); ok {
		tc.SetNoDelay(true)
		tc.SetReadBuffer(4 << 20)
		tc.SetWriteBuffer(4 << 20)
	}
	s := &tcpStream{c: c, peer: peer, sends: make(chan *tcpOp, 1024), recvs: make(chan *tcpOp, 1024), closed: make(chan struct{})}
	go s.writer()
	go s.reader()
	return s
}

func (s *tcpStream) post(send bool, tag uint32, buf []byte, notify func()) pending {
	op := &tcpOp{buf: buf, tag: tag, done: make(chan struct{}), notify: notify}
	q := s.recvs
	if send {
		q = s.sends
	}
	s.mu.Lock()
	if s.down {
		s.mu.Unlock()
		op.complete(s.failure())
		return op
	}
	select {
	case q <- op:
		s.mu.Unlock()
		return op
	default:
		// A full queue: the executor posts at most maxStreamDepth ops
		// of a stream, fewer than it holds, so this does not happen.
	}
	s.mu.Unlock()
	select {
	case q <- op:
	case <-s.closed:
		op.complete(s.failure())
	}
	return op
}

// failure is the error of the stream's failed ops: what ended it, or, when
// it was shut down here first, that it was closed locally.
func (s *tcpStream) failure() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.err == nil {
		return fmt.Errorf("tcp connection to rank %d (%v) closed locally", s.peer, s.c.RemoteAddr())
	}
	return s.err
}

// connErr describes err, a failed read or write of the socket, as the
// connection's failure.
func (s *tcpStream) connErr(err error) error {
	return fmt.Errorf("tcp connection to rank %d (%v): %w", s.peer, s.c.RemoteAddr(), err)
}

// fail records err as the stream's failure (the first one wins), which
// every op still queued and every later post gets, and shuts the stream
// down. A stream already shut down here keeps "closed locally": the read
// or write that the shutdown's closing of the socket interrupted fails
// with "use of closed network connection", which would blame the
// connection.
func (s *tcpStream) fail(err error) {
	s.mu.Lock()
	if s.err == nil && !s.down {
		s.err = err
	}
	s.mu.Unlock()
	s.shutdown()
}

func (s *tcpStream) shutdown() {
	s.once.Do(func() {
		s.mu.Lock()
		s.down = true
		s.mu.Unlock()
		close(s.closed)
		s.c.Close()
	})
}

func (s *tcpStream) drain(q chan *tcpOp) {
	for {
		select {
		case op := <-q:
			op.complete(s.failure())
		default:
			return
		}
	}
}

// abort ends the stream on err (see fail): op and every request still
// queued on q fail with the stream's failure.
func (s *tcpStream) abort(op *tcpOp, q chan *tcpOp, err error) {
	s.fail(err)
	op.complete(s.failure())
	s.drain(q)
}

// tcpHeaderLen is a message's header: its length and its call tag.
const tcpHeaderLen = 12

func (s *tcpStream) writer() {
	var hdr [tcpHeaderLen]byte
	for {
		select {
		case op := <-s.sends:
			binary.BigEndian.PutUint64(hdr[:], uint64(len(op.buf)))
			binary.BigEndian.PutUint32(hdr[8:], op.tag)
			_, err := s.c.Write(hdr[:])
			if err == nil && len(op.buf) > 0 {
				_, err = s.c.Write(op.buf)
			}
			if err != nil {
				s.abort(op, s.sends, s.connErr(err))
				return
			}
			op.n = len(op.buf)
			op.complete(nil)
		case <-s.closed:
			s.drain(s.sends)
			return
		}
	}
}

func (s *tcpStream) reader() {
	var hdr [tcpHeaderLen]byte
	for {
		var op *tcpOp
		select {
		case op = <-s.recvs:
		case <-s.closed:
			s.drain(s.recvs)
			return
		}
		_, err := io.ReadFull(s.c, hdr[:])
		if err == nil {
			n := binary.BigEndian.Uint64(hdr[:])
			if tag := binary.BigEndian.Uint32(hdr[8:]); tag != op.tag {
				// The message belongs to another call of the peer's
				// (callTag): the ranks called different collectives,
				// or disagreed on the count, type, reduction or root.
				s.abort(op, s.recvs, fmt.Errorf("%w: rank %d's message belongs to a call other than this rank's (call tag %#08x, here %#08x)", ErrMismatch, s.peer, tag, op.tag))
				return
			}
			if n > uint64(len(op.buf)) {
				// The connection is fine, but the peer's plan has a
				// longer message here than this rank's: the ranks
				// disagree on the call. The stream cannot go on (the
				// message's bytes are still in the socket), so it
				// ends, with an error that says why.
				s.abort(op, s.recvs, fmt.Errorf("%w: rank %d sent %d bytes for a %d-byte receive", ErrMismatch, s.peer, n, len(op.buf)))
				return
			}
			_, err = io.ReadFull(s.c, op.buf[:n])
			op.n = int(n)
		}
		if err != nil {
			s.abort(op, s.recvs, s.connErr(err))
			return
		}
		op.complete(nil)
	}
}
