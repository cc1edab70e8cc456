package udp

import (
	"net"
	"net/netip"
	"testing"
	"time"

	"github.com/metaroce/metaroce/transport/wire"
	"github.com/stretchr/testify/require"
)

// TestHelloOfOtherFamilyRefused: an unauthenticated HELLO whose address
// blob names an IPv6 address for this endpoint's IPv4 plane used to route
// the HELLO_ACK to that address through the IPv4 socket, which panicked in
// the event loop and left the endpoint hung for good. The HELLO is now
// attributed to its source and its connection refused; the endpoint keeps
// working and closes.
func TestHelloOfOtherFamilyRefused(t *testing.T) {
	p := newPair(t, Config{Addrs: lo})
	blob, err := EncodeAddrs(nil, []netip.AddrPort{netip.MustParseAddrPort("[::1]:4793")})
	require.NoError(t, err)
	h := wire.Hello{Header: wire.Header{Op: wire.OpHello}, SrcConn: 7, SrcTok: 0x1234,
		Planes: 1, Paths: 1, MaxDgram: 1472, Addr: blob}
	c, err := net.DialUDP("udp4", nil, net.UDPAddrFromAddrPort(p.eb.Addrs()[0]))
	require.NoError(t, err)
	defer c.Close()
	before := p.eb.Stats().RxDatagrams
	_, err = c.Write(h.Append(nil))
	require.NoError(t, err)
	require.Eventually(t, func() bool { return p.eb.Stats().RxDatagrams > before }, testTimeout, time.Millisecond,
		"the HELLO never reached the endpoint")
	transfer(t, p.a, p.b, 1, pattern(64<<10, 1))
	require.NoError(t, p.eb.Close())
}
