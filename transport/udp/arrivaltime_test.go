package udp

import (
	"testing"

	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"

	"github.com/metaroce/metaroce/transport"
	"github.com/metaroce/metaroce/transport/wire"
)

// TestArrivalTimeIsTheRead: the time the driver hands the core with a
// datagram is no earlier than the read that returned it. The caller's
// turn takes its time before the read; a DATA that reached the socket
// in between was stamped as arriving before it did, which the ACK's delay
// field (now − arrival) then overstated, and the sender's RTT sample
// (now − echo − delay) understated by as much: on a loaded host minimum
// RTTs of 1–80 ns over veth and 3 µs over loopback, which the pacer's
// burst and drain factor and the receiver's near-sender rule all take
// as the path's delay. The test holds the drive lock, so that no turn
// reads the socket, hands readSocket a time from before the DATA was
// sent, and reads the delay of the ACK the core then owes.
func TestArrivalTimeIsTheRead(t *testing.T) {
	p := newPair(t, Config{})
	ctx := testCtx(t)
	buf := make([]byte, 100)
	rr, err := p.b.Recv(1, [][]byte{buf}, []uint32{0})
	require.NoError(t, err)

	e := p.eb
	e.drive.Lock()
	locked := true
	defer func() {
		if locked {
			e.drive.Unlock()
		}
	}()
	stale := e.now()
	sr, err := p.a.Send(1, pattern(len(buf), 3), 0)
	require.NoError(t, err)
	tag := e.listening[0]
	fds := []unix.PollFd{{Fd: int32(e.socks[tag].Fd()), Events: unix.POLLIN}}
	scratch := make([]byte, 1<<16)
	var delays []transport.Time
	var before, at transport.Time
	// The first datagram to arrive may be the sender's acknowledgement
	// of the RECV_READY rather than the DATA: read until the core owes
	// the DATA's ACK (due at once: the message's only segment). It is
	// polled from the core and never leaves; the sender's retransmission,
	// acknowledged by the loop, completes the transfer below.
	for len(delays) == 0 {
		n, err := unix.Poll(fds, 10_000)
		require.NoError(t, err)
		require.Equal(t, 1, n, "the DATA did not arrive")
		before = e.now()
		require.Positive(t, e.readSocket(tag, stale))
		at = e.now()
		for {
			tx, ok := e.core.PollTransmit(at, scratch)
			if !ok {
				break
			}
			d := scratch[:tx.N]
			if wire.PeekOpcode(d) != wire.OpAck {
				continue
			}
			var ack wire.Ack
			_, err := wire.ParseAck(&ack, d)
			require.NoError(t, err)
			for _, r := range ack.Records[:ack.N] {
				delays = append(delays, transport.Time(r.Delay))
			}
		}
	}
	for _, d := range delays {
		require.LessOrEqual(t, d, at-before, "ack delay %v counts from before the read (%v before it)", d, before-stale)
	}
	e.drive.Unlock()
	locked = false
	require.NoError(t, sr.Wait(ctx))
	require.NoError(t, rr.Wait(ctx))
	require.Equal(t, pattern(len(buf), 3), buf)
}
