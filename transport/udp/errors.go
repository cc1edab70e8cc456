package udp

import (
	"errors"
	"fmt"
	"net/netip"
	"strings"
)

// ErrEndpointClosed is returned by calls on a closed Endpoint, and fails the
// requests that were outstanding when it closed. Where the call or request
// concerns one peer (a Dial, a connection's Send, Recv or ReleaseFlow, a
// request), it comes wrapped in a PeerError naming that peer; test for it
// with errors.Is.
var ErrEndpointClosed = errors.New("udp: endpoint closed")

// ErrRefused fails a Dial whose peer answered the handshake and closed the
// connection at once: it would not take it (its log says why). The
// core's own error stays in the chain.
var ErrRefused = errors.New("udp: connection refused by the peer")

// PeerError is a connection-level failure (usually wrapping a
// *transport.ConnError) together with the peer's per-plane addresses, so that
// a user with many connections knows which peer failed. errors.Is and
// errors.As see through it to the core's error.
type PeerError struct {
	Peer []netip.AddrPort
	Err  error
}

func (e *PeerError) Error() string {
	var b strings.Builder
	b.WriteString("metaroce/udp: peer ")
	for i, a := range e.Peer {
		if i > 0 {
			b.WriteByte(',')
		}
		b.WriteString(a.String())
	}
	fmt.Fprintf(&b, ": %v", e.Err)
	return b.String()
}

func (e *PeerError) Unwrap() error { return e.Err }

// peerErr wraps err with the peer's addresses unless it is nil or already a
// PeerError.
func peerErr(peer []netip.AddrPort, err error) error {
	if err == nil {
		return nil
	}
	var pe *PeerError
	if errors.As(err, &pe) {
		return err
	}
	return &PeerError{Peer: peer, Err: err}
}
