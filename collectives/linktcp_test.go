package collectives

import (
	"context"
	"encoding/binary"
	"errors"
	"net"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// TestTCPPostAfterShutdown: an op posted on a stream that has shut down
// fails at once. Before, about half of them went into a queue that the
// stream's goroutines had already drained and left, and the collective
// waited for them until it gave up.
func TestTCPPostAfterShutdown(t *testing.T) {
	a, b := net.Pipe()
	defer b.Close()
	s := newTCPStream(a, 1)
	s.shutdown()
	for i := range 200 {
		op := s.post(i%2 == 0, 0, make([]byte, 8), nil)
		done, err := op.Test()
		require.True(t, done, "op %d posted after the shutdown is still pending", i)
		require.Error(t, err)
	}
}

// TestTCPStreamErrors: a receive that fails on the stream says why. A
// message longer than the posted receive, or of another call, is the
// ranks' disagreement (ErrMismatch), not a broken connection, and an op that a local shutdown
// ended says the connection was closed here rather than blaming the peer
// with "use of closed network connection".
func TestTCPStreamErrors(t *testing.T) {
	cases := []struct {
		name     string
		act      func(s *tcpStream, peer net.Conn)
		mismatch bool
		want     string
	}{
		{"longer message", func(_ *tcpStream, peer net.Conn) {
			var hdr [tcpHeaderLen]byte
			binary.BigEndian.PutUint64(hdr[:], 16)
			peer.Write(hdr[:]) // net.Pipe: returns once the reader took it
		}, true, "rank 1 sent 16 bytes for a 8-byte receive"},
		{"another call's message", func(_ *tcpStream, peer net.Conn) {
			var hdr [tcpHeaderLen]byte
			binary.BigEndian.PutUint64(hdr[:], 8)
			binary.BigEndian.PutUint32(hdr[8:], 0xbeef)
			peer.Write(hdr[:])
		}, true, "rank 1's message belongs to a call other than this rank's (call tag 0x0000beef, here 0x00000000)"},
		{"local shutdown", func(s *tcpStream, _ net.Conn) { s.shutdown() }, false, "closed locally"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			a, b := net.Pipe()
			defer b.Close()
			s := newTCPStream(a, 1)
			defer s.shutdown()
			done := make(chan struct{})
			op := s.post(false, 0, make([]byte, 8), func() { close(done) })
			c.act(s, b)
			<-done
			_, err := op.Test()
			require.Error(t, err)
			require.Equal(t, c.mismatch, errors.Is(err, ErrMismatch), "%v", err)
			require.ErrorContains(t, err, c.want)
		})
	}
}

// TestTCPSilentConnectionEndsWithSetup: a connection to the TCP baseline's
// listener that never sends its greeting holds the setup no longer than
// the setup's own deadline. Before, its read waited Config.Timeout from
// its arrival, so New could take up to twice its timeout.
func TestTCPSilentConnectionEndsWithSetup(t *testing.T) {
	f, err := newTCPFactory(Config{Timeout: time.Hour, Channels: 1})
	require.NoError(t, err)
	stray, err := net.Dial("tcp", string(f.blob()))
	require.NoError(t, err)
	defer stray.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancel()
	done := make(chan error, 1)
	go func() {
		_, err := f.connect(ctx, 0, [][]byte{f.blob(), []byte("127.0.0.1:1")}, setupDeadline{})
		done <- err
	}()
	select {
	case err := <-done:
		require.ErrorIs(t, err, context.DeadlineExceeded)
		require.ErrorContains(t, err, "still missing: [1]")
	case <-time.After(time.Minute):
		t.Fatal("the setup still waits for the silent connection's greeting after its deadline")
	}
}

