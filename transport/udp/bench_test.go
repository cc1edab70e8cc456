package udp

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"slices"
	"sync/atomic"
	"testing"
	"time"

	"github.com/metaroce/metaroce/bench/baseline"
	"github.com/metaroce/metaroce/netlab"
	"github.com/stretchr/testify/require"
)

const benchMsg = 64 << 20 // bytes per message in goodput benchmarks

// streamBufs holds the message and the receive buffers of stream, so that a
// benchmark touches their pages once, before it measures: fresh 64 MiB
// buffers cost a page fault per 4 KiB in the measured copies, which the
// baselines (reusing theirs) never pay.
type streamBufs struct {
	msg  []byte
	bufs [][]byte
}

func newStreamBufs(size, inflight int) *streamBufs {
	s := &streamBufs{msg: make([]byte, size), bufs: make([][]byte, inflight)}
	for i := range s.bufs {
		s.bufs[i] = make([]byte, size)
	}
	return s
}

// stream moves n messages of len(sb.msg) bytes from a to b with up to
// len(sb.bufs) messages outstanding and returns the elapsed time.
func stream(b testing.TB, p *pair, n int, sb *streamBufs) time.Duration {
	ctx := testCtx(b)
	inflight := len(sb.bufs)
	type op struct{ s, r *Request }
	q := make([]op, 0, inflight)
	start := time.Now()
	for i := 0; i < n; i++ {
		if len(q) == inflight {
			require.NoError(b, q[0].s.Wait(ctx))
			require.NoError(b, q[0].r.Wait(ctx))
			q = q[1:]
		}
		f := uint32(i % inflight)
		rr, err := p.b.Recv(f, [][]byte{sb.bufs[f]}, []uint32{0})
		require.NoError(b, err)
		sr, err := p.a.Send(f, sb.msg, 0)
		require.NoError(b, err)
		q = append(q, op{sr, rr})
	}
	for _, o := range q {
		require.NoError(b, o.s.Wait(ctx))
		require.NoError(b, o.r.Wait(ctx))
	}
	return time.Since(start)
}

func gbps(bytes int64, d time.Duration) float64 { return float64(bytes) * 8 / d.Seconds() / 1e9 }

// BenchmarkLoopbackGoodput measures one connection's goodput on loopback
// (64 MiB messages, 4 in flight) next to raw UDP with the same datagram size
// and kernel TCP, in the same run, and reports the ratios.
func BenchmarkLoopbackGoodput(b *testing.B) {
	p := newPair(b, Config{})
	sb := newStreamBufs(benchMsg, 4)
	stream(b, p, 4, sb) // warm up windows and touch every buffer
	b.SetBytes(benchMsg)
	b.ResetTimer()
	d := stream(b, p, b.N, sb)
	b.StopTimer()
	total := int64(b.N) * benchMsg
	mr := gbps(total, d)
	ctx := testCtx(b)
	bl := min(total, 1<<30)
	u, err := baseline.MeasureUDP(ctx, baseline.UDPConfig{Size: p.ea.Config().MaxDatagram, Batch: 16}, bl)
	require.NoError(b, err)
	tc, err := baseline.MeasureTCP(ctx, bl, 1<<20)
	require.NoError(b, err)
	st := p.a.Stats()
	b.ReportMetric(mr, "Gb/s")
	b.ReportMetric(u.Gbps(), "udp-Gb/s")
	b.ReportMetric(tc.Gbps(), "tcp-Gb/s")
	b.ReportMetric(mr/u.Gbps(), "x-udp")
	b.ReportMetric(mr/tc.Gbps(), "x-tcp")
	b.ReportMetric(float64(st.Retransmits)/float64(b.N), "retx/op")
}

// rttRounds is the number of round trips one BenchmarkLoopbackRTT operation
// makes, so that even -benchtime 4x averages over enough of them to damp a
// single descheduling of a noisy host.
const rttRounds = 256

