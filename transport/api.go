package transport

import (
	"fmt"
	"math"

	"github.com/metaroce/metaroce/transport/wire"
)

// Time is a driver-supplied monotonic time in nanoseconds. The core never
// reads a clock; every method that may act on time takes it as an argument.
type Time int64

// Never is the NextTimeout of an endpoint with nothing scheduled.
const Never Time = math.MaxInt64

// Common durations in Time units.
const (
	Nanosecond  Time = 1
	Microsecond      = 1000 * Nanosecond
	Millisecond      = 1000 * Microsecond
	Second           = 1000 * Millisecond
)

// ECN is the two-bit ECN codepoint of an IP packet (RFC 3168 values).
type ECN uint8

const (
	NotECT ECN = 0
	ECT1   ECN = 1
	ECT0   ECN = 2
	CE     ECN = 3
)

// RemoteID is the driver's handle for a peer endpoint. The core never
// interprets it; it only hands it back in Route so the driver can resolve
// (RemoteID, plane) to a destination address.
type RemoteID uint32

// ConnID names a connection of one endpoint. It is also the connection id
// peers put in the DstConn field of their packets (docs/spec.md §2.1). Zero is
// never a valid connection.
type ConnID uint32

// Route says where a datagram leaves: towards Remote, out of local Plane,
// from the source port numbered Entropy in that plane's port pool
// (docs/spec.md §1: the source port is the ECMP entropy of a path).
type Route struct {
	Remote  RemoteID
	Plane   uint8
	Entropy uint16
}

// Datagram is one received UDP payload handed to HandleDatagram.
type Datagram struct {
	From  RemoteID // driver's handle for the sender's address (see Accept)
	Plane uint8    // local plane it arrived on
	ECN   ECN      // ECN bits of its IP header
	Data  []byte   // the UDP payload; the core does not retain it
}

// PayloadRef tells the driver which payload bytes follow the header that
// PollTransmit wrote: Len bytes at Offset of the send buffer registered with
// Cookie. Len 0 means none.
type PayloadRef struct {
	Cookie uint64
	Offset uint64
	Len    int
}

// Transmit describes one datagram produced by PollTransmit: buf[:N] holds the
// header (and the whole packet for control packets), Payload the bytes the
// driver appends.
type Transmit struct {
	Route   Route
	N       int
	Payload PayloadRef
}

// Placement is the core's verdict on a received DATA packet: copy Payload
// into the receive buffer registered with Cookie, at Offset. The core has
// checked that Offset+len(Payload) fits the posted capacity. The driver must
// copy before its next call into the endpoint, because a completion event for
// that buffer may follow. OK is false when nothing is to be placed.
type Placement struct {
	OK      bool
	Cookie  uint64
	Offset  uint64
	Payload []byte
}

// RecvBuf is one buffer of a grouped receive (docs/spec.md §3.4).
type RecvBuf struct {
	Cap    uint64 // capacity in bytes
	Tag    uint32 // the sender tag that selects this buffer
	Cookie uint64 // the driver's handle for the buffer, echoed in Placement and events
}

// EventKind says what an Event reports.
type EventKind uint8

const (
	// EvConnected: a Dial completed; Conn is ready.
	EvConnected EventKind = iota + 1
	// EvAccepted: a peer connected to a listening endpoint. Addr holds the
	// peer's address blob from its HELLO (a copy owned by the event).
	EvAccepted
	// EvSendDone: the send with Cookie on Flow completed (Err nil) or failed.
	EvSendDone
	// EvRecvDone: the receive buffer with Cookie on Flow completed with Len
	// bytes and the sender's Tag, or failed with Err.
	EvRecvDone
	// EvClosed: Conn is gone; Err is nil after an orderly close, otherwise
	// says why (peer dead, protocol error, peer closed with an error).
	EvClosed
)

func (k EventKind) String() string {
	switch k {
	case EvConnected:
		return "connected"
	case EvAccepted:
		return "accepted"
	case EvSendDone:
		return "send-done"
	case EvRecvDone:
		return "recv-done"
	case EvClosed:
		return "closed"
	}
	return "event?"
}

// Event is something the driver must tell its user about.
type Event struct {
	Kind   EventKind
	Conn   ConnID
	Remote RemoteID
	Flow   uint32
	Cookie uint64
	Len    uint64
	Tag    uint32
	Err    error
	Addr   []byte
	// Final is, on EvClosed, the connection's counters as it ended: the
	// core forgets the connection right after the event, and a user who
	// asks what happened (why it died, how much it retransmitted) asks
	// then. Nil on every other event.
	Final *FinalStats
}

// FinalStats are a closed connection's last counters (Event.Final).
type FinalStats struct {
	Conn  ConnStats
	Paths []PathStats
}

// nowTS truncates a time to the 32-bit timestamp carried in DATA.
func nowTS(now Time) uint32 { return uint32(now) }

var _ = wire.Version

// String formats t as a duration with a unit suited to its size.
func (t Time) String() string {
	switch a := max(t, -t); {
	case a >= Second:
		return fmt.Sprintf("%.3gs", float64(t)/float64(Second))
	case a >= Millisecond:
		return fmt.Sprintf("%.3gms", float64(t)/float64(Millisecond))
	case a >= Microsecond:
		return fmt.Sprintf("%.3gµs", float64(t)/float64(Microsecond))
	}
	return fmt.Sprintf("%dns", int64(t))
}
