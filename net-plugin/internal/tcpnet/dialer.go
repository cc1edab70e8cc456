package tcpnet

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"sync"
	"syscall"
	"time"

	"github.com/metaroce/metaroce/net-plugin/internal/backend"
)

// refusedBackoff is the pause between attempts while the listener's port
// refuses connections (its backlog may be momentarily full).
const refusedBackoff = 100 * time.Millisecond

// dialer opens the sockets of one connection in background goroutines; Step
// only collects their results, so connect never blocks. Each socket goes
// through connect, hello, and the listener's answer; it counts as
// connected only once the listener accepted it, and the connection is the
// dialer's once all are, when it confirms it to the listener
// (connConfirmed).
type dialer struct {
	h      listenHandle
	cancel context.CancelFunc
	wg     sync.WaitGroup
	// timeout is the connect timeout (Config.Timeout), for the errors
	// that name it.
	timeout time.Duration

	// verdictRead, when set (by tests), runs in a socket's goroutine just
	// after its handshake read the listener's answer, before the handshake
	// looks at whether the connect's context ended meanwhile.
	verdictRead func(idx int)

	mu       sync.Mutex
	socks    []*net.TCPConn
	n        int   // sockets the listener accepted so far
	err      error // first failure
	taken    bool  // Step returned the connection, or Abort ended the attempt
	aborting bool  // Abort has begun: no socket is taken, nothing confirmed
}

func newDialer(cfg Config, h listenHandle, verdictRead func(idx int)) *dialer {
	ctx, cancel := context.WithTimeout(context.Background(), cfg.Timeout)
	d := &dialer{h: h, cancel: cancel, timeout: cfg.Timeout, verdictRead: verdictRead, socks: make([]*net.TCPConn, h.Socks)}
	id := randomNonZero()
	for i := range h.Socks {
		d.wg.Add(1)
		go d.dialOne(ctx, cfg, i, id)
	}
	return d
}

func (d *dialer) dialOne(ctx context.Context, cfg Config, idx int, id uint64) {
	defer d.wg.Done()
	hb, _ := (&hello{Index: idx, Socks: d.h.Socks, Nonce: d.h.Nonce, ConnID: id}).Append(nil)
	var nd net.Dialer
	refused := false // the latest answer to a dial was a refusal
	for {
		c, err := nd.DialContext(ctx, "tcp", d.h.Addr.String())
		if err == nil {
			refused = false
			tc := c.(*net.TCPConn)
			if err = d.handshake(ctx, tc, hb, idx); err == nil {
				tuneSocket(tc, cfg.Timeout)
				d.finish(idx, tc, nil)
				return
			}
			_ = tc.Close()
			if errors.Is(err, backend.ErrRemote) {
				d.finish(idx, nil, err) // the listener's verdict, which names the peer
				return
			}
		}
		if errors.Is(err, syscall.ECONNREFUSED) {
			refused = true
			select {
			case <-time.After(refusedBackoff):
				continue
			case <-ctx.Done():
				err = ctx.Err()
			}
		}
		if refused && errors.Is(ctx.Err(), context.DeadlineExceeded) {
			// The peer's host answered, to the end, that nothing listens on
			// the port: a well-formed handle naming a listener the peer no
			// longer has (backend.Backend.Dial), or one swamped throughout.
			d.finish(idx, nil, fmt.Errorf("tcpnet: peer %v refused socket %d of %d until the connect timeout (%v, METAROCE_TIMEOUT_MS): nothing listens on that port, so the listen handle is stale (its listener closed, or its process exited), or the listener's accept queue stayed full: %w", d.h.Addr, idx+1, d.h.Socks, cfg.Timeout, backend.ErrRemote))
			return
		}
		d.finish(idx, nil, fmt.Errorf("tcpnet: connecting to peer %v (socket %d of %d): %w; is the peer alive and %v reachable from here?", d.h.Addr, idx+1, d.h.Socks, err, d.h.Addr.Addr()))
		return
	}
}