// TestTCPStrayConnectionsIgnored: connections to the TCP baseline's
// listener that send no greeting of a stream the rank waits for (bytes of
// another protocol, a channel the job does not have, nothing at all) are
// closed, and the setup takes the ranks' own connections that come after
// them. Before, the greetings were read one after another and a stray
// failed New: at once with its bytes, at the setup deadline with none.
func TestTCPStrayConnectionsIgnored(t *testing.T) {
	const chans = 2
	cfg := Config{Timeout: time.Hour, Channels: chans, Logf: t.Logf}
	f0, err := newTCPFactory(cfg)
	require.NoError(t, err)
	defer f0.abort()
	f1, err := newTCPFactory(cfg)
	require.NoError(t, err)
	defer f1.abort()
	for _, junk := range [][]byte{[]byte("GET / HTTP/1.1\r\n\r\n"), {0, 0, 0, 1, 0, 0, 0, 9}, nil} {
		stray, err := net.Dial("tcp", string(f0.blob()))
		require.NoError(t, err)
		defer stray.Close()
		_, err = stray.Write(junk)
		require.NoError(t, err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	blobs := [][]byte{f0.blob(), f1.blob()}
	var links [2]link
	errs := make(chan error, 2)
	for r, f := range []*tcpFactory{f0, f1} {
		go func() {
			var err error
			links[r], err = f.connect(ctx, r, blobs, setupDeadline{})
			errs <- err
		}()
	}
	for range 2 {
		require.NoError(t, recv(ctx, t, errs, "the setup"))
	}
	defer links[0].close()
	defer links[1].close()
	// A message on each channel from rank 1 reaches rank 0: the streams
	// are the ranks' own connections.
	for ch := range chans {
		done := make(chan struct{}, 2)
		got := make([]byte, 5)
		rp, err := links[0].recv(1, ch, 7, got, func() { done <- struct{}{} })
		require.NoError(t, err)
		sp, err := links[1].send(0, ch, 7, []byte("hello"), func() { done <- struct{}{} })
		require.NoError(t, err)
		for range 2 {
			recv(ctx, t, done, "the transfer")
		}
		for _, p := range []pending{rp, sp} {
			ok, err := p.Test()
			require.True(t, ok)
			require.NoError(t, err)
		}
		require.Equal(t, "hello", string(got))
	}
}

// TestConnectDeadlineNamed: when the setup deadline ends the connections
// that follow the rendezvous, the error names that deadline and its value
// as the rendezvous' errors do (setupDeadline), on the side that waits for
// the ranks above it and on the side that dials the ranks below it, over
// both transports. Before, they ended with "context deadline exceeded"
// alone, or, for a MetaRoCE dial, "the setup deadline (Config.Timeout, 45s,
// or the caller's own)", which did not say which.
func TestConnectDeadlineNamed(t *testing.T) {
	const d = 150 * time.Millisecond
	setup := setupDeadline{d: d}
	caller := setupDeadline{d: d, caller: true}
	for _, tr := range []string{TransportTCP, TransportMetaRoCE} {
		cfg, err := Config{Transport: tr, Timeout: 45 * time.Second, Channels: 1}.withDefaults()
		require.NoError(t, err)
		open := func() linkFactory {
			f, err := newLinkFactory(cfg)
			require.NoError(t, err)
			t.Cleanup(f.abort)
			return f
		}
		t.Run(tr+"/waiting for the ranks above", func(t *testing.T) {
			f, peer := open(), open()
			ctx, cancel := context.WithTimeout(context.Background(), d)
			defer cancel()
			_, err := f.connect(ctx, 0, [][]byte{f.blob(), peer.blob()}, setup)
			require.ErrorIs(t, err, context.DeadlineExceeded)
			require.ErrorContains(t, err, "rank 0 waiting for ranks above it to connect (still missing: [1]) before the setup deadline of 150ms (Config.Timeout) ran out: ")
		})
		t.Run(tr+"/dialing the ranks below", func(t *testing.T) {
			// Over MetaRoCE a rank below that never answers the handshake;
			// a TCP dial to a listening rank completes in the kernel, so
			// there the deadline has passed before the dial.
			f := open()
			below := silentPeer(t)
			ctx, cancel := context.WithTimeout(context.Background(), d)
			defer cancel()
			if tr == TransportTCP {
				below = open().blob()
				ctx, cancel = context.WithDeadline(context.Background(), time.Unix(1, 0))
				defer cancel()
			}
			_, err := f.connect(ctx, 1, [][]byte{below, f.blob()}, caller)
			require.ErrorIs(t, err, context.DeadlineExceeded)
			require.ErrorContains(t, err, "rank 1 connecting to rank 0 at ")
			require.ErrorContains(t, err, " before the caller's deadline (150ms after New began) ran out")
			require.NotContains(t, err.Error(), "45s")
		})
	}

	// Through New, which passes its setup deadline on: rank 1 holds back
	// from connecting until rank 0 has given up waiting for it.
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	defer ln.Close()
	var rootErr error
	rootGone := make(chan struct{})
	leafDone := make(chan struct{})
	cfg := Config{Transport: TransportTCP, Timeout: 3 * time.Second}
	for r := range 2 {
		go func() {
			b := Bootstrap{Rank: r, NRanks: 2, Root: ln.Addr().String(), Source: "test"}
			if r == 0 {
				b.listener = ln
			} else {
				b.connecting = func([][]byte) { <-rootGone }
			}
			c, err := New(context.Background(), b, cfg)
			if c != nil {
				c.Close()
			}
			if r == 0 {
				rootErr = err
				close(rootGone)
			} else {
				close(leafDone)
			}
		}()
	}
	<-rootGone
	<-leafDone
	err = rootErr
	require.ErrorIs(t, err, context.DeadlineExceeded)
	require.ErrorContains(t, err, "rank 0 waiting for ranks above it to connect (still missing: [1]) before the setup deadline of 3s (Config.Timeout) ran out: ")
}
