package sim

// Tx describes one datagram a Transport produced: buf[:N] is its header (the
// whole packet for control packets) and PayloadLen bytes of payload follow
// on the wire. To is the destination host, Plane the local NIC port, and
// Entropy the index of the UDP source port the host maps to a real port.
type Tx struct {
	To         int
	Plane      int
	Entropy    uint16
	N          int
	PayloadLen int
}

// EventKind says what a transport event reports.
type EventKind uint8

// Event kinds, mirroring the transports' own.
const (
	EvConnected EventKind = iota + 1
	EvAccepted
	EvSendDone
	EvRecvDone
	EvClosed
)

// Event is a transport completion as seen by a workload.
type Event struct {
	Kind   EventKind
	Conn   uint32
	Remote int
	Flow   uint32
	Cookie uint64
	Len    uint64
	Err    error
}

// Transport is the sans-I/O endpoint a host runs. The MetaRoCE core and the
// RoCEv2 baseline each sit behind a thin adapter implementing it. All times
// are virtual nanoseconds.
type Transport interface {
	// Receive hands in a datagram from host from on local plane: data is
	// the header followed by payload bytes whose content is meaningless.
	// It returns the payload bytes the transport placed into a posted
	// receive: 0 for a control packet and for DATA it did not place (a
	// duplicate, a packet go-back-N drops out of order, one no receive
	// was posted for), so that every message byte is placed once.
	Receive(now int64, from, plane int, ecn ECN, data []byte) int
	// PollTransmit writes the next datagram's header into buf.
	PollTransmit(now int64, buf []byte) (Tx, bool)
	HandleTimeout(now int64)
	// NextTimeout is the earliest time HandleTimeout must run (math.MaxInt64: none).
	NextTimeout() int64
	Dial(now int64, remote int) (uint32, error)
	Send(now int64, conn, flow uint32, length uint64, tag uint32, cookie uint64) error
	PostRecv(now int64, conn, flow uint32, capacity uint64, tag uint32, cookie uint64) error
	PollEvent() (Event, bool)
}

// App is a workload running on one host: Start is called once when the run
// begins, OnEvent for every transport event of that host.
type App interface {
	Start(now int64, h *Host)
	OnEvent(now int64, h *Host, ev Event)
}
