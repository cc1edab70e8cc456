package collectives

import (
	"context"

	"github.com/metaroce/metaroce/transport"
)

// pending is an in-flight send or receive of a link.
type pending interface {
	Done() <-chan struct{}
	// Test reports completion and the error, if any, without blocking.
	Test() (bool, error)
}

// link moves the messages of a communicator: one ordered stream per (peer,
// channel) and direction. Messages on a stream match in posting order on
// both sides, which is the order of sched's sequence numbers.
type link interface {
	send(peer, ch int, buf []byte) (pending, error)
	recv(peer, ch int, buf []byte) (pending, error)
	// peerStats reports per-peer counters (nil where the link has none).
	peerStats() []PeerStats
	// describe is one line for headers: transport, planes, paths, MTU.
	describe() string
	close() error
}

// linkFactory opens a link's local side and returns the description peers
// need to reach it; connect then joins every peer given their descriptions.
type linkFactory interface {
	blob() []byte
	connect(ctx context.Context, rank int, blobs [][]byte) (link, error)
	abort()
}

// PeerStats are the transport counters of the connection to one peer.
type PeerStats struct {
	Rank  int
	Conn  transport.ConnStats
	Paths []transport.PathStats
}
