package collectives

import (
	"context"
	"net"
	"net/netip"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/metaroce/metaroce/transport"
)

// silentPeer returns the endpoint description of a UDP socket that never
// answers: a rank that died after the rendezvous. The socket is closed at
// the end of the test.
func silentPeer(t *testing.T) []byte {
	t.Helper()
	s, err := net.ListenUDP("udp", &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1)})
	require.NoError(t, err)
	t.Cleanup(func() { s.Close() })
	return []byte(s.LocalAddr().(*net.UDPAddr).AddrPort().String())
}

// TestHandshakeGivesUpWithTimeout: a dial to a rank that never answers
// gives up after Config.Timeout (300 ms here) rather than the core's 5 s
// default, and says so. The context has a deadline far beyond it, so the
// handshake timer alone ends the dial.
func TestHandshakeGivesUpWithTimeout(t *testing.T) {
	cfg, err := Config{Timeout: 300 * time.Millisecond}.withDefaults()
	require.NoError(t, err)
	cfg.UDP.Addrs = []netip.Addr{netip.MustParseAddr("127.0.0.1")}
	f, err := newMetaroceFactory(cfg)
	require.NoError(t, err)
	defer f.abort()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	_, err = f.connect(ctx, 1, [][]byte{silentPeer(t), f.blob()})
	require.ErrorIs(t, err, transport.ErrHandshakeTimeout)
	assert.ErrorContains(t, err, "rank 1 connecting to rank 0")
	assert.ErrorContains(t, err, "within 300ms")
	assert.NoError(t, ctx.Err(), "the handshake timer ended the dial, not the context")
}

// TestHandshakeDeadlineNamesTheSetting: when the setup deadline ends a
// dial to a silent rank (as it does inside New, whose deadline started
// before the rendezvous), the error says what went unanswered, which
// setting bounds it, and what to check.
func TestHandshakeDeadlineNamesTheSetting(t *testing.T) {
	cfg, err := Config{Timeout: 45 * time.Second}.withDefaults()
	require.NoError(t, err)
	cfg.UDP.Addrs = []netip.Addr{netip.MustParseAddr("127.0.0.1")}
	f, err := newMetaroceFactory(cfg)
	require.NoError(t, err)
	defer f.abort()
	ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancel()
	_, err = f.connect(ctx, 1, [][]byte{silentPeer(t), f.blob()})
	require.ErrorIs(t, err, context.DeadlineExceeded)
	assert.ErrorContains(t, err, "rank 0 did not answer the handshake before the setup deadline (Config.Timeout, 45s, or the caller's own)")
	assert.ErrorContains(t, err, "UDP")
}
