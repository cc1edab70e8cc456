package collectives

import (
	"context"
	"net"
	"net/netip"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/metaroce/metaroce/collectives/reduce"
	"github.com/metaroce/metaroce/collectives/sched"
	"github.com/metaroce/metaroce/transport"
	"github.com/metaroce/metaroce/transport/udp"
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
	_, err = f.connect(ctx, 1, [][]byte{silentPeer(t), f.blob()}, setupDeadline{})
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
	_, err = f.connect(ctx, 1, [][]byte{silentPeer(t), f.blob()}, setupDeadline{})
	require.ErrorIs(t, err, context.DeadlineExceeded)
	assert.ErrorContains(t, err, "rank 0 did not answer the handshake before the setup deadline (Config.Timeout, 45s, or the caller's own)")
	assert.ErrorContains(t, err, "UDP")
}

// TestMetaRoCEStrayConnectionIgnored: a connection to a rank's MetaRoCE
// endpoint from an endpoint that is no rank of the job (a leftover rank
// of an earlier job, anything that speaks MetaRoCE without a secret), made
// during New, is closed and does not count, and New connects the ranks
// that come after it, whose collective then works. Before, rank 0 took
// the stray for one of its peers' connections and failed New with "which
// is no rank of this job".
func TestMetaRoCEStrayConnectionIgnored(t *testing.T) {
	stray, err := udp.Listen(udp.Config{Addrs: []netip.Addr{netip.MustParseAddr("127.0.0.1")}})
	require.NoError(t, err)
	defer stray.Close()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	defer ln.Close()
	root := ln.Addr().String()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	// Rank 0's stray has connected, and so waits in rank 0's queue of
	// accepted connections, before rank 1 dials rank 0.
	strayIn := make(chan struct{})
	cfg := Config{Transport: TransportMetaRoCE, Timeout: 30 * time.Second, Logf: t.Logf}
	cfg.UDP.Addrs = []netip.Addr{netip.MustParseAddr("127.0.0.1")}
	errs := make(chan error, 2)
	for r := range 2 {
		go func() {
			b := Bootstrap{Rank: r, NRanks: 2, Root: root, Source: "test"}
			if r == 0 {
				b.listener = ln
				b.connecting = func(eps [][]byte) {
					defer close(strayIn)
					addrs, err := parseAddrs(eps[0])
					if err == nil {
						_, err = stray.Dial(ctx, addrs)
					}
					if err != nil {
						t.Errorf("the stray's dial of rank 0: %v", err)
					}
				}
			} else {
				b.connecting = func([][]byte) { <-strayIn }
			}
			c, err := New(ctx, b, cfg)
			if err == nil {
				err = runOne(ctx, c, sched.AllReduce, reduce.Float32, reduce.OpSum, 1024, false)
				c.Close()
			}
			errs <- err
		}()
	}
	for range 2 {
		require.NoError(t, recv(ctx, t, errs, "a rank's New and all-reduce"))
	}
}
