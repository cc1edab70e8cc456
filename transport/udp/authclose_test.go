package udp

import (
	"fmt"
	"runtime"
	"sync"
	"testing"

	"github.com/metaroce/metaroce/transport"
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

// TestRefusedDialFailsFastWithSecret: an acceptor that refuses a connection
// (here: the dialer has one plane, the acceptor two) tells the dialer at
// once, and Dial fails with ErrRefused naming the peer, with a secret as
// without. The refusal used to close the connection before its HELLO_ACK
// left, so the CLOSE found no keys to be sealed with and the dialer waited
// out HandshakeTimeout; then the CLOSE followed the HELLO_ACK, so that
// with a secret Dial reported success and the connection closed right
// after.
func TestRefusedDialFailsFastWithSecret(t *testing.T) {
	secret := []byte("0123456789abcdef0123456789abcdef")
	for _, sec := range [][]byte{nil, secret} {
		var logs atomicLines
		b, err := Listen(Config{Addrs: []netipAddr{mustAddr("127.0.0.1"), mustAddr("127.0.0.2")}, Secret: sec, Seed: 2, Logf: logs.add})
		require.NoError(t, err)
		a, err := Listen(Config{Addrs: lo, Secret: sec, Seed: 1, Core: transport.Config{HandshakeTimeout: 60 * transport.Second}})
		require.NoError(t, err)
		c, err := a.Dial(testCtx(t), b.Addrs()[:1])
		require.Error(t, err, "secret %v: a refused dial reported success", sec != nil)
		require.Nil(t, c)
		require.ErrorIs(t, err, ErrRefused, "secret %v", sec != nil)
		require.NotErrorIs(t, err, transport.ErrHandshakeTimeout, "secret %v: the refusal did not reach the dialer", sec != nil)
		require.ErrorContains(t, err, b.Addrs()[0].String(), "the error names the peer")
		require.ErrorContains(t, err, "closed")
		require.NoError(t, a.Close())
		require.NoError(t, b.Close())
		require.Zero(t, b.Stats().TxDrops, "secret %v: the acceptor could not seal its refusal", sec != nil)
		require.Zero(t, a.Stats().AuthDrops, "secret %v: the dialer could not open the refusal", sec != nil)
		require.LessOrEqual(t, logs.count(), 4, "secret %v: %v", sec != nil, logs.all())
	}
}

// atomicLines collects log lines from an endpoint's goroutines.
type atomicLines struct {
	mu    sync.Mutex
	lines []string
}

func (l *atomicLines) add(format string, args ...any) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.lines = append(l.lines, fmt.Sprintf(format, args...))
}

func (l *atomicLines) count() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.lines)
}

func (l *atomicLines) all() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]string(nil), l.lines...)
}

// TestRefusedConnectionKeysForgotten: with a secret, the keys that the
// sealed HELLO_ACK of a refused connection installed are forgotten when
// the connection ends, as those of every other connection are. Those of a
// connection refused before it had a Conn (a dialer whose HELLO carried
// unusable plane addresses, or one dialing a closing endpoint) used to be
// kept for ever: each refusal took one of the MaxConns places in the key
// table, and once a peer had been refused that often the endpoint could
// seal no HELLO_ACK or HELLO again, so that every dial to or from it timed
// out.
func TestRefusedConnectionKeysForgotten(t *testing.T) {
	secret := []byte("0123456789abcdef0123456789abcdef")
	two := []netipAddr{mustAddr("127.0.0.1"), mustAddr("127.0.0.2")}
	const room = 2 // the connections b may hold, and hold keys for
	b, err := Listen(Config{Addrs: two, Secret: secret, Seed: 2, Core: transport.Config{MaxConns: room}})
	require.NoError(t, err)
	t.Cleanup(func() { b.Close() })
	a, err := Listen(Config{Addrs: lo, Secret: secret, Seed: 1, Core: transport.Config{HandshakeTimeout: transport.Second}})
	require.NoError(t, err)
	t.Cleanup(func() { a.Close() })
	ctx := testCtx(t)
	for i := range room + 1 {
		c, err := a.Dial(ctx, b.Addrs()[:1])
		requireRefused(t, c, err, b, fmt.Sprintf("dial %d", i))
		// Wait until b's refused connection has ended and a turn has
		// dropped what it held.
		for ended := false; !ended; runtime.Gosched() {
			onLoop(t, b, func() { ended = b.core.NumConns() == 0 && len(b.laterForget) == 0 })
		}
		var keys int
		onLoop(t, b, func() { keys = b.auth.Conns() })
		require.Zero(t, keys, "dial %d: b holds the keys of a connection that ended", i)
	}

	// So b still has room for a peer it takes.
	d, err := Listen(Config{Addrs: two, Secret: secret, Seed: 3, Core: transport.Config{HandshakeTimeout: transport.Second}})
	require.NoError(t, err)
	t.Cleanup(func() { d.Close() })
	join(t, d, b)
}
