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
