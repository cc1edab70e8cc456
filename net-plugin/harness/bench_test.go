package harness

import (
	"context"
	"net/netip"
	"regexp"
	"strconv"
	"testing"
	"time"

	"github.com/metaroce/metaroce/transport/udp"
)

// Parameters of the bench scenario in harness.c, mirrored by the Go API
// transfer it is compared with.
const (
	benchChunk    = 512 << 10 // bytes per message
	benchOut      = 8         // messages outstanding
	benchDuration = 2 * time.Second
	latIters      = 2000
)

// pluginBench runs the two-process bench scenario with backend be and
// returns goodput (GB/s) and the small-message isend→test time (µs).
func pluginBench(b *testing.B, lib, be string) (gbps, latUs float64) {
	out, errOut, err := run(b, []string{"METAROCE_BACKEND=" + be}, lib, "bench")
	if err != nil {
		b.Fatalf("%s: %v\n%s\n%s", be, err, out, errOut)
	}
	m := regexp.MustCompile(`goodput_GBps=([\d.]+)`).FindStringSubmatch(out)
	l := regexp.MustCompile(`isend_test_latency_us=([\d.]+)`).FindStringSubmatch(out)
	if m == nil || l == nil {
		b.Fatalf("%s: no figures in\n%s\n%s", be, out, errOut)
	}
	gbps, _ = strconv.ParseFloat(m[1], 64)
	latUs, _ = strconv.ParseFloat(l[1], 64)
	return gbps, latUs
}

// goAPIBench moves the bench scenario's traffic through transport/udp
// directly, between two endpoints of this process: benchOut sends of
// benchChunk bytes outstanding for benchDuration, then latIters 8-byte sends
// one at a time. It returns goodput (GB/s) and the send→completion time (µs).
func goAPIBench(b *testing.B) (gbps, latUs float64) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	lo := []netip.Addr{netip.MustParseAddr("127.0.0.1")}
	ra, err := udp.Listen(udp.Config{Addrs: lo})
	if err != nil {
		b.Fatal(err)
	}
	defer ra.Close()
	sa, err := udp.Listen(udp.Config{Addrs: lo})
	if err != nil {
		b.Fatal(err)
	}
	defer sa.Close()
	sc, err := sa.Dial(ctx, ra.Addrs())
	if err != nil {
		b.Fatal(err)
	}
	rc, err := ra.Accept(ctx)
	if err != nil {
		b.Fatal(err)
	}
	// The receiver keeps benchOut receives posted until a 0-byte message.
	type result struct {
		bytes int64
		dt    time.Duration
		err   error
	}
	res := make(chan result, 1)
	go func() {
		bufs := make([][]byte, benchOut)
		reqs := make([]*udp.Request, benchOut)
		for i := range bufs {
			bufs[i] = make([]byte, benchChunk)
		}
		post := func(i int) error {
			var err error
			reqs[i], err = rc.Recv(1, bufs[i:i+1], []uint32{0})
			return err
		}
		var r result
		var t0 time.Time
		for i := range reqs {
			if r.err = post(i); r.err != nil {
				res <- r
				return
			}
		}
		for i := 0; ; i = (i + 1) % benchOut {
			if r.err = reqs[i].Wait(ctx); r.err != nil {
				res <- r
				return
			}
			switch n := reqs[i].Sizes()[0]; n {
			case 0:
				res <- r
				return
			case 1:
				r.dt = time.Since(t0)
			case benchChunk:
				if r.bytes == 0 {
					t0 = time.Now()
				}
				r.bytes += int64(n)
			}
			if r.err = post(i); r.err != nil {
				res <- r
				return
			}
		}
	}()
	msg := make([]byte, benchChunk)
	var q []*udp.Request
	send := func(n int) *udp.Request {
		r, err := sc.Send(1, msg[:n], 0)
		if err != nil {
			b.Fatal(err)
		}
		return r
	}
	wait := func(r *udp.Request) {
		if err := r.Wait(ctx); err != nil {
			b.Fatal(err)
		}
	}
	for start := time.Now(); time.Since(start) < benchDuration; {
		if len(q) == benchOut {
			wait(q[0])
			q = q[1:]
		}
		q = append(q, send(benchChunk))
	}
	for _, r := range q {
		wait(r)
	}
	wait(send(1))
	t0 := time.Now()
	for range latIters {
		wait(send(8))
	}
	latUs = float64(time.Since(t0).Microseconds()) / latIters
	wait(send(0))
	r := <-res
	if r.err != nil {
		b.Fatal(r.err)
	}
	return float64(r.bytes) / r.dt.Seconds() / 1e9, latUs
}

// BenchmarkTwoProcess reports, in one run, loopback goodput with 8
// outstanding 512 KiB sends and the small-message isend→test time through
// the plugin in two processes (udp and tcp backends), the same traffic
// through the transport/udp Go API, and the ratio plugin(udp) / Go API.
func BenchmarkTwoProcess(b *testing.B) {
	_, lib, _ := build(b)
	for range b.N {
		ug, ul := pluginBench(b, lib, "udp")
		tg, tl := pluginBench(b, lib, "tcp")
		gg, gl := goAPIBench(b)
		b.ReportMetric(ug, "udp-GB/s")
		b.ReportMetric(tg, "tcp-GB/s")
		b.ReportMetric(gg, "goapi-GB/s")
		b.ReportMetric(ug/gg, "udp/goapi")
		b.ReportMetric(ul, "udp-us/isend")
		b.ReportMetric(tl, "tcp-us/isend")
		b.ReportMetric(gl, "goapi-us/send")
	}
}
