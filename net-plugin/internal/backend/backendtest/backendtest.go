// Package backendtest holds the checks that every plugin backend
// (tcpnet, udpnet) must pass through the backend interfaces alone, so that
// the two are held to one standard by one piece of test code.
package backendtest

import (
	"math/rand/v2"
	"runtime"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/metaroce/metaroce/net-plugin/internal/backend"
)

// Deadline bounds every PollUntil: generous, so that a bug shows up as a
// failure rather than a hang, and never as a speed assertion.
const Deadline = 20 * time.Second

// PollUntil calls step until it reports true, failing the test after
// Deadline.
func PollUntil(t testing.TB, what string, step func() bool) {
	t.Helper()
	deadline := time.Now().Add(Deadline)
	for !step() {
		if time.Now().After(deadline) {
			t.Fatalf("%s: no progress within %v", what, Deadline)
		}
		runtime.Gosched()
	}
}

// Wait polls r until it completes, writing its sizes, and fails the test
// on an error.
func Wait(t testing.TB, r backend.Request, sizes []int) {
	t.Helper()
	PollUntil(t, "request", func() bool {
		done, err := r.Test(sizes)
		require.NoError(t, err)
		return done
	})
}

// Pattern is the deterministic content of byte i of message m.
func Pattern(m, i int) byte { return byte(m*131 + i*7 + i>>8) }

// GroupedTransfer posts 40 grouped receives of 3 buffers of 64 KiB each
// (more than 32 in flight), then sends every group's messages with their
// tags shuffled (so the tag, not the order, picks the buffer) and sizes
// from 0 to the full capacity, and checks every send's size and every
// received byte. seed picks the sizes and orders.
func GroupedTransfer(t *testing.T, sc backend.SendConn, rc backend.RecvConn, seed uint64) {
	rng := rand.New(rand.NewPCG(1, seed))
	const groups, n, capSize = 40, 3, 1 << 16
	type msg struct {
		tag  int32
		data []byte
	}
	var sends [][]msg // per group, in sending order
	for g := range groups {
		var ms []msg
		for _, tag := range rng.Perm(n) {
			size := rng.IntN(capSize + 1)
			switch g % 5 {
			case 0:
				size = 0
			case 1:
				size = capSize
			}
			m := msg{tag: int32(tag + 10), data: make([]byte, size)}
			for i := range m.data {
				m.data[i] = Pattern(g*n+tag, i)
			}
			ms = append(ms, m)
		}
		sends = append(sends, ms)
	}
	recvBufs := make([][][]byte, groups)
	var rreqs []backend.Request
	for g := range groups {
		bufs := make([][]byte, n)
		tags := make([]int32, n)
		for s := range n {
			bufs[s], tags[s] = make([]byte, capSize), int32(s+10)
		}
		recvBufs[g] = bufs
		r, err := rc.Irecv(bufs, tags)
		require.NoError(t, err)
		require.NotNil(t, r, "group %d: no receive slot", g)
		rreqs = append(rreqs, r)
	}
	var sreqs []backend.Request
	for _, ms := range sends {
		for _, m := range ms {
			r, err := sc.Isend(m.data, m.tag)
			require.NoError(t, err)
			require.NotNil(t, r, "no send slot")
			sreqs = append(sreqs, r)
		}
	}
	for i, r := range sreqs {
		var sz [1]int
		Wait(t, r, sz[:])
		require.Equal(t, len(sends[i/n][i%n].data), sz[0], "send %d", i)
	}
	for g, r := range rreqs {
		var sizes [backend.MaxRecvs]int
		Wait(t, r, sizes[:])
		for _, m := range sends[g] {
			slot := int(m.tag - 10)
			require.Equal(t, len(m.data), sizes[slot], "group %d tag %d", g, m.tag)
			require.Equal(t, m.data, recvBufs[g][slot][:len(m.data)], "group %d tag %d", g, m.tag)
		}
	}
}

// ZeroByteMessage sends an empty message into an empty (nil) buffer, as
// NCCL does for a 0-byte point-to-point transfer, then an 8-byte message:
// both must arrive, the first with size 0, and the connection carry on.
func ZeroByteMessage(t *testing.T, sc backend.SendConn, rc backend.RecvConn) {
	t.Helper()
	r0, err := rc.Irecv([][]byte{nil}, []int32{0})
	require.NoError(t, err)
	require.NotNil(t, r0)
	s0, err := sc.Isend(nil, 0)
	require.NoError(t, err)
	require.NotNil(t, s0)
	buf := make([]byte, 8)
	r1, err := rc.Irecv([][]byte{buf}, []int32{0})
	require.NoError(t, err)
	require.NotNil(t, r1)
	s1, err := sc.Isend([]byte("8 bytes!"), 0)
	require.NoError(t, err)
	require.NotNil(t, s1)
	sizes := []int{-1}
	Wait(t, r0, sizes)
	require.Equal(t, 0, sizes[0])
	Wait(t, s0, nil)
	Wait(t, r1, sizes)
	require.Equal(t, 8, sizes[0])
	require.Equal(t, "8 bytes!", string(buf))
	Wait(t, s1, nil)
}
