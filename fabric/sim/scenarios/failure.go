package scenarios

import "fmt"

// failureScenario: long cross-leaf flows while a spine–leaf link fails
// (one plane) or a whole plane fails (two planes), both for good, mid-run.
// Reports throughput over time and the time until throughput settles.
func failureScenario(r *runner) (*Result, error) {
	o := r.o
	leaves, spines, per := 4, 4, 8
	dur := int64(3_000_000)
	if o.Smoke {
		leaves, spines, per = 2, 2, 4
		dur = 1_500_000
	}
	n := leaves * per
	failAt := dur / 3
	const bin = 50_000
	res := &Result{}
	res.fabricParams(o, o.fabric(leaves, spines, per, 1))
	res.param("hosts", n)
	res.param("duration_ns", dur)
	res.param("fail_at_ns", failAt)
	res.param("bin_ns", bin)
	sum := res.table("summary", "case", "protocol", "before_gbps", "after_gbps", "after_frac", "recovery_us", "conn_errors")
	ts := res.table("timeseries", "case", "protocol", "t_us", "gbps")
	res.Plots = append(res.Plots, PlotSpec{Table: "timeseries", X: "t_us", Y: "gbps", Series: "case+protocol",
		Title: "throughput around a failure"})
	for _, kase := range []string{"spine-link", "plane"} {
		planes := 1
		if kase == "plane" {
			planes = 2
		}
		for _, proto := range []string{MetaRoCE, RoCEv2} {
			c := o.fabric(leaves, spines, per, planes)
			s, err := build(o, c, proto)
			if err != nil {
				return nil, err
			}
			var pairs [][2]int
			for h := 0; h < n; h++ {
				pairs = append(pairs, [2]int{h, (h + per) % n})
			}
			const msg = 64 << 10
			perFlow := float64(dur) * payloadRate(o, c) * float64(planes) / 1e9
			j := newJob(s, streams(n, pairs, msg, int(perFlow/msg)+8))
			thr := &series{bin: bin}
			errs := 0
			j.onRecv = func(now int64, h, from int, b uint64) { thr.add(now-j.Start, float64(b)) }
			armed := false
			r.run(s, j, 1_000_000_000, func() bool {
				if j.Start >= 0 && !armed {
					armed = true
					var err error
					if kase == "plane" {
						err = s.FailPlane(1, j.Start+failAt, 0)
					} else {
						err = s.FailSpineLink(0, 0, 0, j.Start+failAt, 0)
					}
					if err != nil {
						panic(err)
					}
				}
				return j.Start >= 0 && s.Now() >= j.Start+dur
			})
			if j.Start < 0 {
				return nil, fmt.Errorf("failure %s %s: connections never came up: %v", kase, proto, j.Err)
			}
			errs = j.errs
			nb := int(dur / bin)
			g := make([]float64, nb)
			for b := 0; b < nb; b++ {
				if b < len(thr.vals) {
					g[b] = thr.vals[b] * 8 / bin
				}
				ts.Add(kase, proto, float64(b*bin)/1e3, g[b])
			}
			fb := int(failAt / bin)
			mean := func(v []float64) float64 {
				var t float64
				for _, x := range v {
					t += x
				}
				return t / float64(max(len(v), 1))
			}
			before := mean(g[1:fb])
			after := mean(g[nb-nb/5:])
			rec := -1.0
			for b := nb - 1; b >= fb; b-- {
				if g[b] < 0.9*after {
					if b < nb-1 {
						rec = float64((b+1)*bin-int(failAt)) / 1e3
					}
					break
				}
				if b == fb {
					rec = 0
				}
			}
			sum.Add(kase, proto, before, after, after/max(before, 1e-9), rec, errs)
		}
	}
	res.Notes = append(res.Notes, "recovery_us: from the failure until throughput stays ≥ 90% of its final level; -1: never")
	return res, nil
}
