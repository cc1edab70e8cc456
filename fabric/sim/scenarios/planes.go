package scenarios

import "fmt"

// planesScenario: aggregate throughput of many concurrent connections as
// planes are added (every host has one 400G port per plane). Every host
// streams to every other host, so the 64-host fabric carries 64 × 63 =
// 4,032 concurrent flows, one in each direction of 2,016 connections, and
// every host port is loaded to its capacity.
//
// Goodput is the payload arriving at the hosts in the measurement window
// (the first fifth of the run is discarded), as a fraction of what the
// hosts' ports can carry in payload; retransmitted payload is subtracted.
// Counting completed messages instead quantised the figure by a message
// per flow, several percent either way.
func planesScenario(r *runner) (*Result, error) {
	o := r.o
	planes := []int{1, 2, 4, 8}
	leaves, spines, per := 8, 8, 8
	dur := int64(150_000)
	if o.Smoke {
		planes = []int{1, 2, 4}
		leaves, spines, per = 2, 2, 4
		dur = 150_000
	}
	n := leaves * per
	res := &Result{}
	res.fabricParams(o, o.fabric(leaves, spines, per, 1))
	res.param("hosts", n)
	res.param("flows", n*(n-1))
	res.param("connections", n*(n-1)/2)
	res.param("duration_ns", dur)
	res.param("warmup_ns", dur/5)
	tb := res.table("throughput", "planes", "protocol", "flows", "agg_tbit_s", "frac_of_capacity", "min_host_frac", "wasted_pkts")
	res.Plots = append(res.Plots, PlotSpec{Table: "throughput", X: "planes", Y: "agg_tbit_s", Series: "protocol",
		Title: "aggregate throughput vs planes"})
	protos := []string{MetaRoCE, RoCEv2}
	r.total = len(planes) * len(protos)
	for _, p := range planes {
		for _, proto := range protos {
			c := o.fabric(leaves, spines, per, p)
			s, err := build(o, c, proto)
			if err != nil {
				return nil, err
			}
			var pairs [][2]int
			for h := 0; h < n; h++ {
				for k := 1; k < n; k++ {
					pairs = append(pairs, [2]int{h, (h + k) % n})
				}
			}
			const msg = 64 << 10
			perFlow := float64(dur) * payloadRate(o, c, proto) * float64(p) / 1e9 / float64(n-1)
			j := newJob(s, streams(n, pairs, msg, int(perFlow/msg)+4))
			j.window = perLinkRate(s, 4)
			warm := dur / 5
			var rx0 []uint64
			var retx0 uint64
			rxNow := func() []uint64 {
				v := make([]uint64, n)
				for h, x := range s.Hosts() {
					for _, b := range x.RxPayload {
						v[h] += b
					}
				}
				return v
			}
			r.label = fmt.Sprintf("%d-plane %s", p, proto)
			err = r.run(s, j, 1_000_000_000, func() bool {
				if j.Start >= 0 && rx0 == nil && s.Now() >= j.Start+warm {
					rx0, retx0 = rxNow(), wastedPkts(s, j)
				}
				return j.Start >= 0 && s.Now() >= j.Start+dur
			})
			if err != nil {
				return nil, err
			}
			if j.Start < 0 || rx0 == nil {
				return nil, fmt.Errorf("planes %d %s: connections never came up: %v", p, proto, j.Err)
			}
			if j.Refused != nil {
				return nil, fmt.Errorf("planes %d %s: %w", p, proto, j.Refused)
			}
			rx1 := rxNow()
			retx := (wastedPkts(s, j) - retx0) * uint64(o.MTU)
			secs := float64(dur-warm) / 1e9
			hostCap := payloadRate(o, c, proto) * float64(p) * secs
			var got float64
			minFrac := 1e9
			for h := range rx1 {
				d := float64(rx1[h] - rx0[h])
				got += d
				minFrac = min(minFrac, d/hostCap)
			}
			got -= float64(retx)
			tb.Add(p, proto, len(pairs), got*8/secs/1e12, got/(hostCap*float64(n)), minFrac, retx/uint64(o.MTU))
		}
	}
	res.Notes = append(res.Notes, "goodput: payload arriving in the window less the packets that arrived in vain (duplicates; for go-back-N also those dropped out of order); min_host_frac: the least-served receiver")
	return res, nil
}
