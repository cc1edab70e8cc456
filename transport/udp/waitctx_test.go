package udp

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// TestWaitHonoursCancelledContext: Request.Wait drives the datapath for up
// to WaitSpin before it blocks, but a context that has ended must end the
// wait at once all the same, as Wait promises, however long WaitSpin is
// (and while other traffic keeps resetting it).
func TestWaitHonoursCancelledContext(t *testing.T) {
	const waitSpin = time.Minute
	p := newPair(t, Config{WaitSpin: waitSpin})
	rr, err := p.a.Recv(1, [][]byte{make([]byte, 8)}, []uint32{0})
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	got := make(chan error, 1)
	go func() { got <- rr.Wait(ctx) }()
	select {
	case err := <-got:
		require.ErrorIs(t, err, context.Canceled)
	case <-time.After(testTimeout):
		t.Fatalf("Wait with a cancelled context still spins after %v (WaitSpin %v)", testTimeout, waitSpin)
	}
	done, _ := rr.Test()
	require.False(t, done, "the receive stays outstanding")
	// The receive still completes normally afterwards.
	sr, err := p.b.Send(1, []byte("12345678"), 0)
	require.NoError(t, err)
	require.NoError(t, sr.Wait(testCtx(t)))
	require.NoError(t, rr.Wait(testCtx(t)))
}
