package conformance_test

import (
	"context"
	"net"
	"net/netip"
	"testing"
	"time"

	"github.com/metaroce/metaroce/conformance"
	"github.com/stretchr/testify/require"
)

// silentHint is what the evidence adds when not one datagram came back.
const silentHint = "not one datagram came back from"

// TestNothingListening: against an address where nothing listens, the
// cases that need no control say that not one datagram came back, so a
// wrong address reads as such and not as an IUT that answers HELLO
// wrongly; the evidence was "no HELLO_ACK" and "no NACK" alone. An
// address that answers, if with nonsense, gets no such hint.
func TestNothingListening(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()

	// A port just closed: nothing listens there.
	c, err := net.ListenUDP("udp", &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1)})
	require.NoError(t, err)
	closed := netip.MustParseAddrPort(c.LocalAddr().String())
	c.Close()
	rs := conformance.Run(ctx, conformance.AddrIUT(closed), casesByID("handshake", "unknown-conn"), 1)
	require.Len(t, rs, 2)
	for _, r := range rs {
		require.Equal(t, conformance.Fail, r.Verdict, r.Case.ID)
		require.Contains(t, r.Evidence, silentHint+" "+closed.String(), r.Case.ID)
	}

	// Something that echoes every datagram: it answers, if wrongly.
	echo, err := net.ListenUDP("udp", &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1)})
	require.NoError(t, err)
	defer echo.Close()
	go func() {
		b := make([]byte, 65536)
		for {
			n, from, err := echo.ReadFromUDP(b)
			if err != nil {
				return
			}
			echo.WriteToUDP(b[:n], from)
		}
	}()
	rs = conformance.Run(ctx, conformance.AddrIUT(netip.MustParseAddrPort(echo.LocalAddr().String())), casesByID("handshake"), 1)
	require.Equal(t, conformance.Fail, rs[0].Verdict)
	require.Contains(t, rs[0].Evidence, "no HELLO_ACK")
	require.NotContains(t, rs[0].Evidence, silentHint)
}
