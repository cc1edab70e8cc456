package scenarios

import "fmt"

// planesScenario: aggregate throughput of many long flows as planes are
// added (every host has one 400G port per plane).
func planesScenario(r *runner) (*Result, error) {
	o := r.o
	planes := []int{1, 2, 4, 8}
	leaves, spines, per := 4, 4, 8
	dur := int64(300_000)
	peers := 8
	if o.Smoke {
		planes = []int{1, 2, 4}
		leaves, spines, per = 2, 2, 4
		dur = 200_000
		peers = 4
	}
	n := leaves * per
	res := &Result{}
	res.fabricParams(o, o.fabric(leaves, spines, per, 1))
	res.param("hosts", n)
	res.param("peers_per_host", peers)
	res.param("duration_ns", dur)
	tb := res.table("throughput", "planes", "protocol", "connections", "agg_tbps", "frac_of_capacity")
	res.Plots = append(res.Plots, PlotSpec{Table: "throughput", X: "planes", Y: "agg_tbps", Series: "protocol",
		Title: "aggregate throughput vs planes"})
	for _, p := range planes {
		for _, proto := range []string{MetaRoCE, RoCEv2} {
			c := o.fabric(leaves, spines, per, p)
			s, err := build(o, c, proto)
			if err != nil {
				return nil, err
			}
			var pairs [][2]int
			for h := 0; h < n; h++ {
				for k := 0; k < peers; k++ {
					pairs = append(pairs, [2]int{h, (h + per + k) % n})
				}
			}
			const msg = 256 << 10
			perFlow := float64(dur) * payloadRate(o, c) * float64(p) / 1e9 / float64(peers)
			j := newJob(s, streams(n, pairs, msg, int(perFlow/msg)+8))
			warm := dur / 5
			var got float64
			j.onRecv = func(now int64, h, from int, b uint64) {
				if now-j.Start >= warm {
					got += float64(b)
				}
			}
			r.run(s, j, 1_000_000_000, func() bool { return j.Start >= 0 && s.Now() >= j.Start+dur })
			if j.Start < 0 {
				return nil, fmt.Errorf("planes %d %s: connections never came up: %v", p, proto, j.Err)
			}
			secs := float64(dur-warm) / 1e9
			tb.Add(p, proto, len(pairs), got*8/secs/1e12, got/secs/(payloadRate(o, c)*float64(p*n)))
		}
	}
	return res, nil
}
