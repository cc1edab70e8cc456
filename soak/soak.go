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
	"github.com/metaroce/metaroce/netlab"
	"github.com/metaroce/metaroce/transport"
)

// Options parameterise a soak run. Zero fields take the defaults.
type Options struct {
	// Duration is how long new rounds are started; the last round runs to
	// its end. Default (zero) 10 s; negative is an error.
	Duration time.Duration
	// Ranks is the number of in-process ranks of driver-level rounds,
	// 2..MaxRanks (the reference is exact up to MaxRanks). Default (zero)
	// 4. Netlab rounds always run 2 ranks, one per lab host.
	Ranks int
	// Seed seeds every random choice; the same seed gives the same rounds.
	// Default 1.
	Seed uint64
	// OpsPerRound is the number of collectives per round. Default 24.
	OpsPerRound int
	// MaxCount bounds the element count of one collective. Default 1<<17.
	MaxCount int
	// Netlab runs the collective rounds on a namespace fabric (package
	// netlab) with faults injected by nftables and link state, before and
	// during each round. Without root or nftables the run says why in
	// Report.Notes and injects driver-level faults instead.
	Netlab bool
	// Plugin adds plugin rounds: the NCCL net plugin and its C harness are
	// built once, and every PluginEvery-th round runs the harness's data
	// scenario (every fourth plugin round its kill scenario) in two
	// processes over loopback. Without gcc the rounds are skipped with a
	// note.
	Plugin bool
	// PluginEvery is the spacing of plugin rounds among all rounds
	// (default 4: three collective rounds, then a plugin round).
	PluginEvery int
	// RepoRoot is the module root holding net-plugin/ and include/, for
	// building the plugin. Default: the nearest directory at or above the
	// working directory whose go.mod declares this module.
	RepoRoot string
	// MaxRounds, when positive, ends the run after that many rounds
	// (plugin rounds included) even if Duration has not passed.
	MaxRounds int
	// Logf receives one line per round; nil discards them.
	Logf func(format string, args ...any)
}

// check refuses options that no default can stand for.
func (o Options) check() error {
	if o.Duration < 0 {
		return fmt.Errorf("soak: negative Duration %v", o.Duration)
	}
	if o.Ranks != 0 && (o.Ranks < 2 || o.Ranks > MaxRanks) {
		return fmt.Errorf("soak: %d ranks, want 2..%d (the reference is exact up to %d)", o.Ranks, MaxRanks, MaxRanks)
	}
	return nil
}

