package scenarios

import (
	"fmt"

	"github.com/metaroce/metaroce/fabric/sim"
	"github.com/metaroce/metaroce/transport/wire"
)

// incastScenario: N-1 long flows into host 0. Reports the bottleneck queue
// (the leaf port feeding host 0) and per-sender rates over time, Jain's
// fairness, and how many base RTTs pass until the shares are fair and until
// the queue stays under Kmin.
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
	const qbin, rbin = 5_000, 20_000
	res.param("queue_bin_ns", qbin)
	res.param("rate_bin_ns", rbin)
	sum := res.table("summary", "protocol", "jain_2nd_half", "rtts_until_fair", "rtts_until_queue_below_kmin",
		"max_queue_kb", "drops", "goodput_frac")
	ts := res.table("timeseries", "protocol", "t_us", "queue_kb", "jain", "min_rate_gbps", "max_rate_gbps")
	res.Plots = append(res.Plots,
		PlotSpec{Table: "timeseries", X: "t_us", Y: "queue_kb", Series: "protocol", Title: "incast bottleneck queue"},
		PlotSpec{Table: "timeseries", X: "t_us", Y: "jain", Series: "protocol", Title: "incast Jain fairness"})
	rtt := float64(c.BaseRTT(o.MTU+wire.DataHeaderLen+c.Overhead, 64+c.Overhead))
	for _, proto := range []string{MetaRoCE, RoCEv2, RoCEv2PFC} {
		s, err := build(o, c, proto)
		if err != nil {
			return nil, err
		}
		var pairs [][2]int
		for h := 1; h < n; h++ {
			pairs = append(pairs, [2]int{h, 0})
		}
		const msg = 64 << 10
		perFlow := float64(dur) * payloadRate(o, c) / 1e9 / float64(n-1)
		j := newJob(s, streams(n, pairs, msg, int(perFlow/msg)+8))
		q := &series{bin: qbin}
		rates := make([]*series, n)
		for h := range rates {
			rates[h] = &series{bin: rbin}
		}
		var got float64
		s.OnRx = func(now int64, h *sim.Host, pk *sim.Packet) {
			if h.ID == 0 && j.Start >= 0 {
				rates[pk.Src].add(now-j.Start, float64(pk.PayloadLen))
			}
		}
		j.onRecv = func(now int64, h, from int, b uint64) { got += float64(b) }
		var sample func(now int64)
		sample = func(now int64) {
			if j.Start >= 0 {
				q.max(now-j.Start, float64(s.DownlinkStats(0, 0).QueueBytes))
			}
			s.At(now+1000, sample)
		}
		s.At(0, sample)
		r.run(s, j, 1_000_000_000, func() bool { return j.Start >= 0 && s.Now() >= j.Start+dur })
		if j.Start < 0 {
			return nil, fmt.Errorf("incast %s: connections never came up: %v", proto, j.Err)
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
		fair := -1.0
		for b := nb - 1; b >= 0; b-- {
			if !(jains[b] >= 0.9) {
				if b < nb-1 {
					fair = float64(b+1) * rbin / rtt
				}
				break
			}
			if b == 0 {
				fair = 0
			}
		}
		below := -1.0
		nq := int(dur / qbin)
		for i := nq - 1; i >= 0; i-- {
			v := 0.0
			if i < len(q.vals) {
				v = q.vals[i]
			}
			if v >= float64(c.Kmin) {
				if i < nq-1 {
					below = float64(i+1) * qbin / rtt
				}
				break
			}
			if i == 0 {
				below = 0
			}
		}
		var js float64
		for _, v := range jains[nb/2:] {
			js += v
		}
		js /= float64(nb - nb/2)
		st := s.DownlinkStats(0, 0)
		sum.Add(proto, js, fair, below, float64(st.MaxQueue)/1e3, st.Drops,
			got/(float64(dur)/1e9)/payloadRate(o, c))
	}
	res.Notes = append(res.Notes, "rtts_* = -1: never reached within the run; RTT is the base RTT parameter")
	return res, nil
}
