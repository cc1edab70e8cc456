package udp

import (
	"runtime"
	"testing"
	"time"

	"github.com/metaroce/metaroce/transport"
	"github.com/stretchr/testify/require"
)

// TestCloseWaitsForTheTurnThatEndsTheConnection: a Close called while the
// connection is still up, whose connection then ends in a turn that runs
// before Close's command is applied (the peer found dead), wakes when that
// turn marks the connection gone, which it does before it fails the
// connection's requests (goneBeforeOps). Close must still return only
// once they are all done, as it promises. The test holds the endpoint's
// drive lock as that turn would, marks the connection gone as its first
// failure does, and finishes the receive only after holdTurn, or once
// Close returned; Close's caller looks at the receive as soon as Close
// returns.
func TestCloseWaitsForTheTurnThatEndsTheConnection(t *testing.T) {
	const holdTurn = 300 * time.Millisecond
	pr := newPair(t, Config{})
	e := pr.ea
	rr, err := pr.a.Recv(1, [][]byte{make([]byte, 8)}, []uint32{0})
	require.NoError(t, err)
	pr.a.Stats() // a command round trip: the receive is posted

	e.drive.Lock() // the turn that ends the connection starts
	looked := make(chan bool, 1)
	go func() {
		_ = pr.a.Close()
		done, _ := rr.Test()
		looked <- done
	}()
	for e.nCmds.Load() == 0 { // Close has queued its command
		runtime.Gosched()
	}
	gone := peerErr(pr.a.remote, transport.ErrPeerDead)
	e.connGone(pr.a, gone) // the first failure of the turn
	var returned, done bool
	select {
	case done = <-looked:
		returned = true
	case <-time.After(holdTurn):
	}
	rr.finish(gone) // the rest of the turn
	e.drive.Unlock()
	if !returned {
		done = <-looked
	}
	require.True(t, done, "Close returned while the connection's receive was still in flight")
	require.ErrorIs(t, rr.Wait(testCtx(t)), transport.ErrPeerDead)
}
