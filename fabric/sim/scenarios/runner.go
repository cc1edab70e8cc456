package scenarios

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"math/rand/v2"
	"sort"
	"strings"
	"time"

	"github.com/metaroce/metaroce/fabric/sim"
	"github.com/metaroce/metaroce/fabric/sim/agents"
	"github.com/metaroce/metaroce/transport"
	"github.com/metaroce/metaroce/transport/cc"
	"github.com/metaroce/metaroce/transport/rocev2"
	"github.com/metaroce/metaroce/transport/wire"
)

// Protocols compared by the scenarios.
const (
	MetaRoCE  = "metaroce"   // the MetaRoCE core, lossy fabric, ECN
	RoCEv2    = "rocev2"     // RoCEv2 go-back-N with DCQCN on a lossy fabric
	RoCEv2PFC = "rocev2-pfc" // RoCEv2 with DCQCN on a PFC (lossless) fabric
)

// ErrUsage wraps the errors of a scenario name or option that cannot run:
// a caller's mistake, not a failed run.
var ErrUsage = errors.New("scenarios")

// Options are the parameters common to every scenario. Zero fields take
// the defaults noted. A scenario refuses, with ErrUsage, a value out of
// its range, and a link rate, MTU and link delay whose round trip is too
// long for the MetaRoCE core's timers, though each is in range (the
// largest MTUs on the slowest links: 65000 bytes at 1 kb/s).
type Options struct {
	Seed           uint64  // random seed (default 1)
	Smoke          bool    // small, fast variant (16 hosts or fewer, short runs)
	LinkGbps       float64 // link rate, Gb/s, MinLinkGbps to MaxLinkGbps (default 400)
	MTU            int     // payload bytes per packet, MinMTU to MaxMTU (default 4096)
	LinkDelay      int64   // propagation delay per link, ns (default 1000: 8.34 µs base RTT across spines at 400 Gb/s, see sim.Config.BaseRTT)
	Buffer         int     // switch egress buffer per port, bytes (default 2 MiB)
	Kmin           int     // ECN ramp start, bytes (default 100 KB)
	Kmax           int     // ECN ramp end, bytes (default 400 KB)
	RoCETimeoutExp int     // RoCEv2 local ACK timeout exponent t (default 8: 1.05 ms)
	// ConcurrentSenders is the MetaRoCE endpoints' ConcurrentSenders
	// (0: unknown); the collective scenario sets what its schedules allow.
	ConcurrentSenders int
	// RoCERendezvous has RoCEv2 receives announce themselves before data
	// may go into them (rocev2.Config.Rendezvous), as NCCL's IB transport
	// does; the collective scenario, whose hosts run NCCL-style plans,
	// sets it. Off, RoCEv2 is RC Send: a message goes at once.
	RoCERendezvous bool
	// Sizes, Losses and Ops replace the collective scenario's rows (nil:
	// 1 and 16 MiB; 0, 0.1 and 1% loss; all-reduce and all-to-all). Sizes
	// are bytes per rank, each a positive multiple of 1 KiB up to
	// MaxCollectiveBytes; Losses are percentages in [0, 100) end to end
	// across spines; Ops name "allreduce" or "alltoall". Other scenarios
	// reject them. No value may be given twice.
	Sizes  []uint64
	Losses []float64
	Ops    []string
	Log    io.Writer // progress and events/s lines (nil: silent)
	// Progress, where Log is nil, gets one line per finished run once
	// the scenario has taken longer than ProgressAfter of wall time, so
	// that a long sweep shows it advances while a short run stays
	// quiet (nil: none).
	Progress io.Writer
}

// ProgressAfter is the wall time after which Options.Progress hears of
// every finished run.
const ProgressAfter = 5 * time.Second

