package scenarios

import (
	"fmt"
	"math"

	"github.com/metaroce/metaroce/fabric/sim"
)

// lossScenario: goodput of four long cross-spine flows under uniform random
// loss, MetaRoCE beside lossy RoCEv2 (go-back-N). Loss is set per link so
// that the end-to-end data loss is the table's percentage. Goodput is the
// payload placed at the receivers in the window (goodputMeter: the first
// tenth of the run discarded, and the last link delay, whose packets would
// arrive after the run), per flow in Gb/s and as a fraction of what a
// receiver's link carries in the protocol's own full DATA packets, so at
// most 1.
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
	res.param("goodput_window_ns", dur-dur/10-base.LinkDelay)
	tb := res.table("goodput", "loss_pct", "protocol", "goodput_gbit_s", "goodput_frac", "ideal_sr_frac")
	res.Plots = append(res.Plots, PlotSpec{Table: "goodput", X: "loss_pct", Y: "goodput_frac", Series: "protocol",
		Title: "goodput vs random loss (fraction of line-rate payload)", Fraction: true})
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
			count := int(float64(dur)*payloadRate(o, c, proto)/1e9/msg) + 16
			j := newJob(s, streams(8, pairs, msg, count))
			g := newGoodputMeter(s, j, dur/10, dur)
			s.OnRx = func(_ int64, _ *sim.Host, pk *sim.Packet) { g.observe(pk) }
			r.label = fmt.Sprintf("%g%% loss %s", lp, proto)
			if err := r.run(s, j, 1_000_000_000, func() bool { return j.Start >= 0 && s.Now() >= j.Start+dur }); err != nil {
				return nil, err
			}
			if j.Start < 0 {
				return nil, fmt.Errorf("loss %.1f%% %s: connections never came up: %v", lp, proto, j.Err)
			}
			if j.Refused != nil {
				return nil, fmt.Errorf("loss %.1f%% %s: %w", lp, proto, j.Refused)
			}
			tb.Add(lp, proto, g.gbps(len(pairs)), g.frac(len(pairs), payloadRate(o, c, proto)), 1-lp/100)
		}
	}
	res.Notes = append(res.Notes, "goodput: payload placed at the receivers, of the packets their links serialised within the window; goodput_frac: of what a link carries in full DATA packets of the protocol (4096 of 4218 wire bytes for MetaRoCE, of 4202 for RoCEv2 at the default MTU), at most 1")
	return res, nil
}
