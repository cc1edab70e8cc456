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
		_, err := f.connect(ctx, 0, [][]byte{f.blob(), []byte("127.0.0.1:1")})
		done <- err
	}()
	select {
	case err := <-done:
		require.ErrorIs(t, err, context.DeadlineExceeded)
		require.ErrorContains(t, err, "greeting from")
	case <-time.After(time.Minute):
		t.Fatal("the setup still waits for the silent connection's greeting after its deadline")
	}
}
