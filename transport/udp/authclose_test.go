package udp

import (
	"testing"

	"github.com/stretchr/testify/require"
)

// TestAuthenticatedCloseIsAnswered: with a secret, the reply to a peer's
// CLOSE leaves in the transmit pass after the connection is gone; its keys
// must still be there to seal it. They used to be forgotten first, so the
// reply was dropped (TxDrops), the closing side waited out 4 ×
// HandshakeRetry, and the passive side logged its CLOSE retransmissions as
// authentication failures.
func TestAuthenticatedCloseIsAnswered(t *testing.T) {
	cfg := Config{Addrs: lo, Secret: []byte("0123456789abcdef0123456789abcdef")}
	cfg.Core.HandshakeRetry = 250e6 // 250 ms, so that a lost reply costs a second
	p := newPair(t, cfg)
	require.NoError(t, p.a.Close())
	<-p.b.closed
	sa, sb := p.ea.Stats(), p.eb.Stats()
	require.Zero(t, sb.TxDrops, "the passive side dropped its reply to the CLOSE")
	require.Zero(t, sb.AuthDrops, "the closing side had to repeat its CLOSE")
	require.Zero(t, sa.AuthDrops)
	require.Equal(t, "closed", p.a.Stats().State)
}

// TestSecretNeedsRoomForTrailer: with a secret the protocol's datagrams are
// MaxDatagram less the 24-byte trailer, and must still hold 576 bytes. A
// smaller MaxDatagram used to pass, and every handshake then timed out
// with advice about listening peers and UDP filters.
func TestSecretNeedsRoomForTrailer(t *testing.T) {
	secret := []byte("0123456789abcdef0123456789abcdef")
	_, err := Listen(Config{Addrs: lo, Secret: secret, MaxDatagram: 580})
	require.ErrorContains(t, err, "max datagram 580 too small with a secret")
	e, err := Listen(Config{Addrs: lo, Secret: secret, MaxDatagram: 600})
	require.NoError(t, err)
	require.NoError(t, e.Close())
	e, err = Listen(Config{Addrs: lo, MaxDatagram: 580})
	require.NoError(t, err)
	require.NoError(t, e.Close())
}
