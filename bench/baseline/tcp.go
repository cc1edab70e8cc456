package baseline

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"time"
)

// SendTCP connects to addr and writes total bytes in chunk-byte writes on one
// kernel TCP stream; it closes the connection when done.
func SendTCP(ctx context.Context, addr string, total int64, chunk int) error {
	if chunk <= 0 {
		return fmt.Errorf("baseline: chunk %d must be positive", chunk)
	}
	var d net.Dialer
	c, err := d.DialContext(ctx, "tcp", addr)
	if err != nil {
		return err
	}
	defer c.Close()
	if dl, ok := ctx.Deadline(); ok {
		c.SetDeadline(dl)
	}
	buf := make([]byte, chunk)
	for sent := int64(0); sent < total; {
		n := int(min(int64(chunk), total-sent))
		w, err := c.Write(buf[:n])
		sent += int64(w)
		if err != nil {
			return err
		}
	}
	return nil
}

// SinkTCP accepts one connection on ln and reads it to the end, returning the
// bytes read and the time from the first byte to the last.
func SinkTCP(ctx context.Context, ln net.Listener) (int64, time.Duration, error) {
	if dl, ok := ctx.Deadline(); ok {
		if tl, ok := ln.(*net.TCPListener); ok {
			tl.SetDeadline(dl)
		}
	}
	c, err := ln.Accept()
	if err != nil {
		return 0, 0, err
	}
	defer c.Close()
	if dl, ok := ctx.Deadline(); ok {
		c.SetDeadline(dl)
	}
	buf := make([]byte, 256<<10)
	var got int64
	var start time.Time
	for {
		n, err := c.Read(buf)
		if n > 0 && start.IsZero() {
			start = time.Now()
		}
		got += int64(n)
		if errors.Is(err, io.EOF) {
			return got, time.Since(start), nil
		}
		if err != nil {
			return got, time.Since(start), err
		}
	}
}

// MeasureTCP streams total bytes over loopback TCP in chunk-byte writes.
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
	start := time.Now()
	serr := SendTCP(ctx, ln.Addr().String(), total, chunk)
	if serr != nil {
		ln.Close() // a sink still waiting in Accept gives up
	}
	r := <-done
	t := Throughput{SentBytes: total, RecvBytes: r.n, Elapsed: time.Since(start)}
	return t, errors.Join(serr, r.err)
}
