package udp

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// TestStatsAfterPeerClosed: when the peer closes, the surviving side's
// Stats and PathStats still report what the connection did, with State
// "closed", instead of zeros.
func TestStatsAfterPeerClosed(t *testing.T) {
	p := newPair(t, Config{})
	ctx := testCtx(t)
	buf := make([]byte, 200000)
	r, err := p.b.Recv(1, [][]byte{buf}, []uint32{0})
	require.NoError(t, err)
	s, err := p.a.Send(1, make([]byte, len(buf)), 0)
	require.NoError(t, err)
	require.NoError(t, s.Wait(ctx))
	require.NoError(t, r.Wait(ctx))
	sent := p.a.Stats().PacketsSent
	require.Positive(t, sent)

	require.NoError(t, p.b.Close())
	select {
	case <-p.a.closed:
	case <-time.After(10 * time.Second):
		t.Fatal("the survivor did not see the peer close")
	}
	st := p.a.Stats()
	require.Equal(t, "closed", st.State)
	require.GreaterOrEqual(t, st.PacketsSent, sent)
	require.NotEmpty(t, p.a.PathStats())
}

// TestSetConcurrentSenders: the declaration reaches the core before the
// calls queued after it, and Config keeps the value the endpoint was opened
// with.
func TestSetConcurrentSenders(t *testing.T) {
	cfg := Config{}
	cfg.Core.ConcurrentSenders = 4
	p := newPair(t, cfg)
	core := func() int {
		ch := make(chan int, 1)
		require.NoError(t, p.eb.enqueue(command{kind: cmdFunc, fn: func() { ch <- p.eb.core.Config().ConcurrentSenders }}))
		select {
		case k := <-ch:
			return k
		case <-testCtx(t).Done():
			t.Fatal("the loop did not run the command")
			return 0
		}
	}
	require.Equal(t, 4, core())
	require.NoError(t, p.eb.SetConcurrentSenders(1))
	require.Equal(t, 1, core())
	require.Equal(t, 4, p.eb.Config().Core.ConcurrentSenders)
}
