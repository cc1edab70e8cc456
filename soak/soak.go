package soak

import (
	"context"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"net"
	"os"
	"runtime"
	"sync"
	"time"

	"github.com/metaroce/metaroce/collectives"
	"github.com/metaroce/metaroce/collectives/reduce"
	"github.com/metaroce/metaroce/collectives/sched"
)

// Options parameterise a soak run. Zero fields take the defaults.
type Options struct {
	// Duration is how long new rounds are started; the last round runs to
	// its end. Default 10 s.
	Duration time.Duration
	// Ranks is the number of in-process ranks. Default 4.
	Ranks int
	// Seed seeds every random choice; the same seed gives the same rounds.
	// Default 1.
	Seed uint64
	// OpsPerRound is the number of collectives per round. Default 24.
	OpsPerRound int
	// MaxCount bounds the element count of one collective. Default 1<<17.
	MaxCount int
	// Logf receives one line per round; nil discards them.
	Logf func(format string, args ...any)
}

func (o Options) withDefaults() Options {
	if o.Duration <= 0 {
		o.Duration = 10 * time.Second
	}
	if o.Ranks <= 0 {
		o.Ranks = 4
	}
	if o.Seed == 0 {
		o.Seed = 1
	}
	if o.OpsPerRound < 2 {
		o.OpsPerRound = 24
	}
	if o.MaxCount <= 0 {
		o.MaxCount = 1 << 17
	}
	if o.Logf == nil {
		o.Logf = func(string, ...any) {}
	}
	return o
}

// Fault is the fault setting of one round.
type Fault struct {
	Name      string
	DropProb  float64 // datagram loss at every sender
	Blackhole []int   // source-port indexes whose datagrams vanish
	Kill      bool    // one rank leaves part-way through
}

// faults is the rotation of settings; kill rounds come up one time in five.
var faults = []Fault{
	{Name: "clean"},
	{Name: "loss 0.1%", DropProb: 0.001},
	{Name: "loss 1%", DropProb: 0.01},
	{Name: "blackhole 1 port", Blackhole: []int{1}},
	{Name: "kill a rank", Kill: true},
	{Name: "loss 5%", DropProb: 0.05},
	{Name: "blackhole 2 ports + loss 1%", Blackhole: []int{0, 2}, DropProb: 0.01},
	{Name: "clean"},
	{Name: "loss 1%", DropProb: 0.01},
	{Name: "kill a rank", Kill: true},
}

// Report is what a run did and found. Corrupted, Unexpected, MissedKills
// and the leaks must all be zero for a healthy build.
type Report struct {
	Elapsed     time.Duration
	Rounds      int
	FaultRounds int // rounds with loss or blackholes
	KillRounds  int
	Ops         uint64 // collectives completed and checked, summed over ranks
	Bytes       uint64 // output bytes of those collectives, summed over ranks
	// From the ranks' connection counters, summed over every rank and peer.
	PacketsSent, Retransmits, Lost, Timeouts, PathChanges uint64

	Surfaced    int // errors reported by survivors of kill rounds (expected)
	MissedKills int // survivors of a kill round that saw no error
	Unexpected  int // errors in rounds without a kill
	Corrupted   int // results that differ from the reference
	// Goroutines and file descriptors before the first and after the last
	// round (after a grace period for closing sockets and loops).
	GoroutinesBefore, GoroutinesAfter int
	FDsBefore, FDsAfter               int
	FirstErrors                       []string // up to 8 unexpected errors
}

// Healthy reports whether the run found nothing wrong.
func (r *Report) Healthy() bool {
	return r.Corrupted == 0 && r.Unexpected == 0 && r.MissedKills == 0 &&
		r.GoroutinesAfter <= r.GoroutinesBefore && r.FDsAfter <= r.FDsBefore
}

func (r *Report) String() string {
	return fmt.Sprintf("soak: %v, %d rounds (%d with loss/blackholes, %d kill-a-rank)\n"+
		"  operations %d, output bytes %d (%.1f MiB/s)\n"+
		"  packets sent %d, retransmits %d, declared lost %d, tail-loss timeouts %d, path moves %d\n"+
		"  errors surfaced by survivors of killed ranks %d, survivors that missed it %d\n"+
		"  unexpected errors %d, corrupted results %d\n"+
		"  goroutines %d -> %d, open fds %d -> %d, healthy %v",
		r.Elapsed.Round(time.Millisecond), r.Rounds, r.FaultRounds, r.KillRounds,
		r.Ops, r.Bytes, float64(r.Bytes)/(1<<20)/max(r.Elapsed.Seconds(), 1e-9),
		r.PacketsSent, r.Retransmits, r.Lost, r.Timeouts, r.PathChanges,
		r.Surfaced, r.MissedKills, r.Unexpected, r.Corrupted,
		r.GoroutinesBefore, r.GoroutinesAfter, r.FDsBefore, r.FDsAfter, r.Healthy())
}

