package baseline

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"sync/atomic"
	"time"

	"github.com/metaroce/metaroce/transport/udp/sockio"
)

// UDPConfig shapes the raw UDP stream.
type UDPConfig struct {
	// Size is the datagram payload in bytes (the segment size with GSO).
	Size int
	// GSO packs up to 64 KB of Size-byte segments into each send (and lets
	// the sink coalesce with GRO); without it each datagram is one message.
	GSO bool
	// Batch is the number of messages per WriteBatch (default 16).
	Batch int
}

func (c UDPConfig) check() error {
	if c.Size < 1 || c.Size > 65507 {
		return fmt.Errorf("baseline: UDP size %d out of range 1..65507", c.Size)
	}
	if c.Batch < 0 || c.Batch > sockio.MaxBatch {
		return fmt.Errorf("baseline: batch %d out of range 0..%d", c.Batch, sockio.MaxBatch)
	}
	return nil
}

// UDPSink receives and counts a raw UDP stream.
type UDPSink struct {
	conn   *sockio.Conn
	poller *sockio.Poller
	bytes  atomic.Int64
	last   atomic.Int64 // UnixNano of the last receive
}

// NewUDPSink opens a receiving socket on local; gro enables receive
// coalescing where the kernel offers it.
func NewUDPSink(local netip.AddrPort, gro bool) (*UDPSink, error) {
	c, err := sockio.Open(sockio.Config{Local: local, DisableGRO: !gro})
	if err != nil {
		return nil, err
	}
	p, err := sockio.NewPoller()
	if err != nil {
		c.Close()
		return nil, err
	}
	if err := p.Add(c.Fd(), 0); err != nil {
		p.Close()
		c.Close()
		return nil, err
	}
	return &UDPSink{conn: c, poller: p}, nil
}

// Addr is the sink's address.
func (s *UDPSink) Addr() netip.AddrPort { return s.conn.LocalAddr() }

// Bytes is the payload received so far.
func (s *UDPSink) Bytes() int64 { return s.bytes.Load() }

// LastReceive is when the latest datagram arrived (zero before the first).
func (s *UDPSink) LastReceive() time.Time {
	n := s.last.Load()
	if n == 0 {
		return time.Time{}
	}
	return time.Unix(0, n)
}

// Run receives until ctx is done, then returns nil.
func (s *UDPSink) Run(ctx context.Context) error {
	msgs := make([]sockio.Msg, 32)
	for i := range msgs {
		msgs[i].Buf = make([]byte, sockio.MaxDatagram)
	}
	ready := make([]int32, 1)
	for ctx.Err() == nil {
		if _, _, err := s.poller.Wait(10*time.Millisecond, ready); err != nil {
			return err
		}
		for {
			n, err := s.conn.ReadBatch(msgs)
			if errors.Is(err, sockio.ErrWouldBlock) {
				break
			}
			if err != nil {
				return err
			}
			var got int64
			for i := range msgs[:n] {
				got += int64(msgs[i].N)
			}
			s.bytes.Add(got)
			s.last.Store(time.Now().UnixNano())
		}
	}
	return nil
}

// Close releases the socket.
func (s *UDPSink) Close() error { return errors.Join(s.poller.Close(), s.conn.Close()) }

// BlastUDP sends total payload bytes (rounded up to whole datagrams) from a
// socket on local to dst as fast as the socket takes them, and returns the
// bytes sent. When ctx is done before everything is sent it stops and
// returns the bytes sent so far with an error naming dst and ctx's cause.
func BlastUDP(ctx context.Context, local, dst netip.AddrPort, cfg UDPConfig, total int64) (int64, error) {
	if err := cfg.check(); err != nil {
		return 0, err
	}
	batch := cfg.Batch
	if batch == 0 {
		batch = 16
	}
	c, err := sockio.Open(sockio.Config{Local: local, DisableGSO: !cfg.GSO})
	if err != nil {
		return 0, err
	}
	defer c.Close()
	per := cfg.Size
	seg := 0
	if cfg.GSO {
		n := min(65507/cfg.Size, sockio.MaxSegments)
		per, seg = n*cfg.Size, cfg.Size
	}
	buf := make([]byte, per)
	msgs := make([]sockio.Msg, batch)
	for i := range msgs {
		msgs[i] = sockio.Msg{Buf: buf, N: per, Seg: seg, Addr: dst}
	}
	var sent int64
	for sent < total && ctx.Err() == nil {
		k := int(min(int64(batch), (total-sent+int64(per)-1)/int64(per)))
		n, err := c.WriteBatch(msgs[:k])
		sent += int64(n) * int64(per)
		if errors.Is(err, sockio.ErrWouldBlock) {
			if _, err := c.WaitWritable(100); err != nil {
				return sent, err
			}
			continue
		}
		if err != nil {
			return sent, err
		}
	}
	if sent < total {
		return sent, fmt.Errorf("baseline: peer %v: sent %d of %d bytes: %w", dst, sent, total, context.Cause(ctx))
	}
	return sent, nil
}

// MeasureUDP runs a sink and a blaster on loopback (127.0.0.1) and returns the
// throughput of total payload bytes. After the blaster finishes it waits for
// the sink to go quiet (no datagram for 50 ms) or to have everything. When
// ctx is done before that, the figures are partial, and MeasureUDP returns
// them with an error.
func MeasureUDP(ctx context.Context, cfg UDPConfig, total int64) (Throughput, error) {
	lo := netip.MustParseAddrPort("127.0.0.1:0")
	sink, err := NewUDPSink(lo, cfg.GSO)
	if err != nil {
		return Throughput{}, err
	}
	defer sink.Close()
	sctx, stop := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- sink.Run(sctx) }()
	start := time.Now()
	sent, err := BlastUDP(ctx, lo, sink.Addr(), cfg, total)
	tick := time.NewTicker(time.Millisecond)
	defer tick.Stop()
	for err == nil && sink.Bytes() < sent {
		select {
		case <-tick.C: // poll the sink's counters
		case <-ctx.Done():
			err = fmt.Errorf("baseline: sink %v: waiting for the last of %d bytes, got %d: %w",
				sink.Addr(), sent, sink.Bytes(), context.Cause(ctx))
			continue
		}
		last := sink.LastReceive()
		if !last.IsZero() && time.Since(last) > 50*time.Millisecond {
			break
		}
		if last.IsZero() && time.Since(start) > time.Second {
			break
		}
	}
	stop()
	if rerr := <-done; err == nil {
		err = rerr
	}
	t := Throughput{SentBytes: sent, RecvBytes: sink.Bytes()}
	if last := sink.LastReceive(); !last.IsZero() {
		t.Elapsed = last.Sub(start)
	}
	return t, err
}
