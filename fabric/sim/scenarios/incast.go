package scenarios

import (
	"fmt"
	"math"

	"github.com/metaroce/metaroce/fabric/sim"
	"github.com/metaroce/metaroce/internal/settle"
	"github.com/metaroce/metaroce/transport/rocev2"
	"github.com/metaroce/metaroce/transport/wire"
)

// incastScenario: N-1 long flows into host 0. Reports the bottleneck queue
// (the leaf port feeding host 0) and per-sender rates over time, Jain's
// fairness, and how many base RTTs pass, from the first acknowledgement of
// DATA to reach a sender, until the shares are fair (Jain ≥ 0.95 over every
// 4-RTT window from then on) and until the queue stays at or under Kmin
// (internal/settle, the definition the core's test bed uses too).
func incastScenario(r *runner) (*Result, error) {
	o := r.o
	leaves, spines, per := 8, 8, 8
	dur := int64(1_000_000)
	if o.Smoke {
		leaves, spines, per = 4, 4, 4
		dur = 400_000
	}
	n := leaves * per
	c := o.fabric(leaves, spines, per, 1)
	res := &Result{}
	res.fabricParams(o, c)
	res.param("senders", n-1)
	res.param("duration_ns", dur)
	// qbin and rbin are the time series' bins; fbin is the resolution of
	// the settling figures (the queue is sampled at every packet delivered
	// to host 0 and every fbin), from which the series' bins are summed.
	const qbin, rbin, fbin = 5_000, 20_000, 1_000
	res.param("queue_bin_ns", qbin)
	res.param("rate_bin_ns", rbin)
	res.param("settle_bin_ns", fbin)
	sum := res.table("summary", "protocol", "first_ack_us", "jain_2nd_half", "rtts_until_fair", "rtts_until_queue_below_kmin",
		"rtts_until_settled", "max_queue_kb", "drops", "goodput_frac")
	ts := res.table("timeseries", "protocol", "t_us", "queue_kb", "jain", "min_rate_gbit_s", "max_rate_gbit_s")
	res.Plots = append(res.Plots,
		PlotSpec{Table: "timeseries", X: "t_us", Y: "queue_kb", Series: "protocol", Title: "incast bottleneck queue"},
		PlotSpec{Table: "timeseries", X: "t_us", Y: "jain", Series: "protocol", Title: "incast Jain fairness"})
	rtt := float64(c.BaseRTT(o.MTU+wire.DataHeaderLen+c.Overhead, 64+c.Overhead))
	protos := []string{MetaRoCE, RoCEv2, RoCEv2PFC}
	r.total, r.even = len(protos), true
	for _, proto := range protos {
		s, err := build(o, c, proto)
		if err != nil {
			return nil, err
		}
		var pairs [][2]int
		for h := 1; h < n; h++ {
			pairs = append(pairs, [2]int{h, 0})
		}
		const msg = 64 << 10
		perFlow := float64(dur) * payloadRate(o, c, proto) / 1e9 / float64(n-1)
		j := newJob(s, streams(n, pairs, msg, int(perFlow/msg)+8))
		fq := &series{bin: fbin}
		fine := make([]*series, n)
		for h := range fine {
			fine[h] = &series{bin: fbin}
		}
		g := newGoodputMeter(s, j, 0, dur)
		// firstAck is the first acknowledgement to reach a sender after
		// the first DATA reached the receiver (ns from the start): the
		// first feedback any sender has about the receiver's queue. A
		// MetaRoCE receiver's rate hints answering its posted receives
		// are ACKs too, but they arrive about an RTT before any DATA can.
		firstData, firstAck := int64(-1), int64(-1)
		sampleQueue := func(now int64) {
			fq.max(now-j.Start, float64(s.DownlinkStats(0, 0).QueueBytes))
		}
		s.OnRx = func(now int64, h *sim.Host, pk *sim.Packet) {
			g.observe(pk)
			if h.ID == 0 && j.Start >= 0 {
				fine[pk.Src].add(now-j.Start, float64(pk.PayloadLen))
				if pk.PayloadLen > 0 && firstData < 0 {
					firstData = now - j.Start
				}
				sampleQueue(now)
			}
			if h.ID != 0 && pk.Src == 0 && firstData >= 0 && firstAck < 0 && isAck(proto, pk.Hdr) {
				firstAck = now - j.Start
			}
		}
		var sample func(now int64)
		sample = func(now int64) {
			if j.Start >= 0 {
				sampleQueue(now)
			}
			s.At(now+fbin, sample)
		}
		s.At(0, sample)
		r.label = proto
		if err := r.run(s, j, 1_000_000_000, func() bool { return j.Start >= 0 && s.Now() >= j.Start+dur }); err != nil {
			return nil, err
		}
		if j.Start < 0 {
			return nil, fmt.Errorf("incast %s: connections never came up: %v", proto, j.Err)
		}
		if j.Refused != nil {
			return nil, fmt.Errorf("incast %s: %w", proto, j.Refused)
		}
		q := fq.coarsen(qbin, true)
		rates := make([]*series, n)
		for h := range rates {
			rates[h] = fine[h].coarsen(rbin, false)
		}
		nb := int(dur / rbin)
		jains := make([]float64, nb)
		for b := 0; b < nb; b++ {
			xs := make([]float64, 0, n-1)
			lo, hi := 1e300, 0.0
			for h := 1; h < n; h++ {
				v := 0.0
				if b < len(rates[h].vals) {
					v = rates[h].vals[b] * 8 / rbin // Gb/s
				}
				xs = append(xs, v)
				lo, hi = min(lo, v), max(hi, v)
			}
			jains[b] = jain(xs)
			for k := 0; k < rbin/qbin; k++ {
				i := b*(rbin/qbin) + k
				qv := 0.0
				if i < len(q.vals) {
					qv = q.vals[i]
				}
				ts.Add(proto, float64(i*qbin)/1e3, qv/1e3, jains[b], lo, hi)
			}
		}
		fair, below, settled := incastSettling(fine[1:], fq.vals, int(c.Kmin), dur, fbin, firstAck, rtt)
		js := meanJain(jains[nb/2:])
		st := s.DownlinkStats(0, 0)
		sum.Add(proto, float64(firstAck)/1e3, js, fair, below, settled, float64(st.MaxQueue)/1e3, st.Drops,
			g.frac(1, payloadRate(o, c, proto)))
	}
	res.Notes = append(res.Notes, "rtts_* = -1: never reached within the run; RTT is the base RTT parameter",
		"goodput_frac: payload placed at host 0, of the packets its link serialised from the start to a link delay before the end, of what the link carries in full DATA packets of the protocol (at most 1)",
		"jain_2nd_half: mean of the second half's rate bins in which some sender delivered data (a bin with none has no index: NaN in the time series); -1: no sender delivered anything in the second half")
	return res, nil
}

