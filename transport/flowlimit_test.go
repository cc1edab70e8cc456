package transport_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/metaroce/metaroce/transport"
	"github.com/metaroce/metaroce/transport/transporttest"
	"github.com/stretchr/testify/require"
)

// TestPeerBeyondFlowLimitFailsConnection: a RECV_READY that would take a
// side beyond MaxFlowsPerConn has already been acknowledged by the path
// layer, so dropping it would stall its flow for ever. The side fails the
// connection instead, with an ErrLimit error that names the bound, counts
// it, and tells the peer, whose operations fail too rather than wait
// (docs/spec.md §3.4).
func TestPeerBeyondFlowLimitFailsConnection(t *testing.T) {
	// A (node 0) holds at most 2 flows per connection, B (node 1) 16.
	n := transporttest.New(baseNet(1))
	n.MemCheck = func(_ int, ep *transport.Endpoint) error { return transport.CheckFootprint(ep) }
	cfg := baseCfg()
	cfg.MaxFlowsPerConn = 2
	cfg.IdleTimeout = transport.Second
	n.AddNode(cfg)
	cfg.MaxFlowsPerConn = 16
	cfg.Listen = true
	n.AddNode(cfg)
	ca, cb, err := n.Connect(0, 1)
	require.NoError(t, err)
	// A posts receives on flows 1 and 2: its table is full when B's
	// RECV_READY for flow 3 arrives.
	_, err = n.PostRecv(0, ca, 1, transporttest.RecvSpec{Cap: 100})
	require.NoError(t, err)
	_, err = n.PostRecv(0, ca, 2, transporttest.RecvSpec{Cap: 100})
	require.NoError(t, err)
	require.NoError(t, n.RunFor(100*transport.Microsecond))
	_, err = n.PostRecv(1, cb, 3, transporttest.RecvSpec{Cap: 100})
	require.NoError(t, err)
	both := func() bool {
		a, _ := n.Closed(0, ca)
		b, _ := n.Closed(1, cb)
		return a && b
	}
	require.NoError(t, n.RunUntil(both, n.Now()+100*transport.Millisecond), "the connection stalled")
	_, errA := n.Closed(0, ca)
	_, errB := n.Closed(1, cb)
	require.ErrorIs(t, errA, transport.ErrLimit)
	require.True(t, strings.Contains(errA.Error(), "the peer exceeded"), "%v", errA)
	require.True(t, strings.Contains(errA.Error(), "MaxFlowsPerConn (2 flows"), "%v", errA)
	// B learns it from A's CLOSE (reason ERROR) or from the NACK
	// UNKNOWN_CONN its unacknowledged RECV_READY draws, whichever ends
	// its linger first.
	require.True(t, errors.Is(errB, transport.ErrClosed) || errors.Is(errB, transport.ErrPeerDead), "%v", errB)
	require.Equal(t, uint64(1), n.Node(0).EP.Counters().Dropped[transport.DropPeerLimit])
	// Every posted receive ended, B's on flow 3 included: none waits for
	// an announcement that was thrown away.
	require.True(t, n.AllDoneAt(0))
	require.True(t, n.AllDoneAt(1))
	require.NoError(t, n.Check(transporttest.CheckOptions{AllowFailures: true}))
}