// handshake writes the hello on tc and reads the listener's answer. It runs
// in dialOne's goroutine; ctx ending (Abort, or the connect timeout)
// interrupts it at once by expiring the socket's deadlines. A refusal is
// returned as an ErrRemote error that names the peer.
//
// An answer read in full counts even if ctx ended just after: the listener
// filed the socket before it answered helloAccepted, and, were it the last
// one, the connection is ready on both sides but for the dialer's
// confirmation (finish), so the connect may as well complete. Only a
// handshake that ctx interrupted fails with ctx's error; the socket is
// then closed unconfirmed, which the listener reads as a connect that
// gave up. (An Abort takes no socket, whatever its answer: see finish.)
func (d *dialer) handshake(ctx context.Context, tc *net.TCPConn, hb []byte, idx int) error {
	expired := make(chan struct{})
	stop := context.AfterFunc(ctx, func() {
		_ = tc.SetDeadline(time.Unix(1, 0))
		close(expired)
	})
	_, err := tc.Write(hb)
	var verdict [1]byte
	if err == nil {
		_, err = io.ReadFull(tc, verdict[:])
	}
	if d.verdictRead != nil && err == nil {
		d.verdictRead(idx)
	}
	if !stop() {
		<-expired // the deadlines are expired: wait, so that clearing them is the last word
		if err != nil {
			return ctx.Err()
		}
		_ = tc.SetDeadline(time.Time{})
	}
	if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
		// Like an answer that is no verdict: what took the socket is no
		// listener of this handle, a well-formed handle's stale or foreign
		// case (backend.Backend.Dial).
		return fmt.Errorf("tcpnet: peer %v closed socket %d of %d without answering its hello: what listens there is not a MetaRoCE tcp listener of this version, so the listen handle is stale (its listener closed and the port was reused) or from another plugin version: %w", d.h.Addr, idx+1, d.h.Socks, backend.ErrRemote)
	}
	if err != nil {
		return err
	}
	switch verdict[0] {
	case helloAccepted:
		return nil
	case helloStale:
		return fmt.Errorf("tcpnet: peer %v rejected socket %d of %d: no listener there has this handle's nonce, so the listen handle is stale (its listener closed and the port was reused) or from another job: %w", d.h.Addr, idx+1, d.h.Socks, backend.ErrRemote)
	case helloRefused:
		return fmt.Errorf("tcpnet: peer %v refused socket %d of %d: its listener is closing, has %d connections half set up by dialers still connecting (more concurrent connects to it than that?), or dropped this connection because its sockets took more than twice the listener's connect timeout to arrive (is METAROCE_TIMEOUT_MS, %v here, the same on every rank?): %w", d.h.Addr, idx+1, d.h.Socks, maxPendingConns, d.timeout, backend.ErrRemote)
	}
	return fmt.Errorf("tcpnet: peer %v answered the hello of socket %d of %d with %#02x: not a MetaRoCE tcp listener of this version: %w", d.h.Addr, idx+1, d.h.Socks, verdict[0], backend.ErrRemote)
}

// finish records the outcome of socket idx: c once the listener accepted
// it, or the error that ended it. The socket that completes the set
// confirms the connection to the listener (confirmLocked), in the same
// step as it is recorded, so the connection is the dialer's exactly when
// the listener is told so; a socket that arrives after a failure or once
// Abort has begun is closed instead, and the connection is never
// confirmed. The first error fails the connect, and
// the sockets already accepted are closed at once, not at Abort, which may
// come much later (NCCL may stop calling connect without a word, see
// core's abandonAfter): until they close, the listener keeps the
// connection half assembled (listener.dropAbandonedLocked). The first
// error also cancels the connect's context, which ends the other sockets'
// dials, backoffs and handshakes at once (closing their sockets) instead
// of letting them run until the connect timeout for a connection already
// failed, each socket the listener accepted meanwhile being closed here
// as soon as it arrived.
func (d *dialer) finish(idx int, c *net.TCPConn, err error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if err != nil {
		if d.err == nil {
			d.err = err
			d.cancel()
			for i, s := range d.socks {
				if s != nil {
					_ = s.Close()
					d.socks[i] = nil
				}
			}
		}
		return
	}
	if d.taken || d.aborting || d.err != nil {
		_ = c.Close()
		return
	}
	d.socks[idx] = c
	d.n++
	if d.n == len(d.socks) {
		d.confirmLocked()
	}
}

