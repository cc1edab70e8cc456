package baseline

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strings"
	"sync"
	"testing"
	"time"
)

func testCtx(t testing.TB) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	t.Cleanup(cancel)
	return ctx
}

func TestMeasureUDP(t *testing.T) {
	for _, cfg := range []UDPConfig{{Size: 1200}, {Size: 1500, GSO: true}, {Size: 9000, GSO: true, Batch: 4}, {Size: 65000}} {
		t.Run(fmt.Sprintf("%d/gso=%v", cfg.Size, cfg.GSO), func(t *testing.T) {
			const total = 4 << 20
			r, err := MeasureUDP(testCtx(t), cfg, total)
			if err != nil {
				t.Fatal(err)
			}
			if r.SentBytes < total || r.RecvBytes <= 0 || r.RecvBytes > r.SentBytes || r.Elapsed <= 0 {
				t.Fatalf("implausible result %v", r)
			}
			t.Log(r)
		})
	}
}

func TestUDPConfigErrors(t *testing.T) {
	for _, cfg := range []UDPConfig{{Size: 0}, {Size: 70000}, {Size: 100, Batch: 1000}} {
		if _, err := MeasureUDP(testCtx(t), cfg, 1); err == nil {
			t.Errorf("%+v accepted", cfg)
		}
	}
}

func TestMeasureTCP(t *testing.T) {
	r, err := MeasureTCP(testCtx(t), 8<<20, 64<<10)
	if err != nil {
		t.Fatal(err)
	}
	if r.RecvBytes != 8<<20 || r.LossFraction() != 0 {
		t.Fatalf("TCP lost data: %v", r)
	}
	if _, err := MeasureTCP(testCtx(t), 1, 0); err == nil {
		t.Fatal("chunk 0 accepted")
	}
}

func TestPingPong(t *testing.T) {
	u, err := MeasureUDPPingPong(testCtx(t), 64, 50)
	if err != nil {
		t.Fatal(err)
	}
	tc, err := MeasureTCPPingPong(testCtx(t), 64, 50)
	if err != nil {
		t.Fatal(err)
	}
	for _, l := range []Latency{u, tc} {
		if l.Rounds != 50 || l.Min <= 0 || l.Min > l.P50 || l.P50 > l.P99 || l.P99 > l.Max {
			t.Fatalf("implausible latency %v", l)
		}
	}
	if _, err := MeasureUDPPingPong(testCtx(t), 0, 1); err == nil {
		t.Fatal("size 0 accepted")
	}
}

func TestSummarize(t *testing.T) {
	var d []time.Duration
	for i := 100; i >= 1; i-- {
		d = append(d, time.Duration(i))
	}
	l := summarize(d)
	// Nearest rank: 50 of the 100 values are <= 50, 99 are <= 99.
	want := Latency{Rounds: 100, Mean: 50, P50: 50, P99: 99, Min: 1, Max: 100}
	if l != want {
		t.Fatalf("got %+v, want %+v", l, want)
	}
	if (summarize(nil) != Latency{}) {
		t.Fatal("empty summary not zero")
	}
	if g := (Throughput{RecvBytes: 125e6, SentBytes: 250e6, Elapsed: time.Second}); g.Gbps() != 1 || g.LossFraction() != 0.5 {
		t.Fatalf("%v", g)
	}
}

func TestNearestRank(t *testing.T) {
	for _, c := range []struct{ p, n, want int }{
		{50, 1, 1}, {99, 1, 1}, {50, 2, 1}, {50, 3, 2}, {99, 50, 50},
		{50, 100, 50}, {99, 100, 99}, {7, 100, 7}, {100, 100, 100},
		{99, 101, 100}, {99, 1000, 990}, {50, 5000, 2500}, {99, 5000, 4950},
	} {
		if got := nearestRank(c.p, c.n); got != c.want {
			t.Errorf("nearestRank(%d, %d) = %d, want %d", c.p, c.n, got, c.want)
		}
	}
	l := summarize([]time.Duration{3, 1, 2})
	if l.P50 != 2 || l.P99 != 3 {
		t.Errorf("1..3: %+v", l)
	}
}

// TestMeasureUDPContextDone: a context that ends before the stream is sent
// yields an error, not a partial result that reads as a measurement.
func TestMeasureUDPContextDone(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	const total = 64 << 20
	r, err := MeasureUDP(ctx, UDPConfig{Size: 1200}, total)
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("got %v with error %v, want context.Canceled", r, err)
	}
	if r.SentBytes >= total {
		t.Fatalf("sent everything after the context ended: %v", r)
	}
}

// TestMeasureTCPExcludesSetup: with nothing to send, the stream is only its
// connection set-up and teardown, and none of that is timed.
func TestMeasureTCPExcludesSetup(t *testing.T) {
	r, err := MeasureTCP(testCtx(t), 0, 1)
	if err != nil {
		t.Fatal(err)
	}
	if r.RecvBytes != 0 || r.Elapsed != 0 {
		t.Fatalf("empty stream: %v, want 0 bytes in 0s", r)
	}
}

