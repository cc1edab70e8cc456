package main

import (
	"context"
	"encoding/binary"
	"fmt"
	"github.com/metaroce/metaroce/internal/bytesize"
	"math"
	"os"
	"time"

	"github.com/metaroce/metaroce/collectives/reduce"
	"github.com/metaroce/metaroce/collectives/sched"
)

// call is one collective invocation. Count has NCCL's meaning per
// collective (sched.Config.Count). In place, the call gets recv alone: the
// whole buffer of sched's in-place layouts (n×Count elements for
// reduce-scatter and all-gather), with send nil.
type call struct {
	Coll    sched.Collective
	Count   int64
	DType   reduce.DType
	Op      reduce.Op
	Root    int
	InPlace bool
}

// comm is what the sweep needs of one rank's communicator. The host backend
// adapts collectives.Comm to it, the rccl backend an RCCL communicator;
// tests use an in-memory reference.
type comm interface {
	Rank() int
	Size() int
	Collective(ctx context.Context, k call, send, recv []byte) error
	Barrier(ctx context.Context) error
}

// mirrored is implemented by comms whose collectives run on their own copy
// of the sweep's buffers (GPU memory): Bind allocates the copies once, and
// the sweep calls Upload after writing inputs and Download before checking
// outputs, outside the timed loop. Upload and Download cover the first n
// bytes of both buffers.
type mirrored interface {
	Bind(bufs rankBuffers) error
	Upload(n int64) error
	Download(n int64) error
}

// flusher is implemented by comms whose collectives return before they
// complete (a GPU stream): Flush waits for them, and the sweep calls it at
// the end of every batch, inside the timed interval.
type flusher interface {
	Flush(ctx context.Context) error
}

// sweep is the per-rank description of one table's runs.
type sweep struct {
	Coll    sched.Collective
	Sizes   []int64
	DTypes  []reduce.DType
	Ops     []reduce.Op
	Iters   int
	Warmup  int
	Check   int
	Average int
	Root    int
	// Timeout bounds each batch of Iters collectives, per collective.
	Timeout time.Duration
}

// newSweep builds the sweep of a parsed command line.
func newSweep(o *options) sweep {
	sizes, _ := sweepSizes(o.MinBytes, o.MaxBytes, o.StepFactor, o.StepBytes) // validated by parseOptions
	ops := o.Ops
	if !o.Collective.Reduces() {
		ops = []reduce.Op{reduce.OpSum}
	}
	return sweep{Coll: o.Collective, Sizes: sizes, DTypes: o.DTypes, Ops: ops,
		Iters: o.Iters, Warmup: o.Warmup, Check: o.Check, Average: o.Average,
		Root: o.Root, Timeout: o.Timeout}
}

// points is the number of rows the sweep prints at most (for progress).
func (s sweep) points() int { return len(s.Sizes) * len(s.DTypes) * len(s.Ops) }

// fits returns how many rows the sweep prints over n ranks, and the size and
// type pairs it skips because they hold less than one element per rank's
// block (reduce-scatter, all-gather and all-to-all); size 0 is no such
// pair (tooSmall).
func (s sweep) fits(n int) (rows int, skipped []string) {
	for _, size := range s.Sizes {
		for _, dt := range s.DTypes {
			if tooSmall(layoutFor(s.Coll, size, dt.Size(), n), size) {
				skipped = append(skipped, fmt.Sprintf("%s %v", bytesize.Format(size), dt))
				continue
			}
			rows += len(s.Ops)
		}
	}
	return rows, skipped
}

// plottable reports whether the sweep prints a row of a size above 0 over
// n ranks: --plot draws sizes on a logarithmic axis, which has no place
// for size 0, and a sweep without such a row leaves it nothing to draw.
func (s sweep) plottable(n int) bool {
	for _, size := range s.Sizes {
		for _, dt := range s.DTypes {
			if size > 0 && !tooSmall(layoutFor(s.Coll, size, dt.Size(), n), size) {
				return true
			}
		}
	}
	return false
}

