package rocev2

import (
	"bytes"
	"testing"

	"github.com/stretchr/testify/require"
)

func FuzzParse(f *testing.F) {
	for _, h := range []Header{
		{Op: OpData, QP: 3, DstConn: 7, PSN: 99, Flow: 1, Msg: 2, Offset: 4096, MsgLen: 8192, Tag: 5},
		{Op: OpAck, DstConn: 1, PSN: psnMask},
		{Op: OpNak, DstConn: 2, PSN: 4},
		{Op: OpCNP, QP: 1, DstConn: 9},
		{Op: OpCTS, DstConn: 3, PSN: 12, Flow: 1, Msg: 6, MsgLen: CTSLen},
		{Op: OpConnReq, SrcConn: 4, QPs: 2},
		{Op: OpConnRep, DstConn: 4, SrcConn: 8, QPs: 2},
	} {
		b := make([]byte, h.Len()+100)
		n := h.Put(b)
		switch h.Op {
		case OpData:
			f.Add(b[:n+100])
		case OpCTS:
			f.Add(b[:n+CTSLen])
		}
		f.Add(b[:n])
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		var h Header
		pay, err := Parse(&h, b)
		if err != nil {
			return
		}
		require.Equal(t, len(b), h.Len()+pay)
		out := make([]byte, h.Len())
		h.Put(out)
		require.True(t, bytes.Equal(out, b[:h.Len()]), "re-encoding differs")
		var h2 Header
		_, err = Parse(&h2, append(out, b[h.Len():]...))
		require.NoError(t, err)
		require.Equal(t, h, h2)
	})
}