// tapConn tells a test how far a connection has got, so that it can end a
// context exactly when the code under test is waiting on a stalled peer.
type tapConn struct {
	net.Conn
	want     int64         // bytes to read before readDone closes
	read     int64         // bytes read so far
	readDone chan struct{} // closed once want bytes were read
	wrote    chan struct{} // closed when the first Write returns
	r, w     sync.Once
}

func newTapConn(c net.Conn, want int64) *tapConn {
	return &tapConn{Conn: c, want: want, readDone: make(chan struct{}), wrote: make(chan struct{})}
}

func (c *tapConn) Read(p []byte) (int, error) {
	n, err := c.Conn.Read(p)
	c.read += int64(n)
	if c.read >= c.want {
		c.r.Do(func() { close(c.readDone) })
	}
	return n, err
}

func (c *tapConn) Write(p []byte) (int, error) {
	n, err := c.Conn.Write(p)
	c.w.Do(func() { close(c.wrote) })
	return n, err
}

// tapListener hands out its one accepted connection as a tapConn on
// accepted.
type tapListener struct {
	net.Listener
	want     int64
	accepted chan *tapConn
}

func (l *tapListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	tc := newTapConn(c, l.want)
	l.accepted <- tc
	return tc, nil
}

// listenTap listens on loopback; accepted connections report once they have
// read want bytes.
func listenTap(t *testing.T, want int64) *tapListener {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	return &tapListener{Listener: ln, want: want, accepted: make(chan *tapConn, 1)}
}

// dialStalled connects to ln, writes n bytes and then neither writes nor
// closes until the test ends: a stalled peer.
func dialStalled(t *testing.T, ln net.Listener, n int) net.Conn {
	c, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	if _, err := c.Write(make([]byte, n)); err != nil {
		t.Fatal(err)
	}
	return c
}

// await returns what ch delivers. The functions under test must return once
// their context is done; if one has not within a minute it hangs, which is
// the bug these tests look for. (A watchdog, not synchronisation: passing
// runs never wait for it.)
func await[T any](t *testing.T, ch <-chan T) T {
	t.Helper()
	select {
	case v := <-ch:
		return v
	case <-time.After(time.Minute):
		t.Fatal("still blocked a minute after the context ended")
	}
	var zero T
	return zero
}

// wantCanceled checks that err reports the cancelled context and, when peer
// is not empty, names it.
func wantCanceled(t *testing.T, err error, peer string) {
	t.Helper()
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("error %v, want context.Canceled", err)
	}
	if peer != "" && !strings.Contains(err.Error(), "peer "+peer) {
		t.Fatalf("error %q does not name the peer %s", err, peer)
	}
}

type sinkResult struct {
	n   int64
	d   time.Duration
	err error
}

func TestSinkTCPCancelBeforePeer(t *testing.T) {
	ln := listenTap(t, 1)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan sinkResult, 1)
	go func() {
		n, d, err := SinkTCP(ctx, ln)
		done <- sinkResult{n, d, err}
	}()
	cancel()
	r := await(t, done)
	wantCanceled(t, r.err, "")
	if r.n != 0 || r.d != 0 {
		t.Fatalf("no peer, yet %d bytes in %v", r.n, r.d)
	}
}

func TestSinkTCPCancelStalledPeer(t *testing.T) {
	const sent = 1000
	ln := listenTap(t, sent)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan sinkResult, 1)
	go func() {
		n, d, err := SinkTCP(ctx, ln)
		done <- sinkResult{n, d, err}
	}()
	peer := dialStalled(t, ln, sent)
	<-(<-ln.accepted).readDone
	cancel()
	r := await(t, done)
	wantCanceled(t, r.err, peer.LocalAddr().String())
	if r.n != sent {
		t.Fatalf("got %d bytes, want %d", r.n, sent)
	}
}

func TestSendTCPCancelStalledSink(t *testing.T) {
	// The sink accepts and never reads: 1 TiB fills any socket buffers,
	// so the sender must block, and only the context frees it.
	ln := listenTap(t, 1)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- SendTCP(ctx, ln.Addr().String(), 1<<40, 1<<20) }()
	c, err := ln.Accept()
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	cancel()
	wantCanceled(t, await(t, done), ln.Addr().String())
}

func TestEchoTCPCancelStalledPeer(t *testing.T) {
	// The peer sends half a message and stalls.
	ln := listenTap(t, 32)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- EchoTCP(ctx, ln, 64) }()
	peer := dialStalled(t, ln, 32)
	<-(<-ln.accepted).readDone
	cancel()
	wantCanceled(t, await(t, done), peer.LocalAddr().String())
}

func TestEchoTCPCancelBeforePeer(t *testing.T) {
	ln := listenTap(t, 1)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	wantCanceled(t, EchoTCP(ctx, ln, 64), "")
}

