package udp

import (
	"testing"
	"time"

	"github.com/metaroce/metaroce/transport"
	"github.com/stretchr/testify/require"
)

// TestManyIdleClosesSealed: with a secret, connections that give their
// peer up in the same loop turn each send a CLOSE on every path. When they
// are more than one transmit pass carries, the rest leave in the next
// turns, and their keys must still be there to seal them: they used to be
// forgotten after the first pass, so those CLOSEs were dropped unsealed
// (TxDrops) and their peers learnt nothing.
func TestManyIdleClosesSealed(t *testing.T) {
	const conns = 100 // × 4 paths: more CLOSEs than one pass sends (txBudget)
	cfg := Config{Addrs: lo, Secret: []byte("0123456789abcdef0123456789abcdef"), Seed: 1}
	cfg.Core.IdleTimeout = transport.Second
	cfg.Core.PathsPerPlane = 4
	ea, err := Listen(cfg)
	require.NoError(t, err)
	t.Cleanup(func() { ea.Close() })
	cfg.Seed++
	eb, err := Listen(cfg)
	require.NoError(t, err)
	t.Cleanup(func() { eb.Close() })
	var cs []*Conn
	for range conns {
		cs = append(cs, join(t, ea, eb).a)
	}
	require.Greater(t, conns*cs[0].Stats().Paths, txBudget, "the CLOSEs fit one transmit pass: the test shows nothing")
	// B goes silent; A's loop is held past the idle timeout, so that every
	// connection gives B up in the turn after.
	done := make(chan struct{})
	require.NoError(t, eb.enqueue(command{kind: cmdFunc, fn: func() {
		eb.cfg.DropProb = 1
		close(done)
	}}))
	<-done
	require.NoError(t, ea.enqueue(command{kind: cmdFunc, fn: func() {
		time.Sleep(time.Duration(cfg.Core.IdleTimeout) + 200*time.Millisecond)
	}}))
	ctx := testCtx(t)
	for _, c := range cs {
		select {
		case <-c.closed:
		case <-ctx.Done():
			t.Fatal("a connection did not give its silent peer up")
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
	const conns = 200 // × 4 paths: three transmit passes and more
	cfg := Config{Addrs: lo, Seed: 1}
	cfg.Core.IdleTimeout = transport.Second
	cfg.Core.PathsPerPlane = 4
	ea, err := Listen(cfg)
	require.NoError(t, err)
	cfg.Seed++
	eb, err := Listen(cfg)
	require.NoError(t, err)
	t.Cleanup(func() { eb.Close() })
	var cs []*Conn
	for range conns {
		cs = append(cs, join(t, ea, eb).a)
	}
	paths := cs[0].Stats().Paths
	require.Greater(t, conns*paths, 2*txBudget, "the CLOSEs fit two transmit passes: the test shows nothing")
	done := make(chan struct{})
	require.NoError(t, eb.enqueue(command{kind: cmdFunc, fn: func() {
		eb.cfg.DropProb = 1
		close(done)
	}}))
	<-done
	before := ea.Stats().TxDatagrams
	// The loop sleeps past the idle timeout; the turn after gives every
	// connection up and the Close, made during that turn, comes in the
	// next.
	closed := make(chan error, 1)
	require.NoError(t, ea.enqueue(command{kind: cmdFunc, fn: func() {
		time.Sleep(time.Duration(cfg.Core.IdleTimeout) + 200*time.Millisecond)
	}}))
	require.NoError(t, ea.enqueue(command{kind: cmdFunc, fn: func() {
		go func() { closed <- ea.Close() }()
	}}))
	require.NoError(t, <-closed)
	require.GreaterOrEqual(t, ea.Stats().TxDatagrams-before, uint64(conns*paths), "CLOSEs left unsent when the loop stopped")
}