// BenchmarkLoopbackRTT measures the round trip of a 64-byte message against
// raw UDP ping-pong. Each operation makes rttRounds MetaRoCE rounds and then
// rttRounds UDP rounds, so that both see the same load on a shared host.
//
// rtt is the time from Send to the echo's arrival, with the receives posted
// one round ahead, as a collective or NCCL does (so the receiver's
// RECV_READY is not part of it), and the send completions collected after
// it; round adds those two steps, that is everything one iteration of a
// ping-pong loop costs.
func BenchmarkLoopbackRTT(b *testing.B) {
	const size = 64
	p := newPair(b, Config{})
	ctx := testCtx(b)
	msg := make([]byte, size)
	echoBuf, backBuf := make([]byte, size), make([]byte, size)
	post := func() (*Request, *Request) {
		er, err := p.b.Recv(1, [][]byte{echoBuf}, []uint32{0})
		require.NoError(b, err)
		br, err := p.a.Recv(2, [][]byte{backBuf}, []uint32{0})
		require.NoError(b, err)
		return er, br
	}
	er, br := post()
	round := func() (rtt, all time.Duration) {
		t0 := time.Now()
		sr, _ := p.a.Send(1, msg, 0)
		require.NoError(b, er.Wait(ctx))
		s2, _ := p.b.Send(2, echoBuf, 0)
		require.NoError(b, br.Wait(ctx))
		rtt = time.Since(t0)
		er, br = post()
		require.NoError(b, sr.Wait(ctx))
		require.NoError(b, s2.Wait(ctx))
		return rtt, time.Since(t0)
	}
	for i := 0; i < 100; i++ {
		round()
	}
	rtts := make([]time.Duration, 0, b.N*rttRounds)
	var allSum, udpSum time.Duration
	var udpP50 []time.Duration
	sa0, sb0 := p.a.Stats(), p.b.Stats()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		for k := 0; k < rttRounds; k++ {
			rtt, all := round()
			rtts = append(rtts, rtt)
			allSum += all
		}
		b.StopTimer()
		u, err := baseline.MeasureUDPPingPong(ctx, size, rttRounds)
		require.NoError(b, err)
		udpSum += u.Mean * rttRounds
		udpP50 = append(udpP50, u.P50)
		b.StartTimer()
	}
	b.StopTimer()
	sa, sb := p.a.Stats(), p.b.Stats()
	nr := float64(len(rtts))
	pkts := float64(sa.PacketsSent + sb.PacketsSent - sa0.PacketsSent - sb0.PacketsSent)
	acks := float64(sa.AcksSent + sb.AcksSent - sa0.AcksSent - sb0.AcksSent)
	var sum time.Duration
	for _, d := range rtts {
		sum += d
	}
	n := time.Duration(len(rtts))
	rtt, all, udp := sum/n, allSum/n, udpSum/n
	slices.Sort(rtts)
	slices.Sort(udpP50)
	p50, up50 := rtts[len(rtts)/2], udpP50[len(udpP50)/2]
	us := func(d time.Duration) float64 { return float64(d.Nanoseconds()) / 1e3 }
	b.ReportMetric(us(rtt), "rtt-µs")
	b.ReportMetric(us(p50), "p50-µs")
	b.ReportMetric(us(all), "round-µs")
	b.ReportMetric(us(udp), "udp-rtt-µs")
	b.ReportMetric(us(up50), "udp-p50-µs")
	b.ReportMetric(float64(rtt)/float64(udp), "x-udp")
	b.ReportMetric(float64(p50)/float64(up50), "x-udp-p50")
	b.ReportMetric(us(rtts[len(rtts)*99/100]), "p99-µs")
	b.ReportMetric(pkts/nr, "dgrams/round")
	b.ReportMetric(acks/nr, "acks/round")
}

