package soak

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"sync"
	"time"

	"github.com/metaroce/metaroce/collectives"
	"github.com/metaroce/metaroce/netlab"
)

// Shape of the netlab fabric: one plane of netlabLinks parallel spine
// links, enough for the datapath's four paths per plane to find distinct
// links, and one rank in each of the lab's two hosts.
const (
	netlabLinks = 4
	netlabRanks = 2
	labPrefix   = "mrsoak"
)

// Fault kinds of netlab rounds, the keys of Report.Faults. Loss, black
// holes and CE marking act on the h1→h2 direction of a spine link (rules
// on switch s1); a flap takes both ends of the link down, so the switches
// reroute both directions.
const (
	kindLinkLoss = "link loss"      // 1–10 % random loss on one link
	kindAllLoss  = "all-link loss"  // 1–10 % random loss on every link
	kindHole     = "link blackhole" // every packet onto one link dropped
	kindCE       = "CE marking"     // every ECN-capable packet onto one link marked
	kindFlap     = "link flap"      // one link down, then up again
)

// hard reports whether kind cuts a link off completely; at most
// maxHardLinks links are cut at any moment, so that the fabric always
// has a way through, as a job's fabric has.
func hard(kind string) bool { return kind == kindHole || kind == kindFlap }

const maxHardLinks = 2

// netlabPlan is the fault schedule of one netlab round: kinds held for
// the whole round (in place before the first collective, removed after
// the last), kinds injected in turn while the collectives run, and
// whether a rank dies part-way.
type netlabPlan struct {
	name    string
	static  []string
	dynamic []string
	kill    bool
}

// netlabRotation is the sequence of netlab rounds; it repeats. Every
// kind appears both held and injected during a round, and one round in
// eight kills a rank (under loss, so that the survivor must tell a dead
// peer from a lossy one).
var netlabRotation = []netlabPlan{
	{name: "clean"},
	{name: "loss on a link, flaps", static: []string{kindLinkLoss}, dynamic: []string{kindFlap}},
	{name: "blackhole, loss bursts", static: []string{kindHole}, dynamic: []string{kindAllLoss, kindLinkLoss}},
	{name: "CE marking, flaps and blackholes", static: []string{kindCE}, dynamic: []string{kindFlap, kindHole}},
	{name: "loss on every link", static: []string{kindAllLoss}, dynamic: []string{kindCE}},
	{name: "kill a rank under loss", static: []string{kindLinkLoss}, kill: true},
	{name: "bursts of everything", dynamic: []string{kindFlap, kindHole, kindLinkLoss, kindCE, kindAllLoss}},
	{name: "blackhole and CE, flaps", static: []string{kindHole, kindCE}, dynamic: []string{kindFlap, kindLinkLoss}},
}

// action is one fault on the fabric: kind on spine link (unused for
// all-link loss) at pct percent (loss kinds only).
type action struct {
	kind string
	link int
	pct  float64
}

func (a action) String() string {
	switch a.kind {
	case kindAllLoss:
		return fmt.Sprintf("%s %.2f%%", a.kind, a.pct)
	case kindLinkLoss:
		return fmt.Sprintf("%s %.2f%% on a%d", a.kind, a.pct, a.link)
	}
	return fmt.Sprintf("%s on a%d", a.kind, a.link)
}

// faultKey names a fault in place: kind on link.
type faultKey struct {
	kind string
	link int
}

// fabric is the soak's lab plus the faults in place on it, so that a
// round can take exactly those away again.
type fabric struct {
	lab *netlab.Lab

	mu     sync.Mutex
	active map[faultKey]bool
}

// newFabric builds the one-plane lab.
func newFabric() (*fabric, error) {
	lab, err := netlab.New(netlab.Config{Planes: 1, Links: netlabLinks, Prefix: labPrefix})
	if err != nil {
		return nil, fmt.Errorf("soak: building the namespace fabric: %w", err)
	}
	return &fabric{lab: lab, active: make(map[faultKey]bool)}, nil
}

func (f *fabric) close() error { return f.lab.Close() }