// confirmLocked writes connConfirmed on socket 0 once every socket is
// accepted: from then on the connection is the dialer's, and the listener
// hands it out. The socket has carried nothing since the listener's
// answer, so the byte goes to an empty send buffer and the write does not
// wait. The caller holds d.mu.
//
// A listener that closed or dropped the connection meanwhile (it closed,
// or dropped the connection as half set up too long) closed its side of
// the sockets, which sends a FIN: a write still succeeds on such a socket,
// the peer answering it with a reset only afterwards. So each socket is
// first peeked without waiting, and one at the end of its stream, or
// failed, fails the connect like any socket error, closing the sockets,
// as does a write that fails. That is still racy: a close whose FIN has
// not arrived yet goes unseen, the connect completes, and the comm's
// first send fails instead, naming the peer.
func (d *dialer) confirmLocked() {
	for i, s := range d.socks {
		if peek(s) == peekEnded {
			d.failConfirmLocked(i, "it reached the end of its stream")
			return
		}
	}
	if _, err := d.socks[0].Write([]byte{connConfirmed}); err != nil {
		d.failConfirmLocked(0, err.Error())
	}
}

// failConfirmLocked fails the connect, closing its sockets, because the
// listener closed socket idx (how tells how the dialer found out) before
// the connection was confirmed. The caller holds d.mu.
func (d *dialer) failConfirmLocked(idx int, how string) {
	d.err = fmt.Errorf("tcpnet: peer %v accepted all %d sockets but closed socket %d of them before this side could confirm the connection (%s): is the peer's listener closing, or did it drop the connection as half set up too long (is METAROCE_TIMEOUT_MS, %v here, the same on every rank)? %w", d.h.Addr, d.h.Socks, idx+1, how, d.timeout, backend.ErrRemote)
	d.cancel()
	for i, s := range d.socks {
		_ = s.Close()
		d.socks[i] = nil
	}
}

// Step returns the connection once every socket is up.
func (d *dialer) Step() (backend.SendConn, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.taken {
		return nil, fmt.Errorf("tcpnet: connection to %v already returned: %w", d.h.Addr, backend.ErrInternal)
	}
	if d.err != nil {
		return nil, d.err
	}
	if d.n < len(d.socks) {
		return nil, nil
	}
	d.taken = true
	d.cancel()
	return newSendConn(d.socks), nil
}

// Abort cancels the attempt and closes sockets not yet handed out. It
// marks the dialer aborting before it cancels, so that a socket whose
// answer its goroutine reads meanwhile is closed, not taken: an Abort
// that begins before the last socket's finish leaves the connection
// unconfirmed, and the listener drops it instead of handing it out. An
// Abort that comes after that finish, which confirmed the connection, and
// before Step took it closes sockets that the listener hands out: the
// comm NCCL accepts there fails its first receive, naming the peer. That
// is acceptable, as NCCL abandoned the connect, and nothing tells the
// listener otherwise once the confirmation is on its way.
func (d *dialer) Abort() {
	d.mu.Lock()
	d.aborting = true
	d.mu.Unlock()
	d.cancel()
	d.wg.Wait()
	d.mu.Lock()
	defer d.mu.Unlock()
	if !d.taken {
		for _, s := range d.socks {
			if s != nil {
				_ = s.Close()
			}
		}
		d.taken = true
	}
}
