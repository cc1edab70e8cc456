// Package backend defines the small transport interface the NCCL net plugin is
// written against. The plugin's C ABI layer (handles, versions, logging,
// error mapping) knows nothing about sockets; a Backend moves the bytes.
//
// Implementations: the MetaRoCE datapath (package udpnet, the default) and
// kernel TCP (package tcpnet).
//
// Contract, mirroring the NCCL net-plugin semantics:
//
//   - Nothing blocks. Accept and Dialer.Step return (nil, nil) while the
//     connection is not ready; Isend and Irecv return (nil, nil) when they
//     cannot start now (for example all request slots are busy). The caller
//     retries later.
//   - Connections are one-directional: a SendConn (from Dial) pairs with one
//     RecvConn (from Listener.Accept).
//   - Matching is in posting order. Each Irecv of n buffers consumes the next
//     n sends of the connection; the tag of each send chooses which of the n
//     buffers it lands in. A send larger than the chosen buffer fails the
//     receive with an error wrapping ErrInvalidUsage.
//   - Buffers passed to Isend/Irecv stay valid and untouched by the caller until
//     Test reports the request done or the connection is closed. They usually
//     live in C (pinned host) memory.
//   - All methods are safe for concurrent use across connections; the data
//     path of one connection is driven by one caller at a time.
package backend

import "errors"

// HandleSize is the largest listen handle, in bytes, that NCCL carries from
// the receiver to the sender (NCCL_NET_HANDLE_MAXSIZE).
const HandleSize = 128

// MaxRecvs is the largest number of buffers in one grouped receive the
// backends take.
const MaxRecvs = 8

// AdvertisedRecvs is the grouped-receive size the plugin advertises to NCCL
// (ncclNetProperties.maxRecvs). The backends bind sends to a group's buffers
// in posting order, where NCCL's IB transport lets a send wait (isend
// returns NULL) until a group with a free buffer of its tag is announced:
// with groups, NCCL's shared comms may post the next group's send before
// the current group's last one, which the backends would refuse. With 1, as
// NCCL's socket transport advertises, NCCL never groups receives.
const AdvertisedRecvs = 1

// MaxMessage is the largest message in bytes: test() reports sizes as C
// ints, so a larger message's size could not be reported
// (ncclNetProperties.maxP2pBytes; NCCL splits larger transfers).
const MaxMessage = 1<<31 - 1

// Error categories. Backends wrap one of them (fmt.Errorf("...: %w", ErrX)) so
// the ABI layer can map the failure to an ncclResult_t in one place. An error
// that wraps none of them is reported as a system error.
var (
	// ErrInvalidUsage: the caller broke the contract in a way a user can fix,
	// e.g. a message larger than the posted receive.
	ErrInvalidUsage = errors.New("invalid usage")
	// ErrInvalidArgument: malformed input such as a garbage listen handle
	// (see Backend.Dial for where a handle stops being malformed).
	ErrInvalidArgument = errors.New("invalid argument")
	// ErrInternal: the caller misused the plugin (unknown handle, bad state).
	ErrInternal = errors.New("internal error")
	// ErrRemote: the peer reported or caused the failure, including a
	// well-formed listen handle that names no listener of the peer (stale
	// or foreign; see Backend.Dial).
	ErrRemote = errors.New("remote error")
	// ErrClosed: the connection or listener was closed locally.
	ErrClosed = errors.New("closed")
)

// Device describes one network device (a local interface and address) that
// a Backend can listen and connect on.
type Device struct {
	// Name is the NIC name reported to NCCL (its topology key); unique per device.
	Name string
	// IfName is the kernel interface name, e.g. "eth0" or "lo".
	IfName string
	// PCIPath is the sysfs path of the PCI device, or "" if not a PCI NIC.
	PCIPath string
	// SpeedMbps is the link speed in Mbit/s (> 0).
	SpeedMbps int
	// LatencyUs is the expected one-way network latency in microseconds.
	LatencyUs float32
	// Addr is the local IP address (textual) listeners bind to.
	Addr string
	// Planes is the number of independent network planes reached through the
	// device, and Paths the number of paths (sockets, flows) per connection.
	Planes, Paths int
}