// labTCP streams total bytes of kernel TCP from h1 to h2 through the lab.
func labTCP(b testing.TB, lab *netlab.Lab, total int64) float64 {
	ctx := testCtx(b)
	var ln net.Listener
	require.NoError(b, lab.Run(2, func() error {
		var err error
		ln, err = net.Listen("tcp", netip4(lab, 2)+":0")
		return err
	}))
	defer ln.Close()
	type res struct {
		n   int64
		d   time.Duration
		err error
	}
	ch := make(chan res, 1)
	go func() {
		n, d, err := baseline.SinkTCP(ctx, ln)
		ch <- res{n, d, err}
	}()
	// Kernel TCP crawls at heavy loss (RTO back-off): bound the stream by
	// time and count what arrived, instead of failing the benchmark.
	sctx, cancel := context.WithTimeout(ctx, labTCPTime)
	defer cancel()
	require.NoError(b, lab.Run(1, func() error {
		err := baseline.SendTCP(sctx, ln.Addr().String(), total, 1<<20)
		// The socket deadline is the context's, and may pass just before
		// the context's own timer marks it done.
		if errors.Is(err, os.ErrDeadlineExceeded) || errors.Is(err, context.DeadlineExceeded) {
			return nil
		}
		return err
	}))
	r := <-ch
	require.NoError(b, r.err)
	return gbps(r.n, r.d)
}

// labTCPTime bounds one kernel TCP baseline stream through the lab.
const labTCPTime = 5 * time.Second

func netip4(lab *netlab.Lab, h int) string { return lab.Host(h).Addr(0).String() }

// BenchmarkNetlabLoss measures goodput through a 4-link fabric whose spine
// drops 0, 1, 5 and 10 % of the packets, next to kernel TCP through the same
// rule. Skips unless root.
func BenchmarkNetlabLoss(b *testing.B) {
	for _, loss := range []float64{0, 1, 5, 10} {
		b.Run(fmt.Sprintf("loss=%v%%", loss), func(b *testing.B) {
			lab, p := labPair(b, 4, Config{})
			require.NoError(b, lab.SetLoss(netlab.Link{Plane: 0, Index: netlab.AllLinks}, loss))
			const size = 16 << 20
			b.SetBytes(size)
			sb := newStreamBufs(size, 4)
			stream(b, p, 4, sb)
			b.ResetTimer()
			d := stream(b, p, b.N, sb)
			b.StopTimer()
			mr := gbps(int64(b.N)*size, d)
			tc := labTCP(b, lab, min(int64(b.N)*size, 256<<20))
			st := p.a.Stats()
			b.ReportMetric(mr, "Gb/s")
			b.ReportMetric(tc, "tcp-Gb/s")
			b.ReportMetric(mr/tc, "x-tcp")
			b.ReportMetric(float64(st.Retransmits)/float64(st.PacketsSent), "retx-frac")
			b.ReportMetric(float64(st.Timeouts), "timeouts")
			b.ReportMetric(float64(st.SpuriousTimeouts), "spurious-to")
			b.ReportMetric(float64(st.PathChanges), "path-changes")
		})
	}
}

// BenchmarkNetlabBlackholeRecovery streams continuously through a 4-link
// fabric, blackholes one spine link and reports how long goodput takes to
// come back to 90 % of the remaining capacity (3/4 of the goodput before;
// the veth links have no rate of their own, so recovery-full-ms also gives
// the time to 90 % of all of it). Goodput is counted from message
// completions over a trailing window of recoveryWin, and timed from the
// onset of the loss, read from the completions (see measureBlackhole),
// because installing the rule (nft-ms) takes tens of milliseconds.
// stall-ms is the longest time without a completion. The spine counters
// say what share of the packets the blackholed link carried before and
// after. Skips unless root.
func BenchmarkNetlabBlackholeRecovery(b *testing.B) {
	cfg := Config{PortsPerPlane: 64}
	cfg.Core.PathsPerPlane = 16
	const hole = 1
	var sum recoveryStats
	for i := 0; i < b.N; i++ {
		lab, p := labPair(b, 4, cfg)
		r := measureBlackhole(b, lab, p, hole)
		sum.add(r, 1/float64(b.N))
	}
	b.ReportMetric(sum.before*8/1e9, "before-Gb/s")
	b.ReportMetric(sum.recovery, "recovery-ms")
	b.ReportMetric(sum.recoveryFull, "recovery-full-ms")
	b.ReportMetric(sum.stall, "stall-ms")
	b.ReportMetric(sum.nft, "nft-ms")
	b.ReportMetric(sum.shareBefore, "hole-share-before")
	b.ReportMetric(sum.shareAfter, "hole-share-after")
	b.ReportMetric(sum.pathChanges, "path-changes")
	b.ReportMetric(sum.timeouts, "timeouts")
}