// Bounds of the fabric options, which check refuses Options outside (0
// aside, the default) and a command line quotes in its help rather than
// copy: a rate above 100 Tb/s or a packet whose payload and headers would
// not fit the 16-bit datagram size the protocol advertises (spec §1,
// §2.8) describe no fabric this models.
const (
	// MinLinkGbps is the slowest LinkGbps, Gb/s: 1 kb/s, the slowest
	// link the simulator models (sim.Config).
	MinLinkGbps float64 = 1e-6
	// MaxLinkGbps is the fastest LinkGbps, Gb/s: 100 Tb/s.
	MaxLinkGbps float64 = 100_000
	// MinMTU is the smallest MTU, payload bytes: the payload whose
	// MetaRoCE DATA datagram (the payload and its 56-byte header, the
	// endpoint's MaxDatagram) is the wire.MinDatagram (576 bytes) that a
	// peer takes in a HELLO and the core's Config.Validate requires, 520
	// bytes. Below it every MetaRoCE endpoint would be refused (before,
	// every dial timed out).
	MinMTU = wire.MinDatagram - wire.DataHeaderLen
	// MaxMTU is the largest MTU, payload bytes: 65000, whose datagram with
	// its header stays under the 16-bit datagram size of a HELLO.
	MaxMTU = 65_000
)

// maxRoCEExp bounds RoCETimeoutExp: the local ACK timeout exponent is a
// 5-bit field.
const maxRoCEExp = 31