// tooSmall reports whether the sweep skips size, whose call over the ranks
// is l: a size that holds no whole element (per rank's block, for the
// blocked collectives). Size 0 is no such size: it runs with a count of 0,
// as nccl-tests' -b 0 does, and times the collective's fixed cost.
func tooSmall(l layout, size int64) bool { return l.Count == 0 && size > 0 }

// sweepResult is what rank 0 learns from a sweep.
type sweepResult struct {
	OutOfBounds int64
}

// rankBuffers are one rank's two buffers, each large enough for the largest
// call of the sweep plus the guard area.
type rankBuffers struct {
	a, b []byte
}

func (s sweep) allocate(n int) rankBuffers {
	need := s.largest(n)
	return rankBuffers{a: make([]byte, need+guardBytes), b: make([]byte, need+guardBytes)}
}

// largest is the byte size of the sweep's largest call over n ranks.
func (s sweep) largest(n int) int64 {
	var need int64
	for _, size := range s.Sizes {
		for _, dt := range s.DTypes {
			need = max(need, layoutFor(s.Coll, size, dt.Size(), n).Bytes())
		}
	}
	return need
}

// rankMemory estimates the memory one rank of the sweep holds at its
// largest call over n ranks, in bytes: its two buffers, and half a buffer
// more for the communicator's scratch (two blocks in flight) and the
// transport's queues.
func (s sweep) rankMemory(n int) int64 {
	l := s.largest(n)
	return 2*(l+guardBytes) + l/2
}

// measurement is one rank's outcome of one half of a row.
type measurement struct {
	us    float64 // mean time per collective
	wrong int64   // -1 when unchecked
	oob   int64
}

// run executes the sweep on one rank. Every rank must call it with the same
// sweep. On rank 0, onStart (when set) receives each row as it starts,
// before its first collective, with its size, count, type, operation and
// root but no figures; onRow (when set) receives each row with its figures
// once all ranks agree on them.
func (s sweep) run(ctx context.Context, c comm, onStart, onRow func(Row)) (sweepResult, error) {
	n, me := c.Size(), c.Rank()
	if s.Coll == sched.Broadcast && s.Root >= n {
		return sweepResult{}, fmt.Errorf("root %d is not a rank of %d", s.Root, n)
	}
	bufs := s.allocate(n)
	var res sweepResult
	mirror, _ := c.(mirrored)
	if mirror != nil {
		if err := mirror.Bind(bufs); err != nil {
			return res, err
		}
	}
	factor := sched.BusBWFactor(s.Coll, n)
	root := -1
	if s.Coll == sched.Broadcast {
		root = s.Root
	}
	for _, size := range s.Sizes {
		for _, dt := range s.DTypes {
			l := layoutFor(s.Coll, size, dt.Size(), n)
			if tooSmall(l, size) {
				continue // too small for this collective over n ranks
			}
			for _, op := range s.Ops {
				// An interrupted run stops between rows, on every rank
				// that sees it, rather than start a row whose
				// collectives may complete before they look at ctx.
				if err := ctx.Err(); err != nil {
					return res, err
				}
				row := Row{Bytes: l.Bytes(), Count: l.Count, Type: dt.String(),
					RedOp: redOpName(s.Coll, op), Root: root}
				if me == 0 && onStart != nil {
					onStart(row)
				}
				var reduced []byte
				in := inputs{dt: dt, op: op, n: n, reduces: s.Coll.Reduces()}
				if in.reduces && s.Check > 0 {
					var err error
					if reduced, err = in.reduced(); err != nil {
						return res, err
					}
				}
				var halves [2]measurement
				for k, inPlace := range []bool{false, true} {
					m, err := s.measure(ctx, c, bufs, l, in, inPlace, reduced)
					if err != nil {
						where := "out-of-place"
						if inPlace {
							where = "in-place"
						}
						return res, fmt.Errorf("%v %s %s %d bytes %s: %w", s.Coll, dt, redOpName(s.Coll, op), l.Bytes(), where, err)
					}
					halves[k] = m
				}
				agg, err := s.aggregate(ctx, c, halves)
				if err != nil {
					return res, fmt.Errorf("gathering results of %d bytes: %w", l.Bytes(), err)
				}
				res.OutOfBounds += agg.oob
				if me != 0 || onRow == nil {
					continue
				}
				for k, m := range []*Measure{&row.OutOfPlace, &row.InPlace} {
					m.TimeUs = agg.us[k]
					if agg.us[k] > 0 {
						m.AlgBW = float64(l.Bytes()) / (agg.us[k] * 1e3)
					}
					m.BusBW = m.AlgBW * factor
					m.Wrong = agg.wrong[k]
				}
				onRow(row)
			}
		}
	}
	return res, nil
}

