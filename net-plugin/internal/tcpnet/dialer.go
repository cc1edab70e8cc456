package tcpnet

import (
	"context"
	"errors"
	"fmt"
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
// only collects their results.
type dialer struct {
	h      listenHandle
	cancel context.CancelFunc
	wg     sync.WaitGroup

	mu    sync.Mutex
	socks []*net.TCPConn
	n     int   // sockets connected so far
	err   error // first failure
	taken bool  // Step returned the connection
}

func newDialer(cfg Config, h listenHandle) *dialer {
	ctx, cancel := context.WithTimeout(context.Background(), cfg.Timeout)
	d := &dialer{h: h, cancel: cancel, socks: make([]*net.TCPConn, h.Socks)}
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
	for {
		c, err := nd.DialContext(ctx, "tcp", d.h.Addr.String())
		if err == nil {
			tc := c.(*net.TCPConn)
			_ = tc.SetWriteDeadline(time.Now().Add(cfg.Timeout))
			if _, err = tc.Write(hb); err == nil {
				_ = tc.SetWriteDeadline(time.Time{})
				tuneSocket(tc, cfg.Timeout)
				d.finish(idx, tc, nil)
				return
			}
			_ = tc.Close()
		}
		if errors.Is(err, syscall.ECONNREFUSED) {
			select {
			case <-time.After(refusedBackoff):
				continue
			case <-ctx.Done():
				err = ctx.Err()
			}
		}
		d.finish(idx, nil, fmt.Errorf("tcpnet: connecting to peer %v (socket %d of %d): %w; is the peer alive and %v reachable from here?", d.h.Addr, idx+1, d.h.Socks, err, d.h.Addr.Addr()))
		return
	}
}

func (d *dialer) finish(idx int, c *net.TCPConn, err error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if err != nil {
		if d.err == nil {
			d.err = err
		}
		return
	}
	if d.taken || d.err != nil {
		_ = c.Close()
		return
	}
	d.socks[idx] = c
	d.n++
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

// Abort cancels the attempt and closes sockets not yet handed out.
func (d *dialer) Abort() {
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
