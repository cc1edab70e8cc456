package udp

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/metaroce/metaroce/transport"
)

// TestPollDrivesTransfers: callers that only test their requests and
// Poll between tests (an NCCL proxy thread) complete transfers of every
// size with the bytes intact, while the event loop parks for the pollers
// and the drive lock passes between their turns and the loop's; Poll on a
// finished request does nothing. The event loop would still complete the
// transfers, later, if Poll ran no turn: what the turns save is measured
// by the net-plugin harness's BenchmarkTwoProcess, not asserted here.
func TestPollDrivesTransfers(t *testing.T) {
	pr := newPair(t, Config{})
	ctx := testCtx(t)
	for i, size := range []int{8, 64 << 10, 4 << 20} {
		msg := pattern(size, byte(i))
		buf := make([]byte, size)
		rr, err := pr.b.Recv(1, [][]byte{buf}, []uint32{0})
		require.NoError(t, err)
		sr, err := pr.a.Send(1, msg, 0)
		require.NoError(t, err)
		for {
			sd, _ := sr.Test()
			rd, _ := rr.Test()
			if sd && rd {
				break
			}
			require.NoError(t, ctx.Err(), "%d bytes: not done", size)
			sr.Poll()
			rr.Poll()
		}
		require.NoError(t, sr.Wait(ctx))
		require.NoError(t, rr.Wait(ctx))
		require.Equal(t, msg, buf, "%d bytes", size)
		rr.Poll() // finished: nothing to do
	}
}

// TestPollLease: a Poll lets the event loop leave the datapath to the
// poller for WaitSpin, and no longer, so that a poller that stops does
// not leave the loop parked; with WaitSpin disabled there is no lease.
func TestPollLease(t *testing.T) {
	cases := []struct {
		name  string
		spin  time.Duration
		lease bool
	}{
		{"default", 0, true},
		{"long", 5 * time.Millisecond, true},
		{"disabled", -1, false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			pr := newPair(t, Config{WaitSpin: tc.spin})
			rr, err := pr.a.Recv(1, [][]byte{make([]byte, 8)}, []uint32{0})
			require.NoError(t, err)
			e := pr.ea
			require.Zero(t, e.pollLease(e.now()), "a lease before any Poll")
			rr.Poll()
			at := transport.Time(e.polledAt.Load())
			spin := e.cfg.WaitSpin
			if !tc.lease {
				require.Zero(t, at)
				require.Zero(t, e.pollLease(e.now()))
				return
			}
			require.Equal(t, spin, e.pollLease(at))
			require.Equal(t, spin/2, e.pollLease(at+transport.Time(spin/2)))
			require.Zero(t, e.pollLease(at+transport.Time(spin)))
			require.Zero(t, e.pollLease(at+transport.Time(2*spin)))
		})
	}
}
