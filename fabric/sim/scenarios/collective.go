package scenarios

import (
	"fmt"
	"math"
	"slices"

	"github.com/metaroce/metaroce/collectives/sched"
	"github.com/metaroce/metaroce/internal/bytesize"
)

// MaxCollectiveBytes bounds Options.Sizes (1 GiB per rank, the largest
// size the published comparison covers); the simulator carries no payload,
// so the bound is one of run time, not memory.
const MaxCollectiveBytes = 1 << 30

// checkRows rejects row options the scenario name does not take, and rows
// the collective scenario cannot run.
func (o *Options) checkRows(name string) error {
	if name != "collective" {
		if o.Sizes != nil || o.Losses != nil || o.Ops != nil {
			return fmt.Errorf("%w: sizes, losses and operations apply to the collective scenario, not %q", ErrUsage, name)
		}
		return nil
	}
	for i, s := range o.Sizes {
		if s == 0 || s%1024 != 0 || s > MaxCollectiveBytes {
			return fmt.Errorf("%w: collective size %d: want a multiple of 1 KiB from 1 KiB to %d bytes", ErrUsage, s, MaxCollectiveBytes)
		}
		if slices.Contains(o.Sizes[:i], s) {
			return fmt.Errorf("%w: collective size %d given twice", ErrUsage, s)
		}
	}
	for i, l := range o.Losses {
		if !(l >= 0 && l < 100) {
			return fmt.Errorf("%w: collective loss %g%%: want a percentage in [0, 100)", ErrUsage, l)
		}
		if slices.Contains(o.Losses[:i], l) {
			return fmt.Errorf("%w: collective loss %g%% given twice", ErrUsage, l)
		}
	}
	for i, op := range o.Ops {
		if op != "allreduce" && op != "alltoall" {
			return fmt.Errorf("%w: collective operation %q: want allreduce or alltoall", ErrUsage, op)
		}
		if slices.Contains(o.Ops[:i], op) {
			return fmt.Errorf("%w: collective operation %q given twice", ErrUsage, op)
		}
	}
	return nil
}

// collectiveScenario: all-reduce and all-to-all completion time and bus
// bandwidth (nccl-tests formulas) on a leaf/spine fabric, MetaRoCE beside
// RoCEv2 with PFC and DCQCN and lossy RoCEv2. The hosts run the plans the
// collectives run for real (collectives/sched), step by step as the real
// executor does (planJob).
func collectiveScenario(r *runner) (*Result, error) {
	o := r.o
	leaves, spines, per := 8, 8, 8
	sizes := []uint64{1 << 20, 16 << 20}
	if o.Smoke {
		leaves, spines, per = 4, 4, 4
		sizes = []uint64{256 << 10, 2 << 20}
	}
	if o.Sizes != nil {
		sizes = o.Sizes
	}
	n := leaves * per
	res := &Result{}
	// As the collectives do by default, the endpoints get no fixed bound on
	// concurrent senders: before each plan a rank declares the peers that
	// plan can have sending to it at once (sched.Plan.RecvPeers).
	o.ConcurrentSenders = 0
	// NCCL over RoCEv2 writes a message only into a receive the peer has
	// announced (a CTS per receive), as MetaRoCE sends only into a
	// receive its RECV_READY announced (docs/spec.md §3.4).
	o.RoCERendezvous = true
	// The collectives are told that the ranks come in groups of a leaf's
	// hosts (collectives.Config.GroupSize), as a job launched one rank per
	// host in leaf order would be, so the all-reduce takes the
	// hierarchical ring where that is faster (sched.ChooseAlgorithm).
	c := o.fabric(leaves, spines, per, 1)
	res.fabricParams(o, c)
	res.param("hosts", n)
	tb := res.table("collectives", "op", "size_bytes", "loss_pct", "protocol", "time_us", "busbw_gbit_s", "status")
	// The plot follows the largest size across loss rates, one line per
	// operation and protocol.
	big := res.table("largest_vs_loss", "op", "loss_pct", "protocol", "busbw_gbit_s")
	res.Plots = append(res.Plots, PlotSpec{Table: "largest_vs_loss", X: "loss_pct", Y: "busbw_gbit_s", Series: "op+protocol",
		Title: "bus bandwidth of the largest size vs random loss"})
	// Random loss per link such that a cross-spine path (four links) loses
	// the table's percentage end to end, as in the loss scenario.
	losses := []float64{0, 0.1, 1}
	if o.Smoke {
		losses = []float64{0, 1}
	}
	if o.Losses != nil {
		losses = o.Losses
	}
	ops := []string{"allreduce", "alltoall"}
	if o.Ops != nil {
		ops = o.Ops
	}
	// With more than two sizes, bus bandwidth against size (the
	// nccl-tests view), one line per operation, loss and protocol.
	var sweep *Table
	if len(sizes) > 2 {
		sweep = res.table("busbw_vs_size", "op", "size_mib", "loss_pct", "protocol", "busbw_gbit_s")
		res.Plots = append(res.Plots, PlotSpec{Table: "busbw_vs_size", X: "size_mib", Y: "busbw_gbit_s", Series: "op+loss_pct+protocol",
			Title: "bus bandwidth vs size per rank", LogX: true})
	}
	protos := []string{MetaRoCE, RoCEv2PFC, RoCEv2}
	r.total = len(ops) * len(sizes) * len(losses) * len(protos)
	r.even = len(sizes) == 1
	for _, op := range ops {
		for _, size := range sizes {
			for _, lp := range losses {
				c.Loss = 1 - math.Pow(1-lp/100, 0.25)
				for _, proto := range protos {
					s, err := build(o, c, proto)
					if err != nil {
						return nil, err
					}
					coll := sched.AllReduce
					if op == "alltoall" {
						coll = sched.AllToAll
					}
					factor := sched.BusBWFactor(coll, n)
					plans, err := schedPlans(coll, n, size, schedChannels, per)
					if err != nil {
						return nil, err
					}
					j := newPlanJob(s, plans)
					r.label = fmt.Sprintf("%s %s %g%% %s", op, bytesize.Format(int64(size)), lp, proto)
					if err := r.runApps(s, j.apps(), 2_000_000_000, j.done); err != nil {
						return nil, err
					}
					status := "ok"
					var us, bw float64
					switch {
					case j.Err != nil:
						status = "error: " + j.Err.Error()
					case j.Finished < n:
						status = "incomplete"
					default:
						t := float64(j.End - j.Start)
						us = t / 1e3
						bw = float64(size) / t * factor * 8 // Gb/s
					}
					tb.Add(op, size, lp, proto, us, bw, status)
					if size == sizes[len(sizes)-1] {
						big.Add(op, lp, proto, bw)
					}
					if sweep != nil {
						sweep.Add(op, float64(size)/(1<<20), lp, proto, bw)
					}
				}
			}
		}
	}
	return res, nil
}
