package baseline

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"time"
)

// EchoUDP answers every datagram on c to its sender until ctx is done or c is
// closed.
func EchoUDP(ctx context.Context, c *net.UDPConn) error {
	buf := make([]byte, 65536)
	for ctx.Err() == nil {
		c.SetReadDeadline(time.Now().Add(100 * time.Millisecond))
		n, from, err := c.ReadFromUDPAddrPort(buf)
		if err != nil {
			var ne net.Error
			if errors.As(err, &ne) && ne.Timeout() {
				continue
			}
			if errors.Is(err, net.ErrClosed) {
				return nil
			}
			return err
		}
		if _, err := c.WriteToUDPAddrPort(buf[:n], from); err != nil {
			return peerError(ctx, from.String(), "echo", err)
		}
	}
	return nil
}

// PingPongUDP sends rounds datagrams of size bytes from c to the echo server
// at dst, one at a time, and measures each round trip. A round without answer
// within timeout is an error (ping-pong runs on loss-free paths). When ctx is
// done first, PingPongUDP closes c to end the wait and returns the rounds so
// far with an error naming dst and ctx's cause.
func PingPongUDP(ctx context.Context, c *net.UDPConn, dst *net.UDPAddr, size, rounds int, timeout time.Duration) (Latency, error) {
	if size < 1 || rounds < 1 {
		return Latency{}, fmt.Errorf("baseline: size %d and rounds %d must be positive", size, rounds)
	}
	stop := context.AfterFunc(ctx, func() { c.Close() })
	defer stop()
	peer := dst.String()
	out := make([]byte, size)
	in := make([]byte, 65536)
	rtts := make([]time.Duration, 0, rounds)
	for r := 0; r < rounds; r++ {
		start := time.Now()
		if _, err := c.WriteToUDP(out, dst); err != nil {
			return summarize(rtts), peerError(ctx, peer, fmt.Sprintf("round %d: send", r), err)
		}
		c.SetReadDeadline(start.Add(timeout))
		if _, _, err := c.ReadFromUDP(in); err != nil {
			return summarize(rtts), peerError(ctx, peer, fmt.Sprintf("round %d: no echo within %v", r, timeout), err)
		}
		rtts = append(rtts, time.Since(start))
	}
	return summarize(rtts), nil
}

// MeasureUDPPingPong runs an echo server and PingPongUDP on loopback.
func MeasureUDPPingPong(ctx context.Context, size, rounds int) (Latency, error) {
	srv, err := net.ListenUDP("udp4", &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1)})
	if err != nil {
		return Latency{}, err
	}
	cli, err := net.ListenUDP("udp4", &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1)})
	if err != nil {
		srv.Close()
		return Latency{}, err
	}
	defer cli.Close()
	sctx, stop := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- EchoUDP(sctx, srv) }()
	lat, err := PingPongUDP(ctx, cli, srv.LocalAddr().(*net.UDPAddr), size, rounds, time.Second)
	stop()
	srv.Close()
	return lat, errors.Join(err, <-done)
}

// EchoTCP accepts one connection on ln and echoes every message of size
// bytes back until the peer closes it, which ends it with a nil error. When
// ctx is done first it closes ln if no peer has connected yet, or else the
// connection, and returns an error naming the peer and ctx's cause: a peer
// that stalls mid-message cannot hold it forever.
func EchoTCP(ctx context.Context, ln net.Listener, size int) error {
	if size < 1 {
		return fmt.Errorf("baseline: size %d must be positive", size)
	}
	c, err := acceptContext(ctx, ln)
	if err != nil {
		return err
	}
	defer c.Close()
	stop := context.AfterFunc(ctx, func() { c.Close() })
	defer stop()
	peer := c.RemoteAddr().String()
	buf := make([]byte, size)
	for m := 0; ; m++ {
		if _, err := io.ReadFull(c, buf); err != nil {
			// io.EOF (not io.ErrUnexpectedEOF) means the peer closed
			// between messages.
			if errors.Is(err, io.EOF) {
				return nil
			}
			return peerError(ctx, peer, fmt.Sprintf("message %d: read", m), err)
		}
		if _, err := c.Write(buf); err != nil {
			return peerError(ctx, peer, fmt.Sprintf("message %d: echo", m), err)
		}
	}
}

// PingPongTCP writes rounds messages of size bytes on c (with Nagle off) and
// waits for each echo; every round has timeout. When ctx is done first,
// PingPongTCP closes c to end the wait and returns the rounds so far with an
// error naming the peer and ctx's cause.
func PingPongTCP(ctx context.Context, c net.Conn, size, rounds int, timeout time.Duration) (Latency, error) {
	if size < 1 || rounds < 1 {
		return Latency{}, fmt.Errorf("baseline: size %d and rounds %d must be positive", size, rounds)
	}
	stop := context.AfterFunc(ctx, func() { c.Close() })
	defer stop()
	peer := c.RemoteAddr().String()
	if tc, ok := c.(*net.TCPConn); ok {
		tc.SetNoDelay(true)
	}
	buf := make([]byte, size)
	rtts := make([]time.Duration, 0, rounds)
	for r := 0; r < rounds; r++ {
		start := time.Now()
		c.SetDeadline(start.Add(timeout))
		if _, err := c.Write(buf); err != nil {
			return summarize(rtts), peerError(ctx, peer, fmt.Sprintf("round %d: send", r), err)
		}
		if _, err := io.ReadFull(c, buf); err != nil {
			return summarize(rtts), peerError(ctx, peer, fmt.Sprintf("round %d: no echo within %v", r, timeout), err)
		}
		rtts = append(rtts, time.Since(start))
	}
	return summarize(rtts), nil
}

// MeasureTCPPingPong runs an echo server and PingPongTCP on loopback.
func MeasureTCPPingPong(ctx context.Context, size, rounds int) (Latency, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return Latency{}, err
	}
	defer ln.Close()
	ectx, stop := context.WithCancel(ctx)
	defer stop()
	done := make(chan error, 1)
	go func() { done <- EchoTCP(ectx, ln, size) }()
	var d net.Dialer
	c, err := d.DialContext(ctx, "tcp", ln.Addr().String())
	if err != nil {
		stop() // the echo server, still waiting for us, gives up
		<-done
		return Latency{}, peerError(ctx, ln.Addr().String(), "dial", err)
	}
	lat, err := PingPongTCP(ctx, c, size, rounds, time.Second)
	c.Close() // the echo server reads EOF and returns
	return lat, errors.Join(err, <-done)
}
