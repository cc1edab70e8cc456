package udp

import (
	"testing"
	"time"

	"github.com/metaroce/metaroce/transport"
	"github.com/stretchr/testify/require"
)

// idleTimeout is the connections' idle timeout in the tests below.
const idleTimeout = transport.Second

// silentPeer opens endpoint A (returned; the caller closes it) and B with
// cfg, dials conns connections of 4 paths each from A to B, and makes B
// silent: it drops every datagram it would send from then on. It checks
// that the connections' CLOSEs, one per path, take more than passes
// transmit passes.
func silentPeer(t *testing.T, cfg Config, conns, passes int) *Endpoint {
	t.Helper()
	cfg.Seed = 1
	cfg.Core.IdleTimeout = idleTimeout
	cfg.Core.PathsPerPlane = 4
	ea, err := Listen(cfg)
	require.NoError(t, err)
	cfg.Seed++
	eb, err := Listen(cfg)
	require.NoError(t, err)
	t.Cleanup(func() { eb.Close() })
	var paths int
	for range conns {
		paths += join(t, ea, eb).a.Stats().Paths
	}
	require.Greater(t, paths, passes*txBudget, "the CLOSEs fit %d transmit passes: the test shows nothing", passes)
	done := make(chan struct{})
	require.NoError(t, eb.enqueue(command{kind: cmdFunc, fn: func() {
		eb.cfg.DropProb = 1 // under the drive lock, which every reader holds
		close(done)
	}}))
	<-done
	return ea
}

// holdLoop holds e's event loop past the idle timeout, so that every
// connection gives its silent peer up in the turn after.
func holdLoop(t *testing.T, e *Endpoint) {
	require.NoError(t, e.enqueue(command{kind: cmdFunc, fn: func() {
		time.Sleep(time.Duration(idleTimeout) + 200*time.Millisecond)
	}}))
}

// TestManyIdleClosesSealed: with a secret, connections that give their
// peer up in the same loop turn each send a CLOSE on every path. When they
// are more than one transmit pass carries, the rest leave in the next
// turns, and their keys must still be there to seal them: they used to be
// forgotten after the first pass, so those CLOSEs were dropped unsealed
// (TxDrops) and their peers learnt nothing.
func TestManyIdleClosesSealed(t *testing.T) {
	ea := silentPeer(t, Config{Addrs: lo, Secret: []byte("0123456789abcdef0123456789abcdef")}, 100, 1)
	t.Cleanup(func() { ea.Close() })
	holdLoop(t, ea)
	ctx := testCtx(t)
	for ea.Stats().Conns > 0 {
		select {
		case <-ctx.Done():
			t.Fatal("the connections did not give their silent peer up")
		case <-time.After(10 * time.Millisecond):
		}
	}
	// A few more turns, whose transmit passes send the CLOSEs still owed
	// (a command runs at the start of a turn, so the turn of the last one
	// has sent nothing yet).
	for range 3 {
		turn := make(chan struct{})
		require.NoError(t, ea.enqueue(command{kind: cmdFunc, fn: func() { close(turn) }}))
		<-turn
	}
	require.Zero(t, ea.Stats().TxDrops, "CLOSEs left unsealed")
}

// TestClosingEndpointSendsOwedCloses: an endpoint closed while its
// connections, which gave their silent peer up all at once, still owe more
// CLOSEs than a transmit pass sends, sends them all before its loop stops.
// The loop used to stop at the end of the first turn after the Close that
// found no connection left, with the CLOSEs beyond that turn's pass unsent.
func TestClosingEndpointSendsOwedCloses(t *testing.T) {
	const conns = 200 // × 4 paths: more than two transmit passes
	ea := silentPeer(t, Config{Addrs: lo}, conns, 2)
	before := ea.Stats().TxDatagrams
	// The turn after the hold gives every connection up, and the Close,
	// made during that turn, comes in the next.
	holdLoop(t, ea)
	closed := make(chan error, 1)
	require.NoError(t, ea.enqueue(command{kind: cmdFunc, fn: func() {
		go func() { closed <- ea.Close() }()
	}}))
	require.NoError(t, <-closed)
	require.GreaterOrEqual(t, ea.Stats().TxDatagrams-before, uint64(conns*4), "CLOSEs left unsent when the loop stopped")
}
