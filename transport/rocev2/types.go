package rocev2

// Route says where a datagram leaves: towards Remote (the driver's peer
// handle), out of local Plane, from the source port numbered Entropy.
type Route struct {
	Remote  uint32
	Plane   uint8
	Entropy uint16
}

// Transmit describes a datagram produced by PollTransmit: buf[:N] is the
// header and PayloadLen payload bytes follow on the wire.
type Transmit struct {
	Route      Route
	N          int
	PayloadLen int
}

// Placement says where a received DATA payload lands: Len bytes at Offset
// of the receive buffer with Cookie. OK is false when nothing is placed.
type Placement struct {
	OK     bool
	Cookie uint64
	Offset uint64
	Len    int
}

// EventKind says what an Event reports.
type EventKind uint8

// Event kinds, numbered like the MetaRoCE core's.
const (
	EvConnected EventKind = iota + 1
	EvAccepted
	EvSendDone
	EvRecvDone
	EvClosed
)

// Event is a completion or connection change.
type Event struct {
	Kind   EventKind
	Conn   uint32
	Remote uint32
	Flow   uint32
	Cookie uint64
	Len    uint64
	Tag    uint32
	Err    error
}

// Stats are endpoint-wide counters.
type Stats struct {
	DataSent      uint64 // DATA packets sent, retransmissions included
	Retransmits   uint64 // DATA packets resent after a NAK, RNR or timeout
	NaksSent      uint64
	NaksReceived  uint64
	Timeouts      uint64
	OutOfOrder    uint64 // DATA dropped because a PSN before it is missing
	Duplicates    uint64
	CNPsSent      uint64
	CNPsReceived  uint64
	RNRs          uint64
	Malformed     uint64
	UnknownConn   uint64
	PayloadPlaced uint64 // bytes placed into receive buffers
	CTSSent       uint64 // receives announced (Config.Rendezvous)
}