// incastSettling returns, in base RTTs (rtt ns) from the first ACK of DATA
// (origin ns after the start; −1 if none came), how long until
// the senders' shares are fair for good, until the queue stays at or under
// kmin for good, and until both hold; −1 for a condition never reached
// within the run (dur ns). fine[i] holds sender i's bytes per bin of fbin
// ns, queue the largest queue per bin.
func incastSettling(fine []*series, queue []float64, kmin int, dur, fbin, origin int64, rtt float64) (fair, below, settled float64) {
	bins := int(dur / fbin)
	if origin < 0 {
		return -1, -1, -1
	}
	placed := make([][]float64, len(fine))
	for i, f := range fine {
		placed[i] = make([]float64, bins)
		copy(placed[i], f.vals)
	}
	q := make([]int, bins)
	for k := range q {
		if k < len(queue) {
			q[k] = int(queue[k])
		}
	}
	win := int(math.Ceil(4 * rtt / float64(fbin)))
	from := int(origin / fbin)
	// never is settle.From's answer when no window from some bin on passes:
	// the last win−1 bins hold no whole window, so it reads a bin there.
	rtts := func(k, never int) float64 {
		if k >= never {
			return -1
		}
		// The bin holding the origin counts whole: a result within it is 0.
		return max(0, (float64(k)*float64(fbin)-float64(origin))/rtt)
	}
	settled = rtts(settle.From(placed, q, kmin, from, win), bins-win+1)
	fair = rtts(settle.From(placed, make([]int, bins), kmin, from, win), bins-win+1)
	below = rtts(settle.From(nil, q, kmin, from, 0), bins)
	return fair, below, settled
}

// isAck reports whether hdr, a packet's transport header, is an
// acknowledgement of the protocol proto.
func isAck(proto string, hdr []byte) bool {
	if proto == MetaRoCE {
		return wire.PeekOpcode(hdr) == wire.OpAck
	}
	return len(hdr) > 0 && rocev2.Opcode(hdr[0]) == rocev2.OpAck
}
