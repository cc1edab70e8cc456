package baseline

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"time"
)

// peerError wraps err, met while talking to the peer at addr, with the
// peer's address, and with the context's cause when ctx is done. A done
// context wakes a blocked call by closing its socket, so without the cause the
// error would only say "use of closed network connection". Both err and the
// cause stay visible to errors.Is.
func peerError(ctx context.Context, addr, what string, err error) error {
	if cause := context.Cause(ctx); cause != nil {
		return fmt.Errorf("baseline: peer %s: %s: %w (%w)", addr, what, cause, err)
	}
	return fmt.Errorf("baseline: peer %s: %s: %w", addr, what, err)
}

// acceptContext accepts one connection on ln, closing ln when ctx is done
// first: a peer that never connects then ends in an error, not a hang. Once a
// connection is accepted, ln stays open.
func acceptContext(ctx context.Context, ln net.Listener) (net.Conn, error) {
	stop := context.AfterFunc(ctx, func() { ln.Close() })
	c, err := ln.Accept()
	stop()
	if err != nil {
		if cause := context.Cause(ctx); cause != nil {
			return nil, fmt.Errorf("baseline: no peer connected to %v: %w (%w)", ln.Addr(), cause, err)
		}
		return nil, fmt.Errorf("baseline: accepting on %v: %w", ln.Addr(), err)
	}
	return c, nil
}

// SendTCP connects to addr and writes total bytes in chunk-byte writes on one
// kernel TCP stream; it closes the connection when done. When ctx is done
// first it closes the connection, which ends a write blocked on a stalled
// peer, and returns an error naming addr and ctx's cause.
func SendTCP(ctx context.Context, addr string, total int64, chunk int) error {
	if chunk <= 0 {
		return fmt.Errorf("baseline: chunk %d must be positive", chunk)
	}
	var d net.Dialer
	c, err := d.DialContext(ctx, "tcp", addr)
	if err != nil {
		return peerError(ctx, addr, "dial", err)
	}
	defer c.Close()
	stop := context.AfterFunc(ctx, func() { c.Close() })
	defer stop()
	buf := make([]byte, chunk)
	for sent := int64(0); sent < total; {
		n := int(min(int64(chunk), total-sent))
		w, err := c.Write(buf[:n])
		sent += int64(w)
		if err != nil {
			return peerError(ctx, addr, fmt.Sprintf("write after %d of %d bytes", sent, total), err)
		}
	}
	return nil
}

// SinkTCP accepts one connection on ln and reads it to the end, returning the
// bytes read and the time from the first read that returned data to the last
// one (zero when the peer sent nothing): connection set-up is not part of it.
// Bytes the kernel had already queued when the first read returned are
// counted but not timed, which overstates the rate by their share of the
// stream: normally that one read (at most 256 KiB) of the tens of MiB the
// benchmarks stream.
//
// When ctx is done first, SinkTCP closes ln if no peer has connected yet, or
// else the connection, and returns what it got with an error that names the
// peer and ctx's cause.
func SinkTCP(ctx context.Context, ln net.Listener) (int64, time.Duration, error) {
	c, err := acceptContext(ctx, ln)
	if err != nil {
		return 0, 0, err
	}
	defer c.Close()
	stop := context.AfterFunc(ctx, func() { c.Close() })
	defer stop()
	peer := c.RemoteAddr().String()
	buf := make([]byte, 256<<10)
	var got int64
	var first, last time.Time
	for {
		n, err := c.Read(buf)
		if n > 0 {
			last = time.Now()
			if first.IsZero() {
				first = last
			}
			got += int64(n)
		}
		if errors.Is(err, io.EOF) {
			return got, last.Sub(first), nil
		}
		if err != nil {
			return got, last.Sub(first), peerError(ctx, peer, fmt.Sprintf("read after %d bytes", got), err)
		}
	}
}

// MeasureTCP streams total bytes over loopback TCP in chunk-byte writes.
// Elapsed is the sink's, from the first byte read to the last (see SinkTCP),
// the same definition as every other TCP baseline that uses SinkTCP.
func MeasureTCP(ctx context.Context, total int64, chunk int) (Throughput, error) {
	if chunk <= 0 {
		return Throughput{}, fmt.Errorf("baseline: chunk %d must be positive", chunk)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return Throughput{}, err
	}
	defer ln.Close()
	type res struct {
		n   int64
		d   time.Duration
		err error
	}
	done := make(chan res, 1)
	go func() {
		n, d, err := SinkTCP(ctx, ln)
		done <- res{n, d, err}
	}()
	serr := SendTCP(ctx, ln.Addr().String(), total, chunk)
	if serr != nil {
		ln.Close() // a sink still waiting in Accept gives up
	}
	r := <-done
	t := Throughput{SentBytes: total, RecvBytes: r.n, Elapsed: r.d}
	return t, errors.Join(serr, r.err)
}
