package udp

import (
	"bytes"
	"context"
	"net/netip"
	"testing"
	"time"

	"github.com/metaroce/metaroce/transport"
	"github.com/metaroce/metaroce/transport/auth"
	"github.com/stretchr/testify/require"
)

var lo = []netip.Addr{netip.MustParseAddr("127.0.0.1")}

// TestAuthenticatedTransfer: with the same secret on both sides, messages
// arrive intact and every datagram was sealed and opened.
func TestAuthenticatedTransfer(t *testing.T) {
	secret := []byte("0123456789abcdef0123456789abcdef")
	a, err := Listen(Config{Addrs: lo, Secret: secret, Seed: 1})
	require.NoError(t, err)
	defer a.Close()
	b, err := Listen(Config{Addrs: lo, Secret: secret, Seed: 2})
	require.NoError(t, err)
	defer b.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	acc := make(chan *Conn, 1)
	go func() { c, _ := a.Accept(ctx); acc <- c }()
	cb, err := b.Dial(ctx, a.Addrs())
	require.NoError(t, err)
	ca := <-acc
	require.NotNil(t, ca)
	for _, n := range []int{0, 1, 70000, 3 << 20} {
		src := make([]byte, n)
		for i := range src {
			src[i] = byte(i*13 + n)
		}
		dst := make([]byte, n)
		rr, err := ca.Recv(1, [][]byte{dst}, []uint32{0})
		require.NoError(t, err)
		sr, err := cb.Send(1, src, 0)
		require.NoError(t, err)
		require.NoError(t, sr.Wait(ctx))
		require.NoError(t, rr.Wait(ctx))
		require.True(t, bytes.Equal(src, dst), "size %d", n)
	}
	require.Zero(t, a.Stats().AuthDrops)
	require.Zero(t, b.Stats().AuthDrops)
}

// TestAuthenticationMismatch: an endpoint with another secret, or none, is
// never let in: its datagrams are dropped and counted, and the dial times
// out with an error instead of connecting. The acceptor cannot answer a
// HELLO it cannot authenticate (anyone could forge such a refusal), so
// the error names the peer and says that a secret that differs is one
// reason for the silence.
func TestAuthenticationMismatch(t *testing.T) {
	a, err := Listen(Config{Addrs: lo, Secret: []byte("the-right-secret-16+"), Seed: 1})
	require.NoError(t, err)
	defer a.Close()
	for _, other := range [][]byte{[]byte("some-other-secret-16"), {}} {
		cfg := Config{Addrs: lo, Seed: 3}
		if len(other) > 0 {
			cfg.Secret = other
		}
		cfg.Core.HandshakeTimeout = 300e6 // 300 ms
		b, err := Listen(cfg)
		require.NoError(t, err)
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		_, err = b.Dial(ctx, a.Addrs())
		cancel()
		b.Close()
		require.ErrorIs(t, err, transport.ErrHandshakeTimeout)
		require.ErrorContains(t, err, a.Addrs()[0].String())
		require.ErrorContains(t, err, auth.EnvSecret)
	}
	require.Positive(t, a.Stats().AuthDrops)
}