func (o Options) withDefaults() Options {
	if o.Duration == 0 {
		o.Duration = 10 * time.Second
	}
	if o.Ranks == 0 {
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
	if o.PluginEvery < 2 {
		o.PluginEvery = 4
	}
	if o.Logf == nil {
		o.Logf = func(string, ...any) {}
	}
	return o
}

// Fault is the driver-level fault setting of one round.
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
// It returns an error only when the options are invalid or a round cannot
// start at all (the lab or the plugin does not build, a fault cannot be
// injected); the report it returns with a round's error covers the rounds
// before, and says the error (Report.Error). When ctx ends first, the round under way stops, the report
// says Interrupted, and whatever was built (lab, plugin) is torn down
// before Run returns.
func Run(ctx context.Context, opt Options) (*Report, error) {
	if err := opt.check(); err != nil {
		return nil, err
	}
	opt = opt.withDefaults()
	rep := &Report{Mode: "driver"}
	var fab *fabric
	if opt.Netlab {
		if err := netlabAvailable(); err != nil {
			rep.Notes = append(rep.Notes, fmt.Sprintf("netlab mode not possible (%v): driver-level faults instead", err))
		} else {
			if fab, err = newFabric(); err != nil {
				return rep, err
			}
			defer fab.close()
			rep.Mode = "netlab"
			opt.Logf("netlab: fabric %s built (%d spine links)", fab.lab.ID(), netlabLinks)
		}
	}
	var kit *pluginKit
	if opt.Plugin {
		var err error
		kit, err = buildPlugin(ctx, opt.RepoRoot)
		switch {
		case errors.Is(err, errNoCompiler):
			rep.Notes = append(rep.Notes, "plugin rounds skipped: "+err.Error())
		case err != nil:
			return rep, err
		default:
			defer kit.remove()
		}
	}
	warmNetpoller()
	rep.GoroutinesBefore, rep.FDsBefore = runtime.NumGoroutine(), openFDs()
	start := time.Now()
	rng := rand.New(rand.NewPCG(opt.Seed, 0x50a4))
	coll := 0 // collective rounds started: the index into the fault rotation
	for i := 0; time.Since(start) < opt.Duration && ctx.Err() == nil && (opt.MaxRounds <= 0 || i < opt.MaxRounds); i++ {
		if kit != nil && i%opt.PluginEvery == opt.PluginEvery-1 {
			pluginRound(ctx, rep, opt, kit)
			continue
		}
		var err error
		if fab != nil {
			err = fab.round(ctx, rep, opt, coll, rng.Uint64())
		} else {
			f := faults[coll%len(faults)]
			err = round(ctx, rep, opt, driverSpec(rep, opt, f), rng.Uint64())
		}
		if err != nil {
			rep.Elapsed = time.Since(start)
			rep.Interrupted = ctx.Err() != nil
			rep.Error = err.Error()
			return rep, err
		}
		coll++
	}
	rep.Elapsed = time.Since(start)
	rep.Interrupted = ctx.Err() != nil
	rep.GoroutinesAfter, rep.FDsAfter = settle(rep.GoroutinesBefore, rep.FDsBefore)
	return rep, nil
}

// netlabAvailable is netlab.Available; tests replace it to take the
// fallback path on machines where labs can be built.
var netlabAvailable = netlab.Available

// launcher starts n ranks with cfg and runs fn on each, as
// collectives.LaunchLocal does.
type launcher func(ctx context.Context, n int, cfg collectives.Config, fn func(c *collectives.Comm) error) error

// roundSpec is one collective round: how its ranks start, the datapath
// configuration (driver-level faults included) and what happens once they
// are connected.
type roundSpec struct {
	name   string
	ranks  int
	kill   bool // one rank leaves part-way through
	cfg    collectives.Config
	launch launcher
	// start, when set, runs once every rank has connected and before the
	// first collective (netlab: the round's faults go in). Its error ends
	// the run: the soak cannot do what it claims.
	start func() error
}

// driverSpec is the round for driver-level fault f on in-process ranks.
func driverSpec(rep *Report, opt Options, f Fault) roundSpec {
	// Notice a dead peer within 2 s and give up a collective after 10 s:
	// loss rounds recover long before, kill rounds surface quickly.
	cfg := collectives.Config{Timeout: 10 * time.Second}
	cfg.UDP.DropProb = f.DropProb
	cfg.UDP.Blackhole = f.Blackhole
	cfg.UDP.Core.IdleTimeout = 2e9
	if f.DropProb > 0 {
		rep.fault("udp loss")
	}
	if len(f.Blackhole) > 0 {
		rep.fault("udp blackhole")
	}
	if f.DropProb > 0 || len(f.Blackhole) > 0 {
		rep.FaultRounds++
	}
	return roundSpec{name: f.Name, ranks: opt.Ranks, kill: f.Kill, cfg: cfg, launch: collectives.LaunchLocal}
}

// rankResult is what one rank of a round did.
type rankResult struct {
	ops, bytes uint64
	corrupted  int
	err        error
	failedOp   int // index of the op that returned err; -1 when err came before the first op
	stats      []collectives.PeerStats
}

// verdict is how one rank's outcome of a round counts in the report.
type verdict int

const (
	verdictFine        verdict = iota // no error, none due (or the victim)
	verdictSurfaced                   // a survivor of a kill round reported the dead rank
	verdictMissed                     // a survivor of a kill round saw no error
	verdictUnexpected                 // an error no fault of the round explains
	verdictInterrupted                // the run's context ended under the rank
)

// deadPeer reports whether err is how a rank learns that a peer left: the
// connection to it closed (the leaving rank's communicator closed it, or a
// rank that gave up before closed its own) or went silent for the idle
// timeout. Errors wrap these core errors through the collective's and the
// datapath's, which add the ranks and addresses (udp.PeerError).
func deadPeer(err error) bool {
	return errors.Is(err, transport.ErrClosed) || errors.Is(err, transport.ErrPeerDead)
}

// judge classifies rank r's result x in a round. In a kill round (kill set)
// victim left before op killAt. A survivor's error is the expected one
// only when it names a dead peer and came at op killAt-1 or later: op
// killAt-1 is the victim's last, and a survivor may still wait for the
// acknowledgements of what it sent the victim in it when the victim
// closes. Any other error (another kind, or an op before, where only a
// fault such as loss can have caused it) is unexpected. ctxErr is the
// run's context error, nil while it runs: once the context has ended, a
// rank's error may be the cancellation itself or its echo (a peer that
// gave up closed its connections), so a round cut short is not judged.
func judge(kill bool, victim, killAt, r int, x rankResult, launchFailed bool, ctxErr error) verdict {
	switch {
	case kill && r == victim:
		return verdictFine
	case ctxErr != nil:
		return verdictInterrupted
	case x.err == nil && kill && !launchFailed:
		return verdictMissed
	case x.err == nil:
		return verdictFine
	case kill && x.failedOp >= killAt-1 && deadPeer(x.err):
		return verdictSurfaced
	}
	return verdictUnexpected
}

// round runs the collectives of one round as spec says.
func round(ctx context.Context, rep *Report, opt Options, spec roundSpec, seed uint64) error {
	rng := rand.New(rand.NewPCG(seed, 1))
	ops := plan(rng, opt.OpsPerRound, opt.MaxCount)
	n := spec.ranks
	victim, killAt := -1, 0
	cfg := spec.cfg
	cfg.UDP.Seed = seed | 1
	if spec.kill {
		// The round ends with an all-reduce, in which every survivor needs
		// the victim, so each must see an error.
		victim, killAt = rng.IntN(n), rng.IntN(len(ops)-1)
		ops[len(ops)-1] = op{coll: sched.AllReduce, dt: reduce.Float32, red: reduce.OpSum, count: 1024}
		rep.KillRounds++
		rep.fault("kill a rank")
	}
	rep.Rounds++
	res := make([]rankResult, n)
	var mu sync.Mutex
	// Every rank waits at the gate until all have connected and spec.start
	// has run, so that the round's faults hit collectives, not the
	// rendezvous.
	gate := make(chan struct{})
	var arrived int
	var startErr error
	arrive := func() {
		mu.Lock()
		arrived++
		last := arrived == n
		mu.Unlock()
		if last {
			if spec.start != nil {
				startErr = spec.start()
			}
			close(gate)
		}
	}
	// Ranks of a round without a kill leave together, as a job's ranks do
	// after a final barrier: a rank that closes while a peer still waits
	// for the acknowledgement of its last message to it fails that peer's
	// send with "connection closed by the peer", which is teardown, not a
	// transport fault.
	var finished sync.WaitGroup
	allDone := make(chan struct{})
	if !spec.kill {
		finished.Add(n)
		go func() { finished.Wait(); close(allDone) }()
	}
	launchErr := spec.launch(ctx, n, cfg, func(c *collectives.Comm) error {
		r := c.Rank()
		out := rankResult{failedOp: -1}
		defer func() {
			mu.Lock()
			res[r] = out
			mu.Unlock()
		}()
		arrive()
		select {
		case <-gate:
		case <-time.After(cfg.Timeout):
			out.err = fmt.Errorf("not every rank connected within %v", cfg.Timeout)
		case <-ctx.Done():
			out.err = ctx.Err()
		}
		for i, o := range ops {
			if out.err != nil {
				break
			}
			if r == victim && i == killAt {
				out.stats = c.PeerStats()
				return nil // the launcher closes the communicator: the rank is gone
			}
			got, want, err := runOp(ctx, c, o)
			if err != nil {
				out.err = fmt.Errorf("op %d (%v): %w", i, o, err)
				out.failedOp = i
				break
			}
			out.ops++
			out.bytes += uint64(len(want))
			if string(got) != string(want) {
				out.corrupted++
			}
		}
		out.stats = c.PeerStats()
		if !spec.kill {
			finished.Done()
			select {
			case <-allDone:
			case <-time.After(cfg.Timeout):
			}
		}
		// Errors are judged here, not by the launcher, so that a kill
		// round's expected failures do not cut the survivors short.
		return nil
	})
	if launchErr != nil && ctx.Err() == nil {
		// Setup failed (rendezvous, handshakes): the fault setting must not
		// prevent a job from starting, so this is unexpected too.
		rep.Unexpected++
		rep.note(fmt.Sprintf("round %d (%s): launch: %v", rep.Rounds, spec.name, launchErr))
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
			rep.ECNMarks += p.Conn.ECNMarks
			rep.CERecv += p.Conn.CERecv
		}
		switch judge(spec.kill, victim, killAt, r, x, launchErr != nil, ctx.Err()) {
		case verdictSurfaced:
			rep.Surfaced++
			opt.Logf("round %d: rank %d surfaced rank %d's exit: %v", rep.Rounds, r, victim, x.err)
		case verdictMissed:
			rep.MissedKills++
			rep.note(fmt.Sprintf("round %d: rank %d saw no error after rank %d left at op %d", rep.Rounds, r, victim, killAt))
		case verdictUnexpected:
			rep.Unexpected++
			if spec.kill {
				rep.note(fmt.Sprintf("round %d (%s): rank %d, with rank %d leaving at op %d: %v", rep.Rounds, spec.name, r, victim, killAt, x.err))
			} else {
				rep.note(fmt.Sprintf("round %d (%s): rank %d: %v", rep.Rounds, spec.name, r, x.err))
			}
		case verdictInterrupted:
			if x.err != nil {
				opt.Logf("round %d (%s): rank %d interrupted: %v", rep.Rounds, spec.name, r, x.err)
			}
		}
	}
	opt.Logf("round %d (%s): ops %d, corrupted %d, unexpected %d, surfaced %d",
		rep.Rounds, spec.name, rep.Ops, rep.Corrupted, rep.Unexpected, rep.Surfaced)
	if startErr != nil {
		return fmt.Errorf("soak: round %d (%s): injecting faults: %w", rep.Rounds, spec.name, startErr)
	}
	return nil
}

// runOp runs o on c and returns the rank's output and the reference.
func runOp(ctx context.Context, c *collectives.Comm, o op) (got, want []byte, err error) {
	n, r := c.Size(), c.Rank()
	in, out := inOutCounts(o.coll, n, o.count)
	send := input(o.dt, o.red, o.salt, r, in)
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
