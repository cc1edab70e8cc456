package udpnet

import (
	"fmt"

	"github.com/metaroce/metaroce/net-plugin/internal/backend"
)

// listener owns one flow id; announcements of that flow queue up in ready
// (filled by the connections' control loops, guarded by d.mu), each comm
// there on a live connection (device.gone).
type listener struct {
	d      *device
	flow   uint32
	nonce  uint64
	handle []byte

	ready  []*recvConn
	from   map[*peer]bool // connections that announced this flow
	closed bool
}

// Handle returns the listen handle.
func (l *listener) Handle() []byte { return l.handle }

// Accept returns the next announced flow; it never blocks. Every queued
// comm's connection is live: a connection that ends takes its comms out
// of the queues as it is marked dead (device.gone), and a withdrawn
// connect takes its own (device.withdrawn).
func (l *listener) Accept() (backend.RecvConn, error) {
	d := l.d
	d.mu.Lock()
	defer d.mu.Unlock()
	if l.closed {
		return nil, fmt.Errorf("udpnet: accept on closed listener (flow %d): %w", l.flow, backend.ErrInternal)
	}
	if len(l.ready) == 0 {
		return nil, nil
	}
	rc := l.ready[0]
	l.ready[0] = nil
	l.ready = l.ready[1:]
	return rc, nil
}

// Close stops listening and drops flows that were announced but not
// accepted (dropUnaccepted).
func (l *listener) Close() error {
	d := l.d
	d.mu.Lock()
	if l.closed {
		d.mu.Unlock()
		return nil
	}
	l.closed = true
	delete(d.listeners, l.flow)
	pending := l.ready
	l.ready = nil
	d.mu.Unlock()
	for _, c := range pending {
		c.dropUnaccepted()
	}
	return nil
}
