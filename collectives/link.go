package collectives

import (
	"context"
	"net/netip"

	"github.com/metaroce/metaroce/transport"
)

// pending is an in-flight send or receive of a link.
// Its completion is announced by the done callback given to link.send or
// link.recv.
type pending interface {
	// Test reports completion and the error, if any, without blocking.
	Test() (bool, error)
	// Sizes reports, once complete, the bytes moved: one entry, the
	// message's length for a send and the bytes received for a receive.
	Sizes() []int
}

// link moves the messages of a communicator: one ordered stream per (peer,
// channel) and direction. Messages on a stream match in posting order on
// both sides, which is the order of sched's sequence numbers.
//
// send and recv call done (when not nil) once the transfer completes, after
// its pending reports it: from any goroutine, possibly before they return,
// and done must not block.
type link interface {
	// A message carries tag (callTag): a receive whose tag differs from
	// the message's fails, and so does the send where the link can tell.
	send(peer, ch int, tag uint32, buf []byte, done func()) (pending, error)
	recv(peer, ch int, tag uint32, buf []byte, done func()) (pending, error)
	// progress lets the calling goroutine move the link's transfers while
	// it would otherwise block, until done reports true or the link sees
	// nothing worth waiting for; it reports done's last answer. A link that
	// moves its transfers elsewhere returns done() at once.
	progress(done func() bool) bool
	// expectSenders declares, before a plan's transfers are posted, that
	// at most k peers will send to this rank at once until the next
	// declaration (k ≥ 1); links that do not use it ignore it.
	expectSenders(k int)
	// peerStats reports per-peer counters (nil where the link has none).
	peerStats() []PeerStats
	// describe is one line for headers: transport, addresses, channels.
	describe() string
	// info is the link's effective settings.
	info() LinkInfo
	close() error
}

// linkFactory opens a link's local side and returns the description peers
// need to reach it; connect then joins every peer given their descriptions,
// within ctx, whose deadline is dl (New's setup deadline, which its errors
// name where it ran out; zero where unknown).
type linkFactory interface {
	blob() []byte
	connect(ctx context.Context, rank int, blobs [][]byte, dl setupDeadline) (link, error)
	abort()
}

// LinkInfo describes a communicator's link for headers and reports.
type LinkInfo struct {
	Transport string
	// Addrs are the local addresses, one per plane (MetaRoCE) or the
	// listener's (TCP).
	Addrs []netip.Addr
	// PathsPerPlane and MaxDatagram (bytes of UDP payload) are the
	// MetaRoCE endpoint's effective settings; zero for TCP.
	PathsPerPlane, MaxDatagram int
	Channels                   int
}

// Planes is the number of planes (0 for TCP).
func (l LinkInfo) Planes() int {
	if l.Transport != TransportMetaRoCE {
		return 0
	}
	return len(l.Addrs)
}

// PeerStats are the transport counters of the connection to one peer.
type PeerStats struct {
	Rank  int
	Conn  transport.ConnStats
	Paths []transport.PathStats
}
