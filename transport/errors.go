package transport

import (
	"errors"
	"fmt"
)

// Errors reported in events and returned by the API. Test with errors.Is;
// the concrete errors wrap these with the connection, flow and numbers.
var (
	// ErrPeerDead: nothing was heard from the peer within IdleTimeout, or
	// the peer said that it heard nothing from this side for its own (a
	// CLOSE of reason idle timeout, docs/spec.md §3.6: the direction
	// towards the peer failed, or this side stalled), or the peer no
	// longer knows the connection.
	ErrPeerDead = errors.New("peer not responding")
	// ErrHandshakeTimeout: a Dial got no HELLO_ACK in time.
	ErrHandshakeTimeout = errors.New("handshake timed out")
	// ErrClosed: the connection was closed locally or by the peer.
	ErrClosed = errors.New("connection closed")
	// ErrPeerClosed: the peer closed the connection (its CLOSE arrived,
	// docs/spec.md §3.3, other than one of reason idle timeout, which is
	// ErrPeerDead). It wraps ErrClosed, so that a user can tell the
	// peer's close from a local one and errors.Is(err, ErrClosed) holds
	// for both.
	ErrPeerClosed = fmt.Errorf("%w by the peer", ErrClosed)
	// ErrMessageTooLarge: a message is longer than the buffer posted for it.
	ErrMessageTooLarge = errors.New("message larger than posted receive buffer")
	// ErrTagMismatch: a send's tag matches no buffer of the receive group.
	ErrTagMismatch = errors.New("send tag matches no posted receive buffer")
	// ErrUnknownConn: the API named a connection this endpoint does not have.
	ErrUnknownConn = errors.New("unknown connection")
	// ErrLimit: a configured bound (connections, flows, queued operations)
	// would be exceeded; nothing was queued. In an event it says that the
	// peer made this side exceed MaxFlowsPerConn or MaxPendingRecvs, and
	// the connection failed (docs/spec.md §3.4); the detail names the bound.
	ErrLimit = errors.New("resource limit reached")
	// ErrInvalid: bad arguments (empty receive group, too many entries,
	// oversize message).
	ErrInvalid = errors.New("invalid argument")
	// ErrFlowAborted: the flow was aborted (AbortFlow), here or by the
	// peer, while the operation was outstanding; the connection's other
	// flows carry on.
	ErrFlowAborted = errors.New("flow aborted")
)

// ConnError is an error attached to one connection: it names the
// connection and the driver's RemoteID of its peer, so a user with many
// connections knows which one failed, and says what to do. The text calls
// the RemoteID a "remote id", not a peer number: it is the driver's own
// index (an address-table slot in the UDP runtime), which a reader would
// otherwise take for a rank. Drivers wrap the error with what names the
// peer to their users (udp.PeerError: its addresses).
type ConnError struct {
	Conn   ConnID
	Remote RemoteID
	Err    error
	Detail string
}

func (e *ConnError) Error() string {
	s := fmt.Sprintf("metaroce: connection %d (remote id %d): %v", e.Conn, e.Remote, e.Err)
	if e.Detail != "" {
		s += " (" + e.Detail + ")"
	}
	return s
}

func (e *ConnError) Unwrap() error { return e.Err }
