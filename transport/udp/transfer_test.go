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