// Backend is a transport that moves messages between hosts.
type Backend interface {
	// Name identifies the backend in logs ("tcp", "udp").
	Name() string
	// Devices lists the usable devices; index i is NCCL device i.
	Devices() []Device
	// Listen opens a listener on device dev. Its Handle is what the sender
	// needs to connect.
	Listen(dev int) (Listener, error)
	// Dial starts a non-blocking connection to the listener described by
	// handle from device dev. A handle that is refused fails by one rule,
	// at Dial or at the Dialer's Step:
	//
	//   - Malformed: it does not decode as a handle of this backend and
	//     version: too short, wrong magic or version, or a field without a
	//     value of its kind (a zero nonce or id, a socket or plane count
	//     out of range, an unusable address or port). It fails with
	//     ErrInvalidArgument, at Dial, before anything is sent.
	//   - Stale or foreign: it decodes, but names a listener the peer does
	//     not have: one that closed, one of another job or process, or an
	//     identity no listener of the peer holds (such as a udp flow id
	//     above any a listener takes). It fails with ErrRemote, naming the
	//     peer: at Dial when the handle alone shows it, else at Step once
	//     the peer refuses it.
	//
	// So ErrInvalidArgument points at how the handle travelled (ranks on
	// different backends or plugin versions, corrupted bytes), ErrRemote at
	// the peer's state. A peer that never answers is neither: Step fails at
	// the connect timeout with an error that says so.
	Dial(dev int, handle []byte) (Dialer, error)
	// Close releases backend-wide resources; connections must be closed first.
	Close() error
}

// Listener accepts one or more receiving connections.
type Listener interface {
	// Handle returns the connection handle (≤ HandleSize bytes).
	Handle() []byte
	// Accept returns the next established connection, or (nil, nil) if none
	// is ready yet. It never blocks.
	Accept() (RecvConn, error)
	// Close stops listening; connections already accepted stay open.
	Close() error
}

// Dialer is a connection attempt in progress.
type Dialer interface {
	// Step advances the attempt without blocking: (conn, nil) when connected,
	// (nil, nil) when not yet, (nil, err) when it failed for good.
	Step() (SendConn, error)
	// Abort cancels the attempt and releases its resources.
	Abort()
}

// SendConn is the sending end of a connection.
type SendConn interface {
	// Isend queues buf to be sent with tag. (nil, nil) means "retry later".
	Isend(buf []byte, tag int32) (Request, error)
	// Abort ends the connection's use at once: outstanding requests
	// fail, and once Abort returns no buffer of theirs is read or
	// written again. Later requests fail; Close still releases the
	// connection. The plugin calls it from deregMr while requests use
	// the memory, since NCCL frees an aborted comm's buffers before
	// closing it.
	Abort()
	// Close tears the connection down; outstanding requests fail.
	Close() error
}

// RecvConn is the receiving end of a connection.
type RecvConn interface {
	// Irecv posts a grouped receive of len(bufs) buffers (1..MaxRecvs), with
	// tags[i] naming the tag whose message lands in bufs[i]. The capacity of
	// each buffer is len(bufs[i]). (nil, nil) means "retry later".
	Irecv(bufs [][]byte, tags []int32) (Request, error)
	// Abort is SendConn.Abort for the receiving end.
	Abort()
	// Close tears the connection down; outstanding requests fail.
	Close() error
}

// Request is an operation in flight.
type Request interface {
	// Test polls the request without blocking. When done, a receive writes
	// the received byte count of each of its n buffers into sizes[:n] and a
	// send writes its size into sizes[0]; sizes may be shorter (or nil), in
	// which case only what fits is written. After done or an error the
	// request is released and must not be tested again.
	Test(sizes []int) (done bool, err error)
}
