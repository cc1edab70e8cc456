package udpiut

import (
	"context"
	"net/netip"
	"testing"
	"time"

	"github.com/metaroce/metaroce/transport/udp"
	"github.com/stretchr/testify/require"
)

// TestNoCompletionLost: three times as many receives as the completions
// channel holds all finish (their connection closes) before the suite
// reads any, and every one of them is delivered. Before, the channel held
// 64 and the completions past it were dropped.
func TestNoCompletionLost(t *testing.T) {
	u, err := Listen(1)
	require.NoError(t, err)
	defer u.Close()
	client, err := udp.Listen(udp.Config{Addrs: []netip.Addr{netip.MustParseAddr("127.0.0.1")}, Seed: 2})
	require.NoError(t, err)
	defer client.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	dialed := make(chan error, 1)
	go func() {
		_, err := client.Dial(ctx, []netip.AddrPort{u.ListenAddr()})
		dialed <- err
	}()
	require.NoError(t, u.Accept(ctx))
	require.NoError(t, <-dialed)

	const n = 3 * compsBuffer
	for range n {
		require.NoError(t, u.PostRecv(ctx, 1, []uint64{16}, []uint32{1}))
	}
	c, err := u.current()
	require.NoError(t, err)
	require.NoError(t, c.Close()) // fails every receive
	u.ops.Wait()                  // and each has been handed over; none read yet

	for got := 0; got < n; got++ {
		select {
		case comp := <-u.Completions():
			require.Equal(t, uint32(1), comp.Flow)
			require.NotEmpty(t, comp.Err, "a receive ended by its connection's close")
		case <-ctx.Done():
			t.Fatalf("%d of %d completions delivered", got, n)
		}
	}
	select {
	case comp := <-u.Completions():
		t.Fatalf("a completion more than the %d operations: %+v", n, comp)
	default:
	}
}
