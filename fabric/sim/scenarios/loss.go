package scenarios

import (
	"fmt"
	"math"
)

// lossScenario: goodput of four long cross-spine flows under uniform random
// loss, MetaRoCE beside lossy RoCEv2 (go-back-N). Loss is set per link so
// that the end-to-end data loss is the table's percentage.
func lossScenario(r *runner) (*Result, error) {
	o := r.o
	losses := []float64{0, 0.1, 0.5, 1, 2, 5, 10}
	dur := int64(2_000_000)
	if o.Smoke {
		losses = []float64{0, 1, 5}
		dur = 500_000
	}
	res := &Result{}
	base := o.fabric(8, 1, 1, 1)
	res.fabricParams(o, base)
	res.param("flows", 4)
	res.param("duration_ns", dur)
	tb := res.table("goodput", "loss_pct", "protocol", "goodput_gbit_s", "goodput_frac", "ideal_sr_frac")
	res.Plots = append(res.Plots, PlotSpec{Table: "goodput", X: "loss_pct", Y: "goodput_frac", Series: "protocol",
		Title: "goodput vs random loss (fraction of line-rate payload)"})
	const msg = 256 << 10
	protos := []string{MetaRoCE, RoCEv2}
	r.total, r.even = len(losses)*len(protos), true
	for _, lp := range losses {
		for _, proto := range protos {
			c := base
			c.Loss = 1 - math.Pow(1-lp/100, 0.25)
			s, err := build(o, c, proto)
			if err != nil {
				return nil, err
			}
			pairs := [][2]int{{0, 4}, {1, 5}, {2, 6}, {3, 7}}
			count := int(float64(dur)*payloadRate(o, c)/1e9/msg) + 16
			j := newJob(s, streams(8, pairs, msg, count))
			warm := dur / 10
			var got float64
			j.onRecv = func(now int64, h, from int, n uint64) {
				if now-j.Start >= warm {
					got += float64(n)
				}
			}
			r.label = fmt.Sprintf("%g%% loss %s", lp, proto)
			r.run(s, j, 1_000_000_000, func() bool { return j.Start >= 0 && s.Now() >= j.Start+dur })
			if j.Start < 0 {
				return nil, fmt.Errorf("loss %.1f%% %s: connections never came up: %v", lp, proto, j.Err)
			}
			if j.Refused != nil {
				return nil, fmt.Errorf("loss %.1f%% %s: %w", lp, proto, j.Refused)
			}
			gbps := got * 8 / float64(dur-warm) / 4
			frac := got / (float64(dur-warm) / 1e9) / 4 / payloadRate(o, c)
			tb.Add(lp, proto, gbps, frac, 1-lp/100)
		}
	}
	return res, nil
}
