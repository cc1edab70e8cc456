package auth

import (
	"bytes"
	"testing"

	"github.com/metaroce/metaroce/transport/wire"
)

// FuzzOpen feeds arbitrary datagrams to a table holding keys: Open must not
// panic, must return a prefix of its input, and must accept no content but
// that of the genuine packets the seed corpus sealed. (The corpus may come
// from another process, whose sequence numbers differ, so the check is on
// the opened content.)
func FuzzOpen(f *testing.F) {
	a, _ := newPair(f, Config{})
	var plain [][]byte
	for i, p := range [][]byte{
		dataPkt(bConn, bTok, 0, 0),
		dataPkt(bConn, bTok, 1, 200),
		hello(wire.OpHello, 0, 0, 3, 4),
		hello(wire.OpHelloAck, aConn, aTok, bConn, bTok),
	} {
		s, err := a.Seal(nil, p)
		if err != nil {
			f.Fatal(i, err)
		}
		plain = append(plain, p)
		f.Add(s)
	}
	f.Add([]byte{})
	f.Add(make([]byte, wire.HeaderLen+Overhead))
	f.Fuzz(func(t *testing.T, data []byte) {
		_, b := newPair(t, Config{Encrypt: len(data)%2 == 1})
		in := append([]byte(nil), data...)
		out, err := b.Open(in)
		if err != nil {
			return
		}
		if len(out) > len(data) || &out[:1][0] != &in[0] {
			t.Fatalf("Open returned %d bytes that are not a prefix of its %d-byte input", len(out), len(data))
		}
		for _, g := range plain {
			if bytes.Equal(g, out) {
				return
			}
		}
		t.Fatalf("forged packet accepted: %x", data)
	})
}