// measure runs warm-up, timed and checked iterations of one call shape.
func (s sweep) measure(ctx context.Context, c comm, bufs rankBuffers, l layout, in inputs, inPlace bool, reduced []byte) (measurement, error) {
	me, dt, op := c.Rank(), in.dt, in.op
	// send and recv are where the input goes and the result lands; argSend
	// and argRecv what the collective is given.
	var send, recv, guard, argSend, argRecv []byte
	if inPlace {
		send, recv = inPlaceViews(s.Coll, l, bufs.a, me)
		argRecv = bufs.a[:l.Bytes()]
		guard = bufs.a[l.Bytes() : l.Bytes()+guardBytes]
	} else {
		send, recv = bufs.a[:l.SendBytes], bufs.b[:l.RecvBytes]
		argSend, argRecv = send, recv
		guard = bufs.b[l.RecvBytes : l.RecvBytes+guardBytes]
	}
	input := in.table(me)
	es := dt.Size()
	fillPattern(send, input, es, 0)
	mirror, _ := c.(mirrored)
	span := max(l.Bytes()+guardBytes, 0)
	if mirror != nil {
		if err := mirror.Upload(span); err != nil {
			return measurement{}, err
		}
	}
	k := call{Coll: s.Coll, Count: l.Count, DType: dt, Op: op, Root: s.Root, InPlace: inPlace}
	run1 := func(ctx context.Context) error { return c.Collective(ctx, k, argSend, argRecv) }
	batch := func(iters int) error {
		bctx, cancel := context.WithTimeout(ctx, batchTimeout(s.Timeout, iters))
		defer cancel()
		for i := 0; i < iters; i++ {
			if err := run1(bctx); err != nil {
				return err
			}
		}
		if f, ok := c.(flusher); ok {
			return f.Flush(bctx)
		}
		return nil
	}
	if err := batch(s.Warmup); err != nil {
		return measurement{}, fmt.Errorf("warm-up: %w", err)
	}
	bctx, cancel := context.WithTimeout(ctx, s.Timeout)
	err := c.Barrier(bctx)
	cancel()
	if err != nil {
		return measurement{}, fmt.Errorf("barrier: %w", err)
	}
	t0 := time.Now()
	if err := batch(s.Iters); err != nil {
		return measurement{}, err
	}
	m := measurement{us: float64(time.Since(t0).Nanoseconds()) / 1e3 / float64(s.Iters), wrong: -1}
	if s.Check == 0 {
		return m, nil
	}
	m.wrong = 0
	for k := 0; k < s.Check; k++ {
		fillSentinel(argRecv) // in place, the input is written over it below
		fillSentinel(guard)
		fillPattern(send, input, es, 0)
		if mirror != nil {
			if err := mirror.Upload(span); err != nil {
				return m, err
			}
		}
		if err := batch(1); err != nil {
			return m, fmt.Errorf("checked run: %w", err)
		}
		if mirror != nil {
			if err := mirror.Download(span); err != nil {
				return m, err
			}
		}
		m.wrong += checkOutput(s.Coll, l, recv, in, me, s.Root, reduced)
		m.oob += countClobbered(guard)
	}
	return m, nil
}

