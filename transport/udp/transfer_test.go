package udp

import (
	"bytes"
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"
)

// transfer sends msg from src to dst on flow and checks the bytes arrive
// unchanged.
func transfer(t testing.TB, src, dst *Conn, flow uint32, msg []byte) {
	t.Helper()
	ctx := testCtx(t)
	buf := make([]byte, len(msg)+7)
	rr, err := dst.Recv(flow, [][]byte{buf}, []uint32{9})
	require.NoError(t, err)
	sr, err := src.Send(flow, msg, 9)
	require.NoError(t, err)
	require.NoError(t, sr.Wait(ctx))
	require.NoError(t, rr.Wait(ctx))
	require.Equal(t, []int{len(msg)}, rr.Sizes())
	require.Equal(t, []int{len(msg)}, sr.Sizes())
	require.True(t, bytes.Equal(msg, buf[:len(msg)]), "payload differs")
}

func TestTransferSizes(t *testing.T) {
	sizes := []int{0, 1, 4095, 4096, 65536, 1 << 20, 16 << 20}
	for _, dgram := range []int{0, 1500 - 28} {
		t.Run(fmt.Sprintf("dgram=%d", dgram), func(t *testing.T) {
			p := newPair(t, Config{MaxDatagram: dgram})
			for i, n := range sizes {
				if dgram != 0 && n > 1<<20 {
					continue // keep the small-datagram run short
				}
				transfer(t, p.a, p.b, 1, pattern(n, byte(i)))
				transfer(t, p.b, p.a, 2, pattern(n, byte(i+100)))
			}
		})
	}
}

// TestNotify checks SendNotify and RecvNotify: each notify runs exactly once,
// after its request completed, for completed transfers and for requests that
// fail when their connection closes.
func TestNotify(t *testing.T) {
	p := newPair(t, Config{})
	ctx := testCtx(t)
	notes := make(chan string, 8)
	notifier := func(name string) func() { return func() { notes <- name } }
	next := func() string {
		select {
		case n := <-notes:
			return n
		case <-ctx.Done():
			t.Fatal("no notify within the test's deadline")
			return ""
		}
	}
	msg := pattern(100000, 7)
	buf := make([]byte, len(msg))
	rr, err := p.b.RecvNotify(3, [][]byte{buf}, []uint32{0}, notifier("recv"))
	require.NoError(t, err)
	sr, err := p.a.SendNotify(3, msg, 0, notifier("send"))
	require.NoError(t, err)
	seen := map[string]int{}
	for range 2 {
		seen[next()]++
	}
	require.Equal(t, map[string]int{"recv": 1, "send": 1}, seen)
	// Done was closed before notify ran: Test reports completion at once.
	for _, r := range []*Request{rr, sr} {
		done, err := r.Test()
		require.True(t, done)
		require.NoError(t, err)
	}
	require.NoError(t, sr.Wait(ctx))
	require.Equal(t, msg, buf)

	// A receive that never matches fails when its connection closes, and
	// is notified of that too.
	lone, err := p.b.RecvNotify(4, [][]byte{buf}, []uint32{0}, notifier("lone"))
	require.NoError(t, err)
	require.NoError(t, p.eb.Close())
	require.Equal(t, "lone", next())
	done, err := lone.Test()
	require.True(t, done)
	require.Error(t, err)
	require.Empty(t, notes, "a notify ran twice")
}