// recoveryWin is the width of the sliding goodput window of
// BenchmarkNetlabBlackholeRecovery, and recoveryStep its step.
const (
	recoveryWin  = 2 * time.Millisecond
	recoveryStep = 250 * time.Microsecond
)

// recoveryStats is one blackhole run's outcome (times in ms, rate in B/s).
type recoveryStats struct {
	before, recovery, recoveryFull, stall, nft float64
	shareBefore, shareAfter                    float64
	pathChanges, timeouts                      float64
}

func (s *recoveryStats) add(r recoveryStats, w float64) {
	s.before += w * r.before
	s.recovery += w * r.recovery
	s.recoveryFull += w * r.recoveryFull
	s.stall += w * r.stall
	s.nft += w * r.nft
	s.shareBefore += w * r.shareBefore
	s.shareAfter += w * r.shareAfter
	s.pathChanges += w * r.pathChanges
	s.timeouts += w * r.timeouts
}

// completion is one message delivered, at t since the stream started.
type completion struct {
	t time.Duration
	n int
}

// measureBlackhole streams from p.a to p.b (8 messages of 256 KiB in
// flight), measures the goodput for 200 ms, blackholes spine link hole,
// streams 200 ms more and evaluates the completions.
func measureBlackhole(b *testing.B, lab *netlab.Lab, p *pair, hole int) recoveryStats {
	const (
		size     = 256 << 10
		inflight = 8
		phase    = 200 * time.Millisecond
	)
	ctx, cancel := context.WithCancel(testCtx(b))
	defer cancel()
	start := time.Now()
	var mark atomic.Int64 // when the blackhole was requested, ns since start; 0 until then
	var stopAt atomic.Int64
	stopAt.Store(int64(1 << 62))
	done := make(chan []completion, 1)
	go func() {
		comps := make([]completion, 0, 1<<16)
		defer func() { done <- comps }()
		msg := make([]byte, size)
		bufs := make([][]byte, inflight)
		for k := range bufs {
			bufs[k] = make([]byte, size)
		}
		type op struct{ s, r *Request }
		q := make([]op, 0, inflight)
		for k := 0; ; k++ {
			if len(q) == inflight {
				if q[0].s.Wait(ctx) != nil || q[0].r.Wait(ctx) != nil {
					return
				}
				comps = append(comps, completion{time.Since(start), size})
				q = q[1:]
			}
			if int64(time.Since(start)) > stopAt.Load() {
				return
			}
			f := uint32(k % inflight)
			rr, err := p.b.Recv(f, [][]byte{bufs[f]}, []uint32{0})
			if err != nil {
				return
			}
			sr, err := p.a.Send(f, msg, 0)
			if err != nil {
				return
			}
			q = append(q, op{sr, rr})
		}
	}()
	waitFor := func(d time.Duration) {
		t := time.NewTimer(d)
		defer t.Stop()
		select {
		case <-t.C:
		case <-ctx.Done():
		}
	}
	waitFor(phase / 4) // windows and paths settle
	c0, err := lab.LinkCounters()
	require.NoError(b, err)
	t0 := time.Since(start)
	waitFor(phase)
	c1, err := lab.LinkCounters()
	require.NoError(b, err)
	th := time.Since(start)
	mark.Store(int64(th))
	require.NoError(b, lab.Blackhole(netlab.Link{Plane: 0, Index: hole}, true))
	nft := time.Since(start) - th
	waitFor(phase / 2)
	c2, err := lab.LinkCounters()
	require.NoError(b, err)
	waitFor(phase / 2)
	c3, err := lab.LinkCounters()
	require.NoError(b, err)
	stopAt.Store(int64(time.Since(start)))
	comps := <-done
	st := p.a.Stats()

	share := func(from, to []netlab.LinkCounter) float64 {
		var all uint64
		for k := range to {
			all += to[k].FwdPackets - from[k].FwdPackets
		}
		if all == 0 {
			return 0
		}
		return float64(to[hole].FwdPackets-from[hole].FwdPackets) / float64(all)
	}
	bytesIn := func(from, to time.Duration) float64 {
		var n int
		for _, c := range comps {
			if c.t > from && c.t <= to {
				n += c.n
			}
		}
		return float64(n)
	}
	before := bytesIn(t0, th) / (th - t0).Seconds()
	// The rule takes effect somewhere inside the nft call (tens of ms on
	// a loaded host), so the onset is read from the data: every message
	// spans all paths, so the first loss stops completions until it is
	// repaired. The onset is the completion before the longest gap after
	// the request, moved one typical inter-completion time earlier (a
	// message already complete may still have finished after the loss).
	var gapStart, stall time.Duration
	last := th
	for _, c := range comps {
		if c.t > th {
			if c.t-last > stall {
				stall, gapStart = c.t-last, last
			}
			last = c.t
		}
	}
	var gaps []time.Duration
	for k := 1; k < len(comps); k++ {
		if comps[k-1].t > t0 && comps[k].t <= th {
			gaps = append(gaps, comps[k].t-comps[k-1].t)
		}
	}
	slices.Sort(gaps)
	onset := gapStart
	if len(gaps) > 0 {
		onset -= gaps[len(gaps)/2]
	}
	// recover is how long after the onset the goodput over the trailing
	// recoveryWin, counting only completions after the gap began (the
	// pipeline completes in bursts), first reaches thr (B/s), in ms.
	end := comps[len(comps)-1].t
	recover := func(thr float64) float64 {
		for w := gapStart + recoveryWin; w <= end; w += recoveryStep {
			if bytesIn(w-recoveryWin, w)/recoveryWin.Seconds() >= thr {
				return float64(w-onset) / 1e6
			}
		}
		return float64(end-onset) / 1e6 // never within the run
	}
	r := recoveryStats{
		before:       before,
		recovery:     recover(0.9 * 0.75 * before),
		recoveryFull: recover(0.9 * before),
		stall:        float64(stall) / 1e6,
		nft:          float64(nft) / 1e6,
		shareBefore:  share(c0, c1),
		shareAfter:   share(c2, c3),
		pathChanges:  float64(st.PathChanges),
		timeouts:     float64(st.Timeouts),
	}
	b.Logf("before %.2f Gb/s, recovery %.2f ms (full %.2f), stall %.2f ms, nft %.2f ms, link %d share %.3f then %.3f, path changes %d, timeouts %d",
		before*8/1e9, r.recovery, r.recoveryFull, r.stall, r.nft, hole, r.shareBefore, r.shareAfter, st.PathChanges, st.Timeouts)
	return r
}

// BenchmarkLoopbackAuth measures one connection's loopback goodput with
// per-packet authentication on beside the same transfer without it, in one
// run, and reports the ratio (goal ≥ 0.7).
func BenchmarkLoopbackAuth(b *testing.B) {
	secret := []byte("benchmark-secret-0123456789abcdef")
	plain := newPair(b, Config{})
	sealed := newPair(b, Config{Secret: secret})
	sb := newStreamBufs(benchMsg, 4)
	stream(b, plain, 4, sb)
	stream(b, sealed, 4, sb)
	b.SetBytes(benchMsg)
	b.ResetTimer()
	var dPlain, dSealed time.Duration
	for i := 0; i < b.N; i++ {
		dPlain += stream(b, plain, 1, sb)
		dSealed += stream(b, sealed, 1, sb)
	}
	b.StopTimer()
	total := int64(b.N) * benchMsg
	gp, gs := gbps(total, dPlain), gbps(total, dSealed)
	b.ReportMetric(gs, "auth-Gb/s")
	b.ReportMetric(gp, "plain-Gb/s")
	b.ReportMetric(gs/gp, "x-plain")
}