// batchTimeout is the deadline of a batch of iters collectives (at least
// one) that may take per each: per × iters, held at the largest
// time.Duration where the product would overflow. A timeout long enough to
// mean "none" (-T 1000000h) would otherwise wrap around to a deadline in
// the past, and the batch would fail at once as if a peer had stopped.
func batchTimeout(per time.Duration, iters int) time.Duration {
	k := time.Duration(max(iters, 1))
	if per > math.MaxInt64/k {
		return math.MaxInt64
	}
	return per * k
}

// aggregated is one row's figures combined over the ranks.
type aggregated struct {
	us    [2]float64
	wrong [2]int64
	oob   int64
}

// aggregateWords is the number of float64 values each rank contributes.
const aggregateWords = 5

// aggregate gathers every rank's measurements with an all-gather of float64
// and combines them on every rank: times by the -a mode (nccl-tests: 0 rank 0,
// 1 average, 2 minimum, 3 maximum), wrong and out-of-bounds counts summed.
func (s sweep) aggregate(ctx context.Context, c comm, h [2]measurement) (aggregated, error) {
	n := c.Size()
	send := make([]byte, aggregateWords*8)
	recv := make([]byte, n*aggregateWords*8)
	vals := []float64{h[0].us, h[1].us, float64(h[0].wrong), float64(h[1].wrong), float64(h[0].oob + h[1].oob)}
	for i, v := range vals {
		binary.NativeEndian.PutUint64(send[8*i:], math.Float64bits(v))
	}
	cctx, cancel := context.WithTimeout(ctx, s.Timeout)
	defer cancel()
	if err := c.Collective(cctx, call{Coll: sched.AllGather, Count: aggregateWords, DType: reduce.Float64}, send, recv); err != nil {
		return aggregated{}, err
	}
	get := func(r, i int) float64 {
		return math.Float64frombits(binary.NativeEndian.Uint64(recv[8*(r*aggregateWords+i):]))
	}
	var a aggregated
	for k := 0; k < 2; k++ {
		a.us[k] = combineTimes(s.Average, n, func(r int) float64 { return get(r, k) })
		a.wrong[k] = -1
		if h[k].wrong >= 0 {
			a.wrong[k] = 0
			for r := 0; r < n; r++ {
				a.wrong[k] += int64(get(r, 2+k))
			}
		}
	}
	for r := 0; r < n; r++ {
		a.oob += int64(get(r, 4))
	}
	return a, nil
}

// combineTimes applies the -a mode to the n ranks' times t(r).
func combineTimes(mode, n int, t func(r int) float64) float64 {
	switch mode {
	case 0:
		return t(0)
	case 2, 3:
		v := t(0)
		for r := 1; r < n; r++ {
			if mode == 2 {
				v = math.Min(v, t(r))
			} else {
				v = math.Max(v, t(r))
			}
		}
		return v
	}
	var sum float64
	for r := 0; r < n; r++ {
		sum += t(r)
	}
	return sum / float64(n)
}

// rankInfo identifies a rank's process for the "Using devices" lines.
type rankInfo struct {
	Pid  int
	Host string
}

// rankInfoBytes is the size of one rank's record in gatherRankInfo.
const rankInfoBytes = 64

// gatherRankInfo collects every rank's process id and host name (truncated to
// 60 bytes) with one all-gather.
func gatherRankInfo(ctx context.Context, c comm, timeout time.Duration) ([]rankInfo, error) {
	host, _ := os.Hostname()
	send := make([]byte, rankInfoBytes)
	binary.LittleEndian.PutUint32(send, uint32(os.Getpid()))
	copy(send[4:], host)
	recv, err := allGatherBytes(ctx, c, send, timeout)
	if err != nil {
		return nil, err
	}
	out := make([]rankInfo, c.Size())
	for r := range out {
		rec := recv[r*rankInfoBytes : (r+1)*rankInfoBytes]
		h := rec[4:]
		for i, b := range h {
			if b == 0 {
				h = h[:i]
				break
			}
		}
		out[r] = rankInfo{Pid: int(binary.LittleEndian.Uint32(rec)), Host: string(h)}
	}
	return out, nil
}