func TestPingPongTCPCancelSilentEcho(t *testing.T) {
	// The echo server accepts and never answers; the per-round timeout is
	// far off, so only the context ends the wait.
	ln := listenTap(t, 1)
	c, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	srv, err := ln.Listener.Accept()
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	tc := newTapConn(c, 1)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		_, err := PingPongTCP(ctx, tc, 64, 10, time.Hour)
		done <- err
	}()
	<-tc.wrote
	cancel()
	wantCanceled(t, await(t, done), ln.Addr().String())
}

func TestPingPongUDPCancelSilentEcho(t *testing.T) {
	lo := &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1)}
	silent, err := net.ListenUDP("udp4", lo)
	if err != nil {
		t.Fatal(err)
	}
	defer silent.Close()
	c, err := net.ListenUDP("udp4", lo)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	dst := silent.LocalAddr().(*net.UDPAddr)
	_, err = PingPongUDP(ctx, c, dst, 64, 10, time.Hour)
	wantCanceled(t, err, dst.String())
}

// TestBenchPingPongRounds: the ping-pong benchmarks time at least
// minPingPongRounds round trips however small b.N is (-benchtime 10x), so
// that P99 is not simply the slowest of a handful.
func TestBenchPingPongRounds(t *testing.T) {
	var mu sync.Mutex
	var asked []int
	fake := func(_ context.Context, size, rounds int) (Latency, error) {
		mu.Lock()
		asked = append(asked, rounds)
		mu.Unlock()
		return Latency{Rounds: rounds}, nil
	}
	testing.Benchmark(func(b *testing.B) { benchPingPong(b, fake) })
	mu.Lock()
	defer mu.Unlock()
	if len(asked) == 0 {
		t.Fatal("benchPingPong never measured")
	}
	for _, r := range asked {
		if r < minPingPongRounds || minPingPongRounds < 1000 {
			t.Fatalf("rounds asked for: %v, want each at least %d (and that at least 1000)", asked, minPingPongRounds)
		}
	}
}

// benchBytes is the payload moved per benchmark iteration.
const benchBytes = 16 << 20

func benchUDP(b *testing.B, cfg UDPConfig) {
	var sent, recv int64
	var elapsed time.Duration
	for i := 0; i < b.N; i++ {
		r, err := MeasureUDP(context.Background(), cfg, benchBytes)
		if err != nil {
			b.Fatal(err)
		}
		sent += r.SentBytes
		recv += r.RecvBytes
		elapsed += r.Elapsed
	}
	t := Throughput{SentBytes: sent, RecvBytes: recv, Elapsed: elapsed}
	b.ReportMetric(t.Gbps(), "Gb/s")
	b.ReportMetric(100*t.LossFraction(), "loss%")
}

func BenchmarkUDPRaw(b *testing.B) {
	for _, size := range []int{1472, 8972, 64000} {
		b.Run(fmt.Sprint(size), func(b *testing.B) { benchUDP(b, UDPConfig{Size: size}) })
	}
}

func BenchmarkUDPGSO(b *testing.B) {
	for _, size := range []int{1472, 8972} {
		b.Run(fmt.Sprint(size), func(b *testing.B) { benchUDP(b, UDPConfig{Size: size, GSO: true}) })
	}
}

func BenchmarkTCP(b *testing.B) {
	var recv int64
	var elapsed time.Duration
	for i := 0; i < b.N; i++ {
		r, err := MeasureTCP(context.Background(), 4*benchBytes, 256<<10)
		if err != nil {
			b.Fatal(err)
		}
		recv += r.RecvBytes
		elapsed += r.Elapsed
	}
	b.ReportMetric(Throughput{RecvBytes: recv, Elapsed: elapsed}.Gbps(), "Gb/s")
}

// minPingPongRounds is the fewest round trips a ping-pong benchmark times,
// whatever b.N is, so that P99 rests on at least 20 rounds at or above it;
// with b.N rounds, `-benchtime 10x` made P99 the slowest of 10.
const minPingPongRounds = 2000

// benchPingPong times max(b.N, minPingPongRounds) round trips of 64 bytes
// with f: one op is one round trip, so ns/op is the mean round trip (in ns,
// reported over the framework's own figure, which would divide by b.N
// although more rounds ran). It also reports P50 and P99 in µs and the
// number of rounds behind them.
func benchPingPong(b *testing.B, f func(context.Context, int, int) (Latency, error)) {
	l, err := f(context.Background(), 64, max(b.N, minPingPongRounds))
	if err != nil {
		b.Fatal(err)
	}
	b.ReportMetric(float64(l.Mean.Nanoseconds()), "ns/op")
	b.ReportMetric(float64(l.P50.Nanoseconds())/1e3, "p50-µs")
	b.ReportMetric(float64(l.P99.Nanoseconds())/1e3, "p99-µs")
	b.ReportMetric(float64(l.Rounds), "rounds")
}

func BenchmarkUDPPingPong(b *testing.B) { benchPingPong(b, MeasureUDPPingPong) }

func BenchmarkTCPPingPong(b *testing.B) { benchPingPong(b, MeasureTCPPingPong) }
