package transport

import (
	"errors"
	"math/rand/v2"
	"testing"

	"github.com/metaroce/metaroce/transport/wire"
	"github.com/stretchr/testify/require"
)

// TestUnknownConnNackFoundByIndex: a NACK UNKNOWN_CONN carries no token of
// ours, so it is found through the (peer id, token) index rather than a
// scan of every connection (docs/spec.md §3.3). With many connections, a
// NACK that echoes one of them fails exactly that one; one with the right
// id but a wrong token, or for a connection no longer established, fails
// none; the index forgets failed connections.
func TestUnknownConnNackFoundByIndex(t *testing.T) {
	const conns = 500
	e := NewEndpoint(Config{Planes: 1, PathsPerPlane: 1}, rand.New(rand.NewPCG(3, 4)))
	var cs []*Conn
	for i := 0; i < conns; i++ {
		c, err := e.newConn(0, RemoteID(i))
		require.NoError(t, err)
		c.setupPaths(0)
		c.established(&wire.Hello{SrcConn: uint32(1000 + i), SrcTok: uint64(7000 + i), Planes: 1, Paths: 1, MaxDgram: 4152})
		cs = append(cs, c)
	}
	require.Len(t, e.byPeerID, conns)
	require.NoError(t, CheckFootprint(e))
	nack := func(conn uint32, tok uint64) Datagram {
		k := wire.Nack{Reason: wire.NackUnknownConn, Value: uint64(conn)}
		k.Op, k.Token = wire.OpNack, tok
		return Datagram{From: 1, Data: k.Append(nil)}
	}
	drops := func() uint64 { return e.Counters().Dropped[DropUnknownConn] }

	e.HandleDatagram(10, nack(1000+321, 7000+322)) // wrong token
	require.Equal(t, uint64(1), drops())
	require.Equal(t, conns, e.NumConns())

	e.Close(10, cs[400].id) // closing: not matched
	e.HandleDatagram(10, nack(1000+400, 7000+400))
	require.Equal(t, uint64(2), drops())

	e.HandleDatagram(10, nack(1000+321, 7000+321))
	require.Equal(t, conns-1, e.NumConns())
	require.Nil(t, e.conns[cs[321].id])
	err, ok := lastClosed(e)
	require.True(t, ok)
	require.True(t, errors.Is(err, ErrPeerDead), "%v", err)
	require.Len(t, e.byPeerID, conns-1)
	require.NoError(t, CheckFootprint(e))

	e.HandleDatagram(10, nack(1000+321, 7000+321)) // gone now
	require.Equal(t, uint64(3), drops())
}