var colls = []sched.Collective{sched.AllReduce, sched.ReduceScatter, sched.AllGather, sched.AllToAll, sched.Broadcast, sched.SendRecv}

// op is one collective of a round, the same on every rank.
type op struct {
	coll  sched.Collective
	dt    reduce.DType
	red   reduce.Op
	count int
	salt  uint32
}

func (o op) String() string {
	return fmt.Sprintf("%v %v %v count %d", o.coll, o.dt, o.red, o.count)
}

// plan draws a round's collectives.
func plan(rng *rand.Rand, n, maxCount int) []op {
	ops := make([]op, n)
	for i := range ops {
		o := op{
			coll: colls[rng.IntN(len(colls))],
			dt:   reduce.AllDTypes()[rng.IntN(len(reduce.AllDTypes()))],
			red:  reduce.Op(rng.IntN(4)), // sum, prod, max, min: exact in every type
			salt: rng.Uint32(),
		}
		// Log-uniform sizes: as many small collectives as large ones.
		o.count = 1 + int(float64(maxCount)*pow2(-16*rng.Float64()))
		ops[i] = o
	}
	return ops
}

func pow2(x float64) float64 { return math.Exp2(x) }

// Run soaks for opt.Duration (or until ctx ends) and returns the report.
// It returns an error only when a round cannot start at all.
func Run(ctx context.Context, opt Options) (*Report, error) {
	opt = opt.withDefaults()
	warmNetpoller()
	rep := &Report{GoroutinesBefore: runtime.NumGoroutine(), FDsBefore: openFDs()}
	start := time.Now()
	rng := rand.New(rand.NewPCG(opt.Seed, 0x50a4))
	for i := 0; time.Since(start) < opt.Duration && ctx.Err() == nil; i++ {
		f := faults[i%len(faults)]
		if err := round(ctx, rep, opt, f, rng.Uint64()); err != nil {
			return rep, err
		}
	}
	rep.Elapsed = time.Since(start)
	rep.GoroutinesAfter, rep.FDsAfter = settle(rep.GoroutinesBefore, rep.FDsBefore)
	return rep, nil
}

// rankResult is what one rank of a round did.
type rankResult struct {
	ops, bytes uint64
	corrupted  int
	err        error
	stats      []collectives.PeerStats
}

