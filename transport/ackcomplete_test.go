package transport

import (
	"testing"

	"github.com/metaroce/metaroce/transport/wire"
	"github.com/stretchr/testify/require"
)

// TestPacketCompletingMessageIsAcknowledgedAtOnce: the peer's send
// completes only when every packet of it is acknowledged, so the packet
// that completes a message is acknowledged at once (docs/spec.md §3.1)
// even without ACK_REQ: here the last packet, which asks, overtook the
// first on another path, and the first, arriving after it, completes the
// message. Held for the ACK delay, it kept the sender's completion one
// AckDelay late (a 64-rank 1 MiB all-to-all at 1600 Gb/s in the
// simulator: 21.0 µs against 18.1).
func TestPacketCompletingMessageIsAcknowledgedAtOnce(t *testing.T) {
	_, c := testConn(t, Config{Planes: 1, PathsPerPlane: 2, AckDelay: 50 * Microsecond, AckEvery: 16}, 4152)
	seg := uint64(c.seg)
	require.NoError(t, c.postRecv(0, 5, []RecvBuf{{Cap: 2 * seg, Cookie: 1}}))
	c.ctrlQ = c.ctrlQ[:0] // the RECV_READY left
	buf := make([]byte, 9000)
	arrive := func(now Time, path uint16, off uint64, flags wire.Flags) {
		h := &wire.Header{Op: wire.OpData, Path: path, PSN: 0, Flags: flags}
		require.True(t, c.onSequenced(now, h, NotECT, 0, true))
		n := min(seg, seg+10-off)
		d := &wire.Data{Header: *h, Flow: 5, Msg: 0, Index: 0, Offset: off, MsgLen: seg + 10, Payload: make([]byte, n)}
		require.True(t, c.place(now, d).OK)
	}

	arrive(1000, 0, seg, wire.FlagAckReq) // the last packet, first
	require.True(t, c.ackDue, "ACK_REQ is acknowledged at once")
	_, ok := c.poll(1000, buf)
	require.True(t, ok)
	require.False(t, c.ackDue)

	arrive(2000, 1, 0, 0) // the first packet completes the message
	require.True(t, c.ackDue, "the packet that completed the message waits for the ACK delay (due at %v)", c.ackAt)
	tx, ok := c.poll(2000, buf)
	require.True(t, ok)
	var a wire.Ack
	_, err := wire.ParseAck(&a, buf[:tx.N])
	require.NoError(t, err)
	require.Equal(t, 1, a.N)
	require.Equal(t, uint16(1), a.Records[0].Path)

	// A packet that leaves its message incomplete is still held, and so
	// is one that completes a message while the flow's next message is
	// arriving already (the peer streams; that message's packets bring
	// the ACK soon).
	require.NoError(t, c.postRecv(3000, 5, []RecvBuf{{Cap: 2 * seg, Cookie: 2}}))
	require.NoError(t, c.postRecv(3000, 5, []RecvBuf{{Cap: 2 * seg, Cookie: 3}}))
	c.ctrlQ = c.ctrlQ[:0]
	psn := wire.PSN(1)
	data := func(now Time, msg uint32, off uint64) {
		h := &wire.Header{Op: wire.OpData, Path: 1, PSN: psn}
		psn++
		require.True(t, c.onSequenced(now, h, NotECT, 0, true))
		n := min(seg, seg+10-off)
		require.True(t, c.place(now, &wire.Data{Header: *h, Flow: 5, Msg: msg, Offset: off, MsgLen: seg + 10, Payload: make([]byte, n)}).OK)
	}
	data(4000, 1, 0)
	require.False(t, c.ackDue, "a message still incomplete")
	require.Greater(t, c.ackAt, Time(4000))
	data(4100, 2, 0)
	data(4200, 1, seg) // completes message 1, message 2 under way
	require.False(t, c.ackDue, "completion while the next message arrives")
	data(4300, 2, seg) // completes message 2, nothing after it
	require.True(t, c.ackDue)
}
