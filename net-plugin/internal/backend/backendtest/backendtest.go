// Package backendtest holds the checks that every plugin backend
// (tcpnet, udpnet) must pass through the backend interfaces alone, so that
// the two are held to one standard by one piece of test code.
package backendtest

import (
	"bytes"
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

// AbortStopsBufferUse checks Abort on both ends. A receiving end aborted
// while 4 MiB messages stream into its buffers fails its receives, and
// nothing lands in those buffers after Abort returns, however long the
// sender keeps going (until its own sends end, by failing or completing).
// A sending end aborted mid-stream fails its sends and reads its buffers
// no more: bytes changed after Abort returns never reach the receiver.
//
// The abort comes once a short first message has been received, with the
// 4 MiB messages posted behind it streaming. The test learns that from the
// first receive's completion, not by peeking at buffers the backend is
// writing, which would be a data race (go test -race).
func AbortStopsBufferUse(t *testing.T, sc backend.SendConn, rc backend.RecvConn, receiver bool) {
	t.Helper()
	const msgs, size, firstSize = 4, 4 << 20, 64 << 10
	const mark, unwritten = 0xEE, 0xFF
	var rbufs, sbufs [msgs][]byte
	var rreqs, sreqs [msgs]backend.Request
	for i := range msgs {
		n := size
		if i == 0 {
			n = firstSize
		}
		rbufs[i], sbufs[i] = make([]byte, n), make([]byte, n)
		for j := range sbufs[i] {
			sbufs[i][j] = Pattern(i, j) &^ 0x80 // never mark nor unwritten
			rbufs[i][j] = unwritten
		}
		var err error
		PollUntil(t, "post receive", func() bool {
			rreqs[i], err = rc.Irecv([][]byte{rbufs[i]}, []int32{0})
			require.NoError(t, err)
			return rreqs[i] != nil
		})
	}
	for i := range msgs {
		var err error
		PollUntil(t, "post send", func() bool {
			sreqs[i], err = sc.Isend(sbufs[i], 0)
			require.NoError(t, err)
			return sreqs[i] != nil
		})
	}
	// Let the first message land, so that the abort comes with the next
	// ones in flight.
	Wait(t, rreqs[0], nil)
	require.Equal(t, sbufs[0], rbufs[0], "first message")
	var snapshot [msgs][]byte
	if receiver {
		rc.Abort()
		for i := range msgs {
			snapshot[i] = append([]byte(nil), rbufs[i]...)
		}
	} else {
		sc.Abort()
		for i := range msgs {
			for j := range sbufs[i] {
				sbufs[i][j] = mark
			}
		}
	}
	// Both ends' requests must end: no hang, whatever the outcome.
	failed := 0
	for i := range msgs {
		reqs := []backend.Request{sreqs[i], rreqs[i]}
		if i == 0 {
			reqs = reqs[:1] // the receive completed, and was reported, before the abort
		}
		for _, r := range reqs {
			PollUntil(t, "request after the abort", func() bool {
				done, err := r.Test(nil)
				if err != nil {
					failed++
				}
				return done || err != nil
			})
		}
	}
	t.Logf("abort on the %s end: %d of %d requests failed", map[bool]string{true: "receiving", false: "sending"}[receiver], failed, 2*msgs-1)
	for i := range msgs {
		if receiver {
			require.True(t, bytes.Equal(snapshot[i], rbufs[i]), "receive buffer %d written after Abort returned", i)
		} else {
			require.Equal(t, -1, bytes.IndexByte(rbufs[i], mark), "send buffer %d read after Abort returned", i)
		}
	}
	_, err := rc.Irecv([][]byte{make([]byte, 1)}, []int32{0})
	if receiver {
		require.Error(t, err, "a receive on an aborted connection")
	}
	_, err = sc.Isend(make([]byte, 1), 0)
	if !receiver {
		require.Error(t, err, "a send on an aborted connection")
	}
}
