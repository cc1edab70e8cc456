package transport

import (
	"testing"

	"github.com/metaroce/metaroce/transport/wire"
	"github.com/stretchr/testify/require"
)

// TestDataForMissingBufferIsNackedBadOffset: DATA naming an index the
// receive group does not have lands outside what was posted: it is
// dropped as a bad placement and NACKed BAD_OFFSET, like the other bad
// placements (docs/spec.md §3.4).
func TestDataForMissingBufferIsNackedBadOffset(t *testing.T) {
	e, c := testConn(t, Config{Planes: 1, PathsPerPlane: 1}, 4152)
	require.NoError(t, c.postRecv(0, 5, []RecvBuf{{Cap: 100, Cookie: 1}, {Cap: 100, Cookie: 2}}))
	c.ctrlQ = c.ctrlQ[:0] // the RECV_READY left
	d := &wire.Data{Flow: 5, Msg: 0, Index: 2, Offset: 0, MsgLen: 10, Payload: make([]byte, 10)}
	require.False(t, c.place(1000, d).OK)
	require.Equal(t, uint64(1), e.Counters().Dropped[DropBadPlacement])
	require.Len(t, c.ctrlQ, 1)
	nk := c.ctrlQ[0].nack
	require.Equal(t, wire.NackBadOffset, nk.Reason)
	require.Equal(t, uint8(2), nk.Index)
	require.Equal(t, uint32(5), nk.Flow)
}

// TestSequencedOnPathBeyondLimitIsCounted: a sequenced packet on a peer
// path id no peer may use (1024 and up, docs/spec.md §3.1) keeps no receive
// state and is counted as malformed, as every datagram the endpoint does
// not act on is counted.
func TestSequencedOnPathBeyondLimitIsCounted(t *testing.T) {
	e, c := testConn(t, Config{Planes: 1, PathsPerPlane: 1}, 4152)
	fresh := c.onSequenced(1000, &wire.Header{Op: wire.OpProbe, Path: maxRxPaths, Flags: wire.FlagAckReq}, NotECT, 0, false)
	require.False(t, fresh)
	require.Equal(t, uint64(1), e.Counters().Dropped[DropMalformed])
	require.Empty(t, c.rxPaths)
	require.True(t, c.onSequenced(1000, &wire.Header{Op: wire.OpProbe, Path: maxRxPaths - 1, Flags: wire.FlagAckReq}, NotECT, 0, false))
	require.Equal(t, uint64(1), e.Counters().Dropped[DropMalformed])
}

// TestRejectedFirstDataDoesNotStartTheMessage: a first DATA that is itself
// a bad placement (here off the segment grid, with a length of its own) is
// NACKed BAD_OFFSET and dropped alone (§3.4), and leaves the buffer as it
// was: the message's length is taken from the first DATA accepted, so the
// genuine DATA that follow are placed. Taking it from the rejected one
// made every genuine DATA disagree with it, and the receive never
// completed.
func TestRejectedFirstDataDoesNotStartTheMessage(t *testing.T) {
	e, c := testConn(t, Config{Planes: 1, PathsPerPlane: 1}, 4152)
	require.NoError(t, c.postRecv(0, 5, []RecvBuf{{Cap: 8192, Cookie: 1}}))
	c.ctrlQ = c.ctrlQ[:0] // the RECV_READY left
	seg := uint64(c.seg)
	bad := &wire.Data{Flow: 5, Msg: 0, Index: 0, Offset: 100, MsgLen: 4000, Payload: make([]byte, 10)}
	require.False(t, c.place(1000, bad).OK)
	require.Equal(t, uint64(1), e.Counters().Dropped[DropBadPlacement])
	require.Len(t, c.ctrlQ, 1)
	require.Equal(t, wire.NackBadOffset, c.ctrlQ[0].nack.Reason)
	require.Equal(t, uint64(100), c.ctrlQ[0].nack.Value)

	const length = 2000
	good := &wire.Data{Flow: 5, Msg: 0, Index: 0, Offset: 0, MsgLen: length, Payload: make([]byte, min(seg, length))}
	p := c.place(1001, good)
	require.True(t, p.OK, "the genuine first DATA was refused after a rejected one")
	require.Equal(t, uint64(1), e.Counters().Dropped[DropBadPlacement])
}

// TestMalformedFirstDataTooLongFailsNothing: a first DATA that names a
// message longer than the buffer but is itself malformed (off the segment
// grid) is a bad placement, NACKed with its offset, and does not fail the
// buffer as a message too large would: only a well-formed first DATA
// speaks for the message's length.
func TestMalformedFirstDataTooLongFailsNothing(t *testing.T) {
	e, c := testConn(t, Config{Planes: 1, PathsPerPlane: 1}, 4152)
	require.NoError(t, c.postRecv(0, 5, []RecvBuf{{Cap: 8192, Cookie: 1}}))
	c.ctrlQ = c.ctrlQ[:0]
	seg := uint64(c.seg)
	bad := &wire.Data{Flow: 5, Msg: 0, Index: 0, Offset: 7, MsgLen: 1 << 20, Payload: make([]byte, 10)}
	require.False(t, c.place(1000, bad).OK)
	require.Len(t, c.ctrlQ, 1)
	require.Equal(t, wire.NackBadOffset, c.ctrlQ[0].nack.Reason)
	require.Equal(t, uint64(7), c.ctrlQ[0].nack.Value)
	require.Empty(t, e.events, "the buffer failed on a malformed DATA")

	const length = 3000
	good := &wire.Data{Flow: 5, Msg: 0, Index: 0, Offset: 0, MsgLen: length, Payload: make([]byte, min(seg, length))}
	require.True(t, c.place(1001, good).OK)

	// A well-formed first DATA of a message too long still fails it.
	require.NoError(t, c.postRecv(0, 6, []RecvBuf{{Cap: 100, Cookie: 2}}))
	long := &wire.Data{Flow: 6, Msg: 0, Index: 0, Offset: 0, MsgLen: 1 << 20, Payload: make([]byte, seg)}
	require.False(t, c.place(1002, long).OK)
	nk := c.ctrlQ[len(c.ctrlQ)-1].nack
	require.Equal(t, wire.NackBadOffset, nk.Reason)
	require.Equal(t, uint64(1<<20), nk.Value)
}