// round runs one round with fault f.
func round(ctx context.Context, rep *Report, opt Options, f Fault, seed uint64) error {
	rng := rand.New(rand.NewPCG(seed, 1))
	ops := plan(rng, opt.OpsPerRound, opt.MaxCount)
	victim, killAt := -1, 0
	cfg := collectives.Config{Timeout: 30 * time.Second}
	cfg.UDP.Seed = seed | 1
	cfg.UDP.DropProb = f.DropProb
	cfg.UDP.Blackhole = f.Blackhole
	// Notice a dead peer within 2 s and give up a collective after 10 s:
	// loss rounds recover long before, kill rounds surface quickly.
	cfg.UDP.Core.IdleTimeout = 2e9
	cfg.Timeout = 10 * time.Second
	if f.Kill {
		// The round ends with an all-reduce, in which every survivor needs
		// the victim, so each must see an error.
		victim, killAt = rng.IntN(opt.Ranks), rng.IntN(len(ops)-1)
		ops[len(ops)-1] = op{coll: sched.AllReduce, dt: reduce.Float32, red: reduce.OpSum, count: 1024}
		rep.KillRounds++
	} else if f.DropProb > 0 || len(f.Blackhole) > 0 {
		rep.FaultRounds++
	}
	rep.Rounds++
	res := make([]rankResult, opt.Ranks)
	var mu sync.Mutex
	// Ranks of a round without a kill leave together, as a job's ranks do
	// after a final barrier: a rank that closes while a peer still waits
	// for the acknowledgement of its last message to it fails that peer's
	// send with "peer closed the connection", which is teardown, not a
	// transport fault.
	var finished sync.WaitGroup
	allDone := make(chan struct{})
	if !f.Kill {
		finished.Add(opt.Ranks)
		go func() { finished.Wait(); close(allDone) }()
	}
	launchErr := collectives.LaunchLocal(ctx, opt.Ranks, cfg, func(c *collectives.Comm) error {
		r := c.Rank()
		var out rankResult
		defer func() {
			mu.Lock()
			res[r] = out
			mu.Unlock()
		}()
		for i, o := range ops {
			if r == victim && i == killAt {
				out.stats = c.PeerStats()
				return nil // LaunchLocal closes the communicator: the rank is gone
			}
			got, want, err := runOp(ctx, c, o)
			if err != nil {
				out.err = fmt.Errorf("op %d (%v): %w", i, o, err)
				break
			}
			out.ops++
			out.bytes += uint64(len(want))
			if string(got) != string(want) {
				out.corrupted++
			}
		}
		out.stats = c.PeerStats()
		if !f.Kill {
			finished.Done()
			select {
			case <-allDone:
			case <-time.After(cfg.Timeout):
			}
		}
		// Errors are judged here, not by LaunchLocal, so that a kill round's
		// expected failures do not cut the survivors short.
		return nil
	})
	if launchErr != nil {
		// Setup failed (rendezvous, handshakes): the fault setting must not
		// prevent a job from starting, so this is unexpected too.
		rep.Unexpected++
		rep.note(fmt.Sprintf("round %d (%s): launch: %v", rep.Rounds, f.Name, launchErr))
	}
	for r, x := range res {
		rep.Ops += x.ops
		rep.Bytes += x.bytes
		rep.Corrupted += x.corrupted
		for _, p := range x.stats {
			rep.PacketsSent += p.Conn.PacketsSent
			rep.Retransmits += p.Conn.Retransmits
			rep.Lost += p.Conn.Lost
			rep.Timeouts += p.Conn.Timeouts
			rep.PathChanges += p.Conn.PathChanges
		}
		switch {
		case r == victim:
		case f.Kill && x.err != nil:
			rep.Surfaced++
		case f.Kill && launchErr == nil:
			rep.MissedKills++
			rep.note(fmt.Sprintf("round %d: rank %d saw no error after rank %d left at op %d", rep.Rounds, r, victim, killAt))
		case x.err != nil:
			rep.Unexpected++
			rep.note(fmt.Sprintf("round %d (%s): rank %d: %v", rep.Rounds, f.Name, r, x.err))
		}
	}
	opt.Logf("round %d (%s): ops %d, corrupted %d, unexpected %d, surfaced %d",
		rep.Rounds, f.Name, rep.Ops, rep.Corrupted, rep.Unexpected, rep.Surfaced)
	return nil
}

func (r *Report) note(s string) {
	if len(r.FirstErrors) < 8 {
		r.FirstErrors = append(r.FirstErrors, s)
	}
}

// runOp runs o on c and returns the rank's output and the reference.
func runOp(ctx context.Context, c *collectives.Comm, o op) (got, want []byte, err error) {
	n, r := c.Size(), c.Rank()
	in, out := inOutCounts(o.coll, n, o.count)
	send := input(o.dt, o.salt, r, in)
	recv := make([]byte, out*o.dt.Size())
	root := int(o.salt) % n
	switch o.coll {
	case sched.AllReduce:
		err = c.AllReduce(ctx, send, recv, o.dt, o.red)
	case sched.ReduceScatter:
		err = c.ReduceScatter(ctx, send, recv, o.dt, o.red)
	case sched.AllGather:
		err = c.AllGather(ctx, send, recv, o.dt)
	case sched.AllToAll:
		err = c.AllToAll(ctx, send, recv, o.dt)
	case sched.Broadcast:
		err = c.Broadcast(ctx, send, recv, o.dt, root)
	case sched.SendRecv:
		err = c.SendRecv(ctx, send, recv, o.dt)
	default:
		err = errors.New("soak: unknown collective")
	}
	return recv, expected(o.coll, o.dt, o.red, o.salt, n, r, o.count, root), err
}

// warmNetpoller opens and closes one socket, so that the descriptors the Go
// runtime keeps for its network poller from first use on are counted in
// the baseline rather than as a leak.
func warmNetpoller() {
	if c, err := net.ListenPacket("udp", "127.0.0.1:0"); err == nil {
		c.Close()
	}
}

// openFDs counts this process's open file descriptors (-1 where /proc is
// missing).
func openFDs() int {
	ents, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		return -1
	}
	return len(ents)
}

// settle waits up to 5 s for goroutines and descriptors to fall back to
// their counts before the run (closing endpoints stop their loops
// asynchronously), and returns the counts it last saw.
func settle(g0, fd0 int) (g, fd int) {
	deadline := time.Now().Add(5 * time.Second)
	for {
		g, fd = runtime.NumGoroutine(), openFDs()
		if g <= g0 && fd <= fd0 || time.Now().After(deadline) {
			return g, fd
		}
		time.Sleep(20 * time.Millisecond)
	}
}
