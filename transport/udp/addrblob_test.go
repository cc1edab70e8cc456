package udp

import (
	"net/netip"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestAddrBlobRoundTrip(t *testing.T) {
	tests := [][]netip.AddrPort{
		{mustAP("127.0.0.1:1")},
		{mustAP("198.18.0.2:4791"), mustAP("[2001:db8::1]:65535")},
		make16(),
	}
	for _, addrs := range tests {
		b, err := EncodeAddrs(nil, addrs)
		require.NoError(t, err)
		require.LessOrEqual(t, len(b), 512)
		got, err := DecodeAddrs(b)
		require.NoError(t, err)
		require.Equal(t, addrs, got)
	}
}

func make16() []netip.AddrPort {
	var out []netip.AddrPort
	for i := 0; i < 16; i++ {
		out = append(out, netip.AddrPortFrom(netip.AddrFrom16([16]byte{0x20, 1, 15: byte(i + 1)}), uint16(1000+i)))
	}
	return out
}

func TestAddrBlobErrors(t *testing.T) {
	_, err := EncodeAddrs(nil, nil)
	require.Error(t, err)
	_, err = EncodeAddrs(nil, []netip.AddrPort{{}})
	require.Error(t, err)
	good, _ := EncodeAddrs(nil, []netip.AddrPort{mustAP("10.0.0.1:5")})
	bad := map[string][]byte{
		"empty":       nil,
		"version":     {2, 1, 4, 10, 0, 0, 1, 0, 5},
		"no planes":   {1, 0},
		"17 planes":   {1, 17},
		"truncated":   good[:len(good)-1],
		"trailing":    append(append([]byte(nil), good...), 0),
		"family":      {1, 1, 5, 10, 0, 0, 1, 0, 5},
		"port zero":   {1, 1, 4, 10, 0, 0, 1, 0, 0},
		"unspecified": {1, 1, 4, 0, 0, 0, 0, 0, 5},
		"mapped":      append([]byte{1, 1, 6, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff, 10, 0, 0, 1}, 0, 5),
	}
	for name, b := range bad {
		_, err := DecodeAddrs(b)
		require.ErrorIs(t, err, errAddrBlob, name)
	}
}

// FuzzDecodeAddrs checks that decoding never panics and that whatever
// decodes re-encodes to the same bytes (the encoding is canonical, which the
// peer table relies on: it keys peers by blob).
func FuzzDecodeAddrs(f *testing.F) {
	for _, addrs := range [][]netip.AddrPort{{mustAP("127.0.0.1:9")}, make16()} {
		b, _ := EncodeAddrs(nil, addrs)
		f.Add(b)
	}
	f.Add([]byte{1, 1, 6})
	f.Fuzz(func(t *testing.T, b []byte) {
		addrs, err := DecodeAddrs(b)
		if err != nil {
			return
		}
		again, err := EncodeAddrs(nil, addrs)
		require.NoError(t, err)
		require.Equal(t, b, again)
	})
}