// set puts fault a in place (on) or takes it away.
func (f *fabric) set(a action, on bool) error {
	link := netlab.Link{Plane: 0, Index: a.link}
	pct := 0.0
	if on {
		pct = a.pct
	}
	var err error
	switch a.kind {
	case kindLinkLoss:
		err = f.lab.SetLoss(link, pct)
	case kindAllLoss:
		link.Index = netlab.AllLinks
		err = f.lab.SetLoss(link, pct)
	case kindHole:
		err = f.lab.Blackhole(link, on)
	case kindCE:
		err = f.lab.MarkCE(link, on)
	case kindFlap:
		err = f.lab.SetLinkDown(link, on)
	default:
		err = fmt.Errorf("soak: unknown fault kind %q", a.kind)
	}
	if err != nil {
		return fmt.Errorf("%v (%s): %w", a, map[bool]string{true: "on", false: "off"}[on], err)
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if on {
		f.active[faultKey{a.kind, a.link}] = true
	} else {
		delete(f.active, faultKey{a.kind, a.link})
	}
	return nil
}

// clear takes every fault in place away.
func (f *fabric) clear() error {
	f.mu.Lock()
	keys := make([]faultKey, 0, len(f.active))
	for k := range f.active {
		keys = append(keys, k)
	}
	f.mu.Unlock()
	var errs []error
	for _, k := range keys {
		errs = append(errs, f.set(action{kind: k.kind, link: k.link}, false))
	}
	return errors.Join(errs...)
}

// draw picks the link and rate of a fault of kind: loss 1–10 % in steps of
// 0.01 %, and a link that carries no other fault (busy), never a link that
// would leave more than maxHardLinks links cut. ok is false when no link
// qualifies.
func draw(rng *rand.Rand, kind string, busy map[int]bool) (a action, ok bool) {
	a = action{kind: kind}
	if kind == kindLinkLoss || kind == kindAllLoss {
		a.pct = float64(100+rng.IntN(901)) / 100
	}
	if kind == kindAllLoss {
		return a, true
	}
	nhard := 0
	for l, h := range busy {
		if h && l >= 0 {
			nhard++
		}
	}
	if hard(kind) && nhard >= maxHardLinks {
		return a, false
	}
	var free []int
	for l := 0; l < netlabLinks; l++ {
		if _, taken := busy[l]; !taken {
			free = append(free, l)
		}
	}
	if len(free) == 0 {
		return a, false
	}
	a.link = free[rng.IntN(len(free))]
	return a, true
}

// drawStatic picks the actions of a round's held faults; busy records
// their links (true for a link that is cut) for draw.
func drawStatic(rng *rand.Rand, kinds []string) (acts []action, busy map[int]bool) {
	busy = make(map[int]bool)
	for _, k := range kinds {
		a, ok := draw(rng, k, busy)
		if !ok {
			continue
		}
		if k == kindAllLoss {
			busy[-1] = false // all-link loss in place: no loss burst on top
		} else {
			busy[a.link] = hard(k)
		}
		acts = append(acts, a)
	}
	return acts, busy
}

// chaos injects the kinds in turn until stop closes: it waits 1–30 ms,
// puts a fault in place for 10–150 ms (a flap: the link is down that
// long), takes it away, and so on. The times are short because a round
// of collectives on the fabric takes a few hundred milliseconds or less;
// each nftables or link change itself takes some milliseconds more. It
// returns the kinds injected.
func (f *fabric) chaos(rng *rand.Rand, kinds []string, busy map[int]bool, stop <-chan struct{}) ([]string, error) {
	var injected []string
	wait := func(lo, hi int) bool {
		t := time.NewTimer(time.Duration(lo+rng.IntN(hi-lo+1)) * time.Millisecond)
		defer t.Stop()
		select {
		case <-stop:
			return false
		case <-t.C:
			return true
		}
	}
	for i := 0; ; i++ {
		if !wait(1, 30) {
			return injected, nil
		}
		k := kinds[i%len(kinds)]
		if _, allLoss := busy[-1]; k == kindAllLoss && allLoss {
			continue
		}
		a, ok := draw(rng, k, busy)
		if !ok {
			continue
		}
		if err := f.set(a, true); err != nil {
			return injected, err
		}
		injected = append(injected, k)
		held := wait(10, 150)
		if err := f.set(a, false); err != nil {
			return injected, err
		}
		if !held {
			return injected, nil
		}
	}
}

// round runs netlab round idx of the rotation with the given seed.
func (f *fabric) round(ctx context.Context, rep *Report, opt Options, idx int, seed uint64) error {
	p := netlabRotation[idx%len(netlabRotation)]
	rng := rand.New(rand.NewPCG(seed, 2))
	static, busy := drawStatic(rng, p.static)
	chaosRng := rand.New(rand.NewPCG(seed, 3))
	if !p.kill && (len(static) > 0 || len(p.dynamic) > 0) {
		rep.FaultRounds++
	}
	// A collective must ride through every fault here: the timeout is
	// generous, and a dead peer is noticed after 2 s of silence.
	cfg := collectives.Config{Timeout: 20 * time.Second}
	cfg.UDP.Core.IdleTimeout = 2e9
	stop := make(chan struct{})
	var wg sync.WaitGroup
	var injected []string
	var chaosErr error
	spec := roundSpec{name: p.name, ranks: netlabRanks, kill: p.kill, cfg: cfg, launch: f.launch}
	spec.start = func() error {
		for _, a := range static {
			if err := f.set(a, true); err != nil {
				return err
			}
			rep.fault(a.kind)
		}
		if len(p.dynamic) > 0 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				injected, chaosErr = f.chaos(chaosRng, p.dynamic, busy, stop)
			}()
		}
		return nil
	}
	err := round(ctx, rep, opt, spec, seed)
	close(stop)
	wg.Wait()
	for _, k := range injected {
		rep.fault(k)
		rep.MidRoundFaults++
	}
	return errors.Join(err, chaosErr, f.clear())
}

// launch runs rank r in lab host r+1 (n must be netlabRanks). The
// rendezvous listens on host 1; each rank's communicator, and with it
// every socket it opens, is created on a thread inside its host's
// namespace, and keeps that namespace when other goroutines drive it.
func (f *fabric) launch(ctx context.Context, n int, cfg collectives.Config, fn func(c *collectives.Comm) error) error {
	if n != netlabRanks {
		return fmt.Errorf("soak: the namespace fabric runs %d ranks, not %d", netlabRanks, n)
	}
	hosts := make([]collectives.RankHost, n)
	for r := range hosts {
		host := r + 1
		hosts[r] = collectives.RankHost{Addr: f.lab.Host(host).Addr(0),
			Run: func(fn func() error) error { return f.lab.Run(host, fn) }}
	}
	return collectives.LaunchOn(ctx, hosts, cfg, func(c *collectives.Comm, _ collectives.RankHost) error { return fn(c) })
}
