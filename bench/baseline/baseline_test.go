package baseline

import (
	"context"
	"fmt"
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
	want := Latency{Rounds: 100, Mean: 50, P50: 51, P99: 100, Min: 1, Max: 100}
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

func benchPingPong(b *testing.B, f func(context.Context, int, int) (Latency, error)) {
	l, err := f(context.Background(), 64, max(b.N, 1))
	if err != nil {
		b.Fatal(err)
	}
	b.ReportMetric(float64(l.P50.Nanoseconds())/1e3, "p50-µs")
	b.ReportMetric(float64(l.P99.Nanoseconds())/1e3, "p99-µs")
}

func BenchmarkUDPPingPong(b *testing.B) { benchPingPong(b, MeasureUDPPingPong) }

func BenchmarkTCPPingPong(b *testing.B) { benchPingPong(b, MeasureTCPPingPong) }
