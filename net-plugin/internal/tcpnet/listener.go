package tcpnet

import (
	"errors"
	"fmt"
	"io"
	"net"
	"net/netip"
	"sync"
	"time"

	"github.com/metaroce/metaroce/net-plugin/internal/backend"
)

// maxPendingConns bounds half-assembled connections per listener; more
// simultaneous strangers than this are dropped.
const maxPendingConns = 64

// listener accepts TCP sockets in a goroutine, groups them by connection id
// and hands complete connections to Accept through a buffered channel.
type listener struct {
	cfg    Config
	ln     *net.TCPListener
	handle []byte
	nonce  uint64
	ready  chan *recvConn
	done   chan struct{}

	mu      sync.Mutex
	err     error                      // first fatal accept error
	pending map[uint64]*[]*net.TCPConn // connID -> sockets by index
	closed  bool
}

func newListener(cfg Config, at netip.AddrPort, nonce uint64) (*listener, error) {
	ln, err := net.ListenTCP("tcp", net.TCPAddrFromAddrPort(at))
	if err != nil {
		return nil, fmt.Errorf("tcpnet: listen on %v: %w", at, err)
	}
	bound := ln.Addr().(*net.TCPAddr).AddrPort()
	h := listenHandle{Addr: netip.AddrPortFrom(at.Addr(), bound.Port()), Socks: cfg.Socks, Nonce: nonce}
	hb, err := h.Append(nil)
	if err != nil {
		_ = ln.Close()
		return nil, err
	}
	l := &listener{cfg: cfg, ln: ln, handle: hb, nonce: nonce, ready: make(chan *recvConn, 16), done: make(chan struct{}), pending: map[uint64]*[]*net.TCPConn{}}
	go l.acceptLoop()
	return l, nil
}

func (l *listener) Handle() []byte { return l.handle }

func (l *listener) acceptLoop() {
	for {
		c, err := l.ln.AcceptTCP()
		if err != nil {
			l.mu.Lock()
			if !l.closed && l.err == nil {
				l.err = fmt.Errorf("tcpnet: accept on %v: %w", l.ln.Addr(), err)
			}
			l.mu.Unlock()
			return
		}
		go l.greet(c)
	}
}

// greet reads the hello of one socket (bounded by cfg.Timeout) and files it
// under its connection; the last socket completes the connection.
func (l *listener) greet(c *net.TCPConn) {
	var buf [helloLen]byte
	_ = c.SetReadDeadline(time.Now().Add(l.cfg.Timeout))
	var h hello
	if _, err := io.ReadFull(c, buf[:]); err != nil {
		_ = c.Close()
		return
	}
	if _, err := parseHello(&h, buf[:]); err != nil || h.Nonce != l.nonce || h.Socks != l.cfg.Socks {
		_ = c.Close() // a stranger or a stale handle: not ours
		return
	}
	_ = c.SetReadDeadline(time.Time{})
	tuneSocket(c, l.cfg.Timeout)

	l.mu.Lock()
	socks, ok := l.pending[h.ConnID]
	if !ok {
		if l.closed || len(l.pending) >= maxPendingConns {
			l.mu.Unlock()
			_ = c.Close()
			return
		}
		s := make([]*net.TCPConn, h.Socks)
		socks = &s
		l.pending[h.ConnID] = socks
	}
	if (*socks)[h.Index] != nil {
		l.mu.Unlock()
		_ = c.Close()
		return
	}
	(*socks)[h.Index] = c
	for _, s := range *socks {
		if s == nil {
			l.mu.Unlock()
			return
		}
	}
	delete(l.pending, h.ConnID)
	l.mu.Unlock()

	rc := newRecvConn(*socks)
	select {
	case l.ready <- rc:
	case <-l.done:
		_ = rc.Close()
	}
}

// Accept returns a connection if one is complete; it never blocks.
func (l *listener) Accept() (backend.RecvConn, error) {
	select {
	case rc := <-l.ready:
		return rc, nil
	default:
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.closed {
		return nil, fmt.Errorf("tcpnet: accept on closed listener: %w", backend.ErrInternal)
	}
	return nil, l.err
}

// Close stops accepting and drops half-assembled and unaccepted connections.
func (l *listener) Close() error {
	l.mu.Lock()
	if l.closed {
		l.mu.Unlock()
		return nil
	}
	l.closed = true
	close(l.done)
	for id, socks := range l.pending {
		for _, s := range *socks {
			if s != nil {
				_ = s.Close()
			}
		}
		delete(l.pending, id)
	}
	l.mu.Unlock()
	err := l.ln.Close()
	for {
		select {
		case rc := <-l.ready:
			_ = rc.Close()
		default:
			if errors.Is(err, net.ErrClosed) {
				err = nil
			}
			return err
		}
	}
}