// check refuses options that are out of range, before fill takes zeros
// for defaults: a negative, NaN or infinite value is a caller's mistake,
// and running on would print tables of zeros and NaNs as if measured.
func (o *Options) check() error {
	var errs []error
	bad := func(format string, args ...any) {
		errs = append(errs, fmt.Errorf("%w: "+format, append([]any{ErrUsage}, args...)...))
	}
	if !(o.LinkGbps == 0 || o.LinkGbps >= MinLinkGbps && o.LinkGbps <= MaxLinkGbps) {
		bad("link rate %g Gb/s: want 0 (the default) or %g to %g", o.LinkGbps, MinLinkGbps, MaxLinkGbps)
	}
	if o.MTU != 0 && (o.MTU < MinMTU || o.MTU > MaxMTU) {
		bad("MTU %d bytes: want 0 (the default, 4096) or %d to %d (a MetaRoCE DATA packet, payload and %d-byte header, must hold at least the protocol's minimum datagram of %d bytes)",
			o.MTU, MinMTU, MaxMTU, wire.DataHeaderLen, wire.MinDatagram)
	}
	if o.LinkDelay < 0 {
		bad("link delay %d ns: must be >= 0", o.LinkDelay)
	}
	if o.Buffer < 0 || o.Kmin < 0 || o.Kmax < 0 {
		bad("buffer %d, Kmin %d, Kmax %d bytes: must be >= 0", o.Buffer, o.Kmin, o.Kmax)
	}
	if o.Kmin > 0 && o.Kmax > 0 && o.Kmin > o.Kmax {
		bad("ECN ramp from %d to %d bytes: Kmin must not exceed Kmax", o.Kmin, o.Kmax)
	}
	if o.RoCETimeoutExp < 0 || o.RoCETimeoutExp > maxRoCEExp {
		bad("RoCEv2 timeout exponent %d: want 0 (the default, 8) to %d", o.RoCETimeoutExp, maxRoCEExp)
	}
	if o.ConcurrentSenders < 0 {
		bad("concurrent senders %d: must be >= 0", o.ConcurrentSenders)
	}
	if len(errs) == 0 {
		// Each option is in range: whether they go together.
		f := *o
		f.fill()
		if err := f.checkRoundTrip(); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// checkRoundTrip refuses a link rate, MTU and link delay (of o, filled in)
// that are each in range but together make a round trip too long for the
// MetaRoCE core: metaroceConfig scales the endpoints' timers to the base
// RTT of a full packet (InitialRTT is twice it), and the core's
// Config.Validate refuses any of them past transport.MaxRTTScale, an hour.
// A full packet takes seconds per link on the slowest links (65 KB at
// 1 kb/s: 521 s, and a round trip crosses eight), so there the largest
// MTUs do not fit. The bound is not restated here: it asks the core about
// the configuration metaroceConfig makes on rttFabric, the scenarios'
// fabric of the longest round trip, so it follows both. Past it, the error
// names the largest MTU that fits at this rate and the slowest rate that
// fits this MTU, or, where neither does, the longest link delay that
// fits; a caller learns what to change rather than of a core setting it
// never set.
func (o *Options) checkRoundTrip() error {
	fits := func(mtu int, gbps float64, delay int64) bool {
		if delay > int64(transport.MaxRTTScale) {
			// A round trip crosses eight links: past an hour
			// already, and 8 × delay might overflow.
			return false
		}
		p := *o
		p.MTU, p.LinkGbps, p.LinkDelay = mtu, gbps, delay
		return metaroceConfig(&p, p.rttFabric()).Validate() == nil
	}
	if fits(o.MTU, o.LinkGbps, o.LinkDelay) {
		return nil
	}
	c := o.rttFabric()
	what := fmt.Sprintf("MTU %d bytes at link rate %g Gb/s", o.MTU, o.LinkGbps)
	if o.LinkDelay > 0 {
		what += fmt.Sprintf(" and link delay %d ns", o.LinkDelay)
	}
	var why string
	if o.LinkDelay <= int64(transport.MaxRTTScale) {
		base := transport.Time(c.BaseRTT(o.MTU+wire.DataHeaderLen+c.Overhead, 64+c.Overhead))
		why = fmt.Sprintf("a full packet's round trip across the fabric takes %v, and the MetaRoCE endpoints' timers, scaled to it (a first RTT estimate of %v), would pass the hour the core takes (transport.MaxRTTScale)",
			base, metaroceConfig(o, c).InitialRTT)
	} else {
		why = "a round trip across the fabric crosses eight links, past the hour the MetaRoCE core takes as a round trip (transport.MaxRTTScale)"
	}
	var ways []string
	// fits holds for the MTUs up to the largest that fits at o's rate,
	// and for the whole bits per second (as a port keeps its rate) from
	// the slowest that fits o's MTU.
	if mtu := firstTrue(MinMTU, int64(o.MTU), func(m int64) bool { return !fits(int(m), o.LinkGbps, o.LinkDelay) }) - 1; mtu >= MinMTU {
		ways = append(ways, fmt.Sprintf("an MTU of at most %d bytes at this rate", mtu))
	}
	maxBps := int64(MaxLinkGbps * 1e9)
	if bps := firstTrue(int64(math.Round(o.LinkGbps*1e9))+1, maxBps, func(b int64) bool { return fits(o.MTU, float64(b)/1e9, o.LinkDelay) }); bps <= maxBps {
		ways = append(ways, fmt.Sprintf("a link rate of at least %g Gb/s for this MTU", float64(bps)/1e9))
	}
	if len(ways) == 0 {
		// Only a shorter delay helps (0 is the default, 1000 ns).
		if d := firstTrue(1, o.LinkDelay, func(d int64) bool { return !fits(o.MTU, o.LinkGbps, d) }) - 1; d >= 1 {
			ways = append(ways, fmt.Sprintf("a link delay of at most %d ns", d))
		} else {
			ways = append(ways, "a shorter link delay, and a smaller MTU or a faster link")
		}
	}
	return fmt.Errorf("%w: %s: %s; want %s", ErrUsage, what, why, strings.Join(ways, ", or "))
}

// firstTrue is the least x in [lo, hi] for which ok holds, where ok does
// not hold below some point and holds from it on; hi+1 where it holds
// nowhere in the range.
func firstTrue(lo, hi int64, ok func(int64) bool) int64 {
	// Invariant: ok does not hold below lo, and holds above hi.
	for lo <= hi {
		mid := lo + (hi-lo)/2
		if ok(mid) {
			hi = mid - 1
		} else {
			lo = mid + 1
		}
	}
	return lo
}

// rttFabric is the fabric checkRoundTrip asks the core about: host links
// and leaf–spine links at the same rate, as the loss scenario's (one host
// per leaf, one spine), the collective's and the incast's (as many spines
// as hosts per leaf) have them; the planes and failure scenarios' uplinks
// are as fast or twice as fast. Its base RTT is the longest of any
// scenario's at the options' rate, MTU and delay.
func (o *Options) rttFabric() sim.Config {
	return o.fabric(2, 1, 1, 1)
}

func (o *Options) fill() {
	if o.Seed == 0 {
		o.Seed = 1
	}
	if o.LinkGbps <= 0 {
		o.LinkGbps = 400
	}
	if o.MTU <= 0 {
		o.MTU = 4096
	}
	if o.RoCETimeoutExp <= 0 {
		o.RoCETimeoutExp = 8
	}
}

// fabric returns the fabric configuration for a scenario.
func (o *Options) fabric(leaves, spines, perLeaf, planes int) sim.Config {
	c := sim.DefaultConfig()
	c.Seed = o.Seed
	c.Leaves, c.Spines, c.HostsPerLeaf, c.Planes = leaves, spines, perLeaf, planes
	c.LinkRate = o.LinkGbps * 1e9
	if o.LinkDelay > 0 {
		c.LinkDelay = o.LinkDelay
	}
	if o.Buffer > 0 {
		c.Buffer = o.Buffer
	}
	if o.Kmin > 0 {
		c.Kmin = o.Kmin
	}
	if o.Kmax > 0 {
		c.Kmax = o.Kmax
	}
	c.MaxDatagram = o.MTU + 128
	return c
}

func (r *Result) fabricParams(o *Options, c sim.Config) {
	r.param("link_gbit_s", o.LinkGbps)
	r.param("mtu_bytes", o.MTU)
	r.param("link_delay_ns", c.LinkDelay)
	r.param("base_rtt_ns", c.BaseRTT(o.MTU+wire.DataHeaderLen+c.Overhead, 64+c.Overhead))
	r.param("buffer_bytes", c.Buffer)
	r.param("ecn_kmin_bytes", c.Kmin)
	r.param("ecn_kmax_bytes", c.Kmax)
	r.param("ecn_pmax", c.Pmax)
	r.param("pfc_xoff_bytes", c.XOFF)
	r.param("pfc_xon_bytes", c.XON)
	r.param("rocev2_rto_ns", int64(4096)<<o.RoCETimeoutExp)
}

// payloadRate is the most payload bytes per second one NIC port carries
// with proto's packets: the port's rate, as the whole bits per second the
// simulator's ports keep, times the share of payload in a full DATA packet
// on the wire (MTU of MTU + proto's DATA header + c.Overhead). Each
// protocol is measured against its own header: with MetaRoCE's 56 bytes
// for both, RoCEv2 (40 bytes) carried 0.4% more than "all" of it at 4 KiB
// and read 1.004 of the line rate.
func payloadRate(o *Options, c sim.Config, proto string) float64 {
	return math.Round(c.LinkRate) / 8 * float64(o.MTU) / float64(o.MTU+dataHeaderLen(proto)+c.Overhead)
}

// dataHeaderLen is the transport header of proto's DATA packets, bytes.
func dataHeaderLen(proto string) int {
	if proto == MetaRoCE {
		return wire.DataHeaderLen
	}
	return rocev2.DataHeaderLen
}

// build creates the fabric for proto and attaches a transport to every host.
func build(o *Options, c sim.Config, proto string) (*sim.Sim, error) {
	if proto == RoCEv2PFC {
		c.PFC = true
	}
	s, err := sim.New(c)
	if errors.Is(err, sim.ErrConfig) {
		// The scenarios' own fabrics are valid: the options made it not.
		return nil, fmt.Errorf("%w: %w", ErrUsage, err)
	}
	if err != nil {
		return nil, err
	}
	c = s.Config()
	port := uint64(c.LinkRate / 8)
	for h := range s.Hosts() {
		rng := rand.New(rand.NewPCG(s.Rand().Uint64(), uint64(h)))
		var t sim.Transport
		switch proto {
		case MetaRoCE:
			m, err := agents.NewMetaRoCE(metaroceConfig(o, c), rng)
			if err != nil {
				// The endpoint's configuration follows from the
				// options (MTU, link rate and delay, senders).
				return nil, fmt.Errorf("%w: MetaRoCE endpoint of host %d: %w", ErrUsage, h, err)
			}
			t = m
		case RoCEv2, RoCEv2PFC:
			rc := rocev2.Config{Listen: true, Planes: c.Planes, QPsPerConn: c.Planes, MTU: o.MTU,
				TimeoutExp: o.RoCETimeoutExp, DCQCN: true, CC: cc.DCQCNConfig{LineRate: port},
				Rendezvous: o.RoCERendezvous}
			ep, err := rocev2.NewEndpoint(rc, rng)
			if err != nil {
				// As for MetaRoCE: the options set this configuration.
				return nil, fmt.Errorf("%w: RoCEv2 endpoint of host %d: %w", ErrUsage, h, err)
			}
			t = &agents.RoCEv2{EP: ep}
		default:
			return nil, fmt.Errorf("scenarios: unknown protocol %q", proto)
		}
		s.Attach(h, t, nil)
	}
	return s, nil
}

// metaroceConfig is the MetaRoCE endpoint configuration for fabric c: the
// core's defaults suit real fabrics (1 ms RTO floor, 100 µs initial RTT),
// whereas here the base RTT is known (sim.Config.BaseRTT of a 4 KiB DATA
// packet and a 64-byte ACK: 8.34 µs at 400 Gb/s, 8.26 µs on the failure
// scenario's fabric, whose uplinks run at 800 Gb/s), so the timers are
// scaled to it. The RTO floor is 100 µs: above the worst queueing of two full
// 2 MiB buffers at 400 Gb/s (84 µs) plus the base RTT, so congestion alone
// does not fire it, yet a black-holed path is found within about ten
// RTTs (with the 1 ms default a spine-link failure stalled the 3 ms run's
// every connection for most of its remaining time). A path silent with a
// packet outstanding probes after twice its RTT, no sooner than one base
// RTT (the core's MinRTO/4 default would be 25 µs here, three base RTTs;
// the probe costs a header and no retransmission). Hints divide the host's
// capacity over all its planes, less the
// per-packet wire overhead the core does not see.
func metaroceConfig(o *Options, c sim.Config) transport.Config {
	port := uint64(c.LinkRate / 8)
	// The core paces datagram bytes; the wire adds c.Overhead per packet,
	// which the inbound capacity must leave room for.
	full := uint64(o.MTU + wire.DataHeaderLen)
	inbound := port * full / (full + uint64(c.Overhead))
	base := transport.Time(c.BaseRTT(o.MTU+wire.DataHeaderLen+c.Overhead, 64+c.Overhead))
	tc := transport.Config{Listen: true, Planes: c.Planes, MaxDatagram: o.MTU + wire.DataHeaderLen,
		InboundRate:       inbound * uint64(c.Planes),
		MinRTO:            100 * transport.Microsecond,
		InitialRTT:        2 * base,
		AckDelay:          base / 2,
		TailProbeFloor:    base,
		ConcurrentSenders: o.ConcurrentSenders,
	}
	tc.CC.LineRate = port * uint64(c.Planes)
	return tc
}

// runner accumulates the simulator's speed over the runs of a scenario.
type runner struct {
	// ctx ends the scenario: each simulation looks at it as it runs
	// (sim.Sim.RunContext), and a scenario returns its error at once.
	ctx   context.Context
	o     *Options
	perf  Perf
	start time.Time // wall clock at the scenario's start
	runs  int       // simulations finished
	// total is the number of simulations the scenario will run, which it
	// sets before its first from the parameters its loops go over, for
	// the progress lines' "k of N" and ETA (0: not known up front).
	total int
	// even says that the runs take about as long as each other, so that
	// the mean of those done extrapolates to an ETA. A scenario whose runs
	// grow (sizes, plane counts) leaves it false and gets no ETA: the
	// mean of its first, small runs promised seconds where minutes were
	// left.
	even  bool
	label string // what the next run is, for progress lines ("" if unsaid)
}

// run attaches job j's apps to s and runs until stop or the hard limit
// (runApps).
func (r *runner) run(s *sim.Sim, j *job, limit int64, stop func() bool) error {
	apps := make([]sim.App, len(j.hosts))
	for h, jh := range j.hosts {
		apps[h] = jh
	}
	return r.runApps(s, apps, limit, stop)
}

// runApps attaches apps (indexed by host) to s and runs until stop or the
// hard limit, logging the simulator's speed. It returns an error only when
// r.ctx ended the run, which then neither counts nor logs it: the scenario
// returns that error rather than tabulate a run cut short.
func (r *runner) runApps(s *sim.Sim, apps []sim.App, limit int64, stop func() bool) error {
	for h, a := range apps {
		s.Hosts()[h].App = a
	}
	t0 := time.Now()
	s.Start()
	if err := s.RunContext(r.ctx, limit, stop); err != nil {
		if r.label != "" {
			return fmt.Errorf("scenarios: run %d (%s) stopped: %w", r.runs+1, r.label, err)
		}
		return fmt.Errorf("scenarios: run %d stopped: %w", r.runs+1, err)
	}
	wall := time.Since(t0).Seconds()
	r.perf.Events += s.Stats.Events
	r.perf.WallSeconds += wall
	r.runs++
	if r.o.Log != nil {
		count := ""
		if r.counted() {
			count = fmt.Sprintf("[%d of %d%s] ", r.runs, r.total, r.etaNote())
		}
		fmt.Fprintf(r.o.Log, "  %sran %s%s: %d events in %.2fs (%.2f M events/s), virtual %.3f ms\n",
			count, r.labelled(), s.Describe(), s.Stats.Events, wall, float64(s.Stats.Events)/wall/1e6, float64(s.Now())/1e6)
	} else if r.o.Progress != nil && time.Since(r.start) > ProgressAfter {
		if r.counted() {
			fmt.Fprintf(r.o.Progress, "  %d of %d runs done after %.0f s%s; last: %s%.2f M events/s\n",
				r.runs, r.total, time.Since(r.start).Seconds(), r.etaNote(), r.labelled(), float64(s.Stats.Events)/wall/1e6)
		} else {
			fmt.Fprintf(r.o.Progress, "  %d runs done after %.0f s; last: %s%.2f M events/s\n",
				r.runs, time.Since(r.start).Seconds(), r.labelled(), float64(s.Stats.Events)/wall/1e6)
		}
	}
	r.label = ""
	return nil
}

// counted reports whether the progress lines can say "k of N": the
// scenario declared its total and has not run past it.
func (r *runner) counted() bool {
	return r.total > 0 && r.runs <= r.total
}

// etaNote is, while runs remain of the total, the time they are likely
// to take, as ", ETA 1m20s"; otherwise "".
func (r *runner) etaNote() string {
	if !r.even {
		return ""
	}
	if d, ok := eta(time.Since(r.start), r.runs, r.total); ok {
		return ", ETA " + formatETA(d)
	}
	return ""
}

// eta is the wall time the runs not yet done are likely to take, at the
// mean wall time per finished run (set-up included) of elapsed over done;
// false when none has finished or none remains.
func eta(elapsed time.Duration, done, total int) (time.Duration, bool) {
	if done <= 0 || done >= total {
		return 0, false
	}
	return elapsed / time.Duration(done) * time.Duration(total-done), true
}

// formatETA rounds d to a tenth of a second under ten seconds, else to
// the second.
func formatETA(d time.Duration) string {
	if d < 10*time.Second {
		return d.Round(100 * time.Millisecond).String()
	}
	return d.Round(time.Second).String()
}

// labelled is the next run's label followed by ": ", or "".
func (r *runner) labelled() string {
	if r.label == "" {
		return ""
	}
	return r.label + ": "
}

// series bins values by time since a start.
type series struct {
	bin  int64
	vals []float64
}

func (s *series) add(t int64, v float64) {
	if t < 0 {
		return
	}
	i := int(t / s.bin)
	for len(s.vals) <= i {
		s.vals = append(s.vals, 0)
	}
	s.vals[i] += v
}

func (s *series) max(t int64, v float64) {
	if t < 0 {
		return
	}
	i := int(t / s.bin)
	for len(s.vals) <= i {
		s.vals = append(s.vals, 0)
	}
	if v > s.vals[i] {
		s.vals[i] = v
	}
}

// coarsen returns s in bins of bin ns, a multiple of s.bin: each bin the
// sum of the bins it covers, or with keepMax their largest value.
func (s *series) coarsen(bin int64, keepMax bool) *series {
	c := &series{bin: bin}
	k := int(bin / s.bin)
	for i, v := range s.vals {
		if keepMax {
			c.max(int64(i/k)*bin, v)
		} else {
			c.add(int64(i/k)*bin, v)
		}
	}
	return c
}

// Names lists the scenarios Run accepts.
func Names() []string {
	n := make([]string, 0, len(catalogue))
	for k := range catalogue {
		n = append(n, k)
	}
	sort.Strings(n)
	return n
}

var catalogue = map[string]func(*runner) (*Result, error){
	"loss":       lossScenario,
	"collective": collectiveScenario,
	"planes":     planesScenario,
	"incast":     incastScenario,
	"failure":    failureScenario,
}

// Run runs the named scenario to its end (RunContext with a context that
// never ends).
func Run(name string, opts Options) (*Result, error) {
	return RunContext(context.Background(), name, opts)
}

// RunContext runs the named scenario until it ends or ctx does: each of
// its simulations looks at ctx every few thousand events (a few
// milliseconds of wall time), and once ctx is done the scenario stops and
// returns an error that wraps ctx.Err() (errors.Is matches
// context.Canceled or context.DeadlineExceeded), with no result: a table
// with rows missing would read as complete. Options are checked first, so
// that a bad one is reported as ErrUsage even with ctx already done.
func RunContext(ctx context.Context, name string, opts Options) (*Result, error) {
	res, _, err := run(ctx, name, opts)
	return res, err
}

// run is RunContext, returning also the runner, which counts the runs done.
func run(ctx context.Context, name string, opts Options) (*Result, *runner, error) {
	f, ok := catalogue[name]
	if !ok {
		return nil, nil, fmt.Errorf("%w: unknown scenario %q (have %v)", ErrUsage, name, Names())
	}
	if err := opts.check(); err != nil {
		return nil, nil, err
	}
	opts.fill()
	if err := opts.checkRows(name); err != nil {
		return nil, nil, err
	}
	if opts.Log != nil {
		fmt.Fprintf(opts.Log, "scenario %s seed %d smoke %v\n", name, opts.Seed, opts.Smoke)
	}
	r := &runner{ctx: ctx, o: &opts, start: time.Now()}
	res, err := f(r)
	if err != nil {
		return nil, nil, err
	}
	res.Scenario, res.Seed, res.Perf = name, opts.Seed, r.perf
	if opts.Log != nil {
		fmt.Fprintf(opts.Log, "scenario %s: %d events in %.2fs wall, %.2f M events/s\n",
			name, r.perf.Events, r.perf.WallSeconds, r.perf.EventsPerSec()/1e6)
	}
	return res, r, nil
}
