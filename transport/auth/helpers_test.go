package auth

import (
	"testing"

	"github.com/metaroce/metaroce/transport/wire"
	"github.com/stretchr/testify/require"
)

var testSecret = []byte("0123456789abcdef-test-secret")

// Fixed connection ids and tokens of the test connection: A is the
// initiator, B the responder.
const (
	aConn, aTok = 0x0a0a0a01, 0x1111222233334444
	bConn, bTok = 0x0b0b0b02, 0x5555666677778888
)

func hello(op wire.Opcode, dstConn uint32, dstTok uint64, srcConn uint32, srcTok uint64) []byte {
	h := wire.Hello{SrcConn: srcConn, SrcTok: srcTok, Planes: 1, Paths: 4, MaxDgram: 4152, Addr: []byte("addr")}
	h.Op, h.DstConn, h.Token = op, dstConn, dstTok
	return h.Append(nil)
}

// handshake runs the two handshake packets from a to b and back through
// Seal and Open, registering the connection on both tables.
func handshake(t testing.TB, a, b *Table) {
	t.Helper()
	s, err := a.Seal(nil, hello(wire.OpHello, 0, 0, aConn, aTok))
	require.NoError(t, err)
	_, err = b.Open(s)
	require.NoError(t, err)
	s, err = b.Seal(nil, hello(wire.OpHelloAck, aConn, aTok, bConn, bTok))
	require.NoError(t, err)
	_, err = a.Open(s)
	require.NoError(t, err)
}

func newPair(t testing.TB, cfg Config) (a, b *Table) {
	t.Helper()
	if cfg.Secret == nil {
		cfg.Secret = testSecret
	}
	a, err := New(cfg)
	require.NoError(t, err)
	b, err = New(cfg)
	require.NoError(t, err)
	handshake(t, a, b)
	return a, b
}

// dataPkt builds a DATA packet to the connection end (conn, tok) with a
// payload of n bytes, with room for the trailer.
func dataPkt(conn uint32, tok uint64, psn uint32, n int) []byte {
	d := wire.Data{Flow: 7, Msg: 42, Index: 1, Timestamp: 99, Offset: 0, MsgLen: uint64(n)}
	d.Op, d.DstConn, d.Token, d.Path, d.PSN = wire.OpData, conn, tok, 3, wire.PSN(psn)
	d.Payload = make([]byte, n)
	for i := range d.Payload {
		d.Payload[i] = byte(i*7 + 1)
	}
	b := make([]byte, 0, d.Length()+Overhead)
	return d.Append(b)
}
