package harness

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"net/netip"
	"os"
	"os/exec"
	"regexp"
	"strconv"
	"strings"
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

// goAPIResult is what the receiving side of the Go API transfer measured:
// the bytes of the benchChunk messages and the time from the first of them
// to the 1-byte marker that follows the last.
type goAPIResult struct {
	bytes int64
	dt    time.Duration
	err   error
}

// goAPIListen opens a loopback endpoint for one side of the Go API transfer.
func goAPIListen() (*udp.Endpoint, error) {
	return udp.Listen(udp.Config{Addrs: []netip.Addr{netip.MustParseAddr("127.0.0.1")}})
}

// goAPIReceive keeps benchOut receives posted on rc's flow 1 until a 0-byte
// message arrives, and returns what they measured.
func goAPIReceive(ctx context.Context, rc *udp.Conn) (r goAPIResult) {
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
	var t0 time.Time
	for i := range reqs {
		if r.err = post(i); r.err != nil {
			return r
		}
	}
	for i := 0; ; i = (i + 1) % benchOut {
		if r.err = reqs[i].Wait(ctx); r.err != nil {
			return r
		}
		switch n := reqs[i].Sizes()[0]; n {
		case 0:
			return r
		case 1:
			r.dt = time.Since(t0)
		case benchChunk:
			if r.bytes == 0 {
				t0 = time.Now()
			}
			r.bytes += int64(n)
		}
		if r.err = post(i); r.err != nil {
			return r
		}
	}
}

// goAPISend is the sending side: benchOut sends of benchChunk bytes
// outstanding for benchDuration, a 1-byte marker, latIters 8-byte sends one
// at a time, then the 0-byte end. It returns the 8-byte send→completion
// time (µs).
func goAPISend(b *testing.B, ctx context.Context, sc *udp.Conn) (latUs float64) {
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
	return latUs
}

// goAPIBench moves the bench scenario's traffic through transport/udp
// directly, between two endpoints of this process. It returns goodput
// (GB/s) and the send→completion time (µs).
func goAPIBench(b *testing.B) (gbps, latUs float64) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	ra, err := goAPIListen()
	if err != nil {
		b.Fatal(err)
	}
	defer ra.Close()
	sa, err := goAPIListen()
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
	res := make(chan goAPIResult, 1)
	go func() { res <- goAPIReceive(ctx, rc) }()
	latUs = goAPISend(b, ctx, sc)
	r := <-res
	if r.err != nil {
		b.Fatal(r.err)
	}
	return float64(r.bytes) / r.dt.Seconds() / 1e9, latUs
}

// receiverEnv makes TestGoAPIReceiverProcess, run in a child process of
// the benchmark, the receiving side of goAPIBench2.
const receiverEnv = "METAROCE_HARNESS_GOAPI_RECEIVER"

// TestGoAPIReceiverProcess is not a test: goAPIBench2 runs this test binary
// again with receiverEnv set, and the child becomes the receiving process.
// It prints its endpoint's addresses, takes one connection, and prints
// what goAPIReceive measured.
func TestGoAPIReceiverProcess(t *testing.T) {
	if os.Getenv(receiverEnv) != "1" {
		t.Skip("the receiving process of BenchmarkTwoProcess's Go API figures")
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	ep, err := goAPIListen()
	if err != nil {
		t.Fatal(err)
	}
	defer ep.Close()
	var addrs []string
	for _, a := range ep.Addrs() {
		addrs = append(addrs, a.String())
	}
	fmt.Printf("addrs=%s\n", strings.Join(addrs, ","))
	rc, err := ep.Accept(ctx)
	if err != nil {
		t.Fatal(err)
	}
	r := goAPIReceive(ctx, rc)
	if r.err != nil {
		t.Fatal(r.err)
	}
	fmt.Printf("bytes=%d ns=%d\n", r.bytes, r.dt.Nanoseconds())
}

// goAPIBench2 is goAPIBench with the receiver in a process of its own, as
// the plugin's two harness processes are: the comparison that isolates
// what the plugin's C ABI layer costs from what one process with both
// endpoints saves (a shared Go runtime, no second scheduler).
func goAPIBench2(b *testing.B) (gbps, latUs float64) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, os.Args[0], "-test.run=^TestGoAPIReceiverProcess$", "-test.count=1", "-test.v")
	cmd.Env = append(os.Environ(), receiverEnv+"=1")
	var errb bytes.Buffer
	cmd.Stderr = &errb
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		b.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		b.Fatal(err)
	}
	defer func() { _ = cmd.Wait() }()
	lines := bufio.NewScanner(stdout)
	field := func(prefix string) string {
		for lines.Scan() {
			if v, ok := strings.CutPrefix(lines.Text(), prefix); ok {
				return v
			}
		}
		_ = cmd.Process.Kill()
		b.Fatalf("receiver process printed no %q line\n%s", prefix, errb.String())
		return ""
	}
	var remote []netip.AddrPort
	for _, a := range strings.Split(field("addrs="), ",") {
		ap, err := netip.ParseAddrPort(a)
		if err != nil {
			b.Fatal(err)
		}
		remote = append(remote, ap)
	}
	sa, err := goAPIListen()
	if err != nil {
		b.Fatal(err)
	}
	defer sa.Close()
	sc, err := sa.Dial(ctx, remote)
	if err != nil {
		b.Fatal(err)
	}
	latUs = goAPISend(b, ctx, sc)
	var nbytes, ns int64
	if _, err := fmt.Sscanf(field("bytes="), "%d ns=%d", &nbytes, &ns); err != nil {
		b.Fatal(err)
	}
	return float64(nbytes) / float64(ns), latUs
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
		g2, l2 := goAPIBench2(b)
		b.ReportMetric(ug, "udp-GB/s")
		b.ReportMetric(tg, "tcp-GB/s")
		b.ReportMetric(gg, "goapi-GB/s")
		b.ReportMetric(g2, "goapi2p-GB/s")
		b.ReportMetric(ug/gg, "udp/goapi")
		b.ReportMetric(ug/g2, "udp/goapi2p")
		b.ReportMetric(ul, "udp-us/isend")
		b.ReportMetric(tl, "tcp-us/isend")
		b.ReportMetric(gl, "goapi-us/send")
		b.ReportMetric(l2, "goapi2p-us/send")
	}
}
