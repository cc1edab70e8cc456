package cc

// Config parameterises the ECN AIMD controller. Zero fields take the defaults
// of DefaultConfig.
type Config struct {
	MSS         int    // bytes per full packet on the wire
	InitWindow  int    // initial window per path, bytes
	MinWindow   int    // floor of a path window, bytes
	MaxWindow   int    // ceiling of a path window, bytes
	ConnWindow  int    // ceiling of the connection window, bytes (0 = sum of paths)
	G           int    // EWMA gain of the marked fraction is 1/G (DCTCP's g)
	LineRate    uint64 // bytes per second of the local NIC(s); caps pacing (0 = unknown)
	InitRTT     int64  // RTT assumed before the first sample, ns
	PacingBurst int    // bytes that may leave back to back before pacing applies
}

// DefaultConfig returns defaults suited to a data-centre path: 4 KiB packets,
// 64 KiB initial path window (about one BDP of a 50 Gb/s, 10 µs path),
// DCTCP's g = 1/16.
func DefaultConfig() Config {
	return Config{
		MSS:         4096 + 64,
		InitWindow:  64 << 10,
		MinWindow:   2 * (4096 + 64),
		MaxWindow:   16 << 20,
		G:           16,
		InitRTT:     20_000,
		PacingBurst: 64 << 10,
	}
}

func (c *Config) fill() {
	d := DefaultConfig()
	if c.MSS <= 0 {
		c.MSS = d.MSS
	}
	if c.InitWindow <= 0 {
		c.InitWindow = d.InitWindow
	}
	if c.MinWindow <= 0 {
		c.MinWindow = 2 * c.MSS
	}
	if c.MaxWindow <= 0 {
		c.MaxWindow = d.MaxWindow
	}
	if c.G <= 0 {
		c.G = d.G
	}
	if c.InitRTT <= 0 {
		c.InitRTT = d.InitRTT
	}
	if c.PacingBurst <= 0 {
		c.PacingBurst = d.PacingBurst
	}
}

type pathState struct {
	used        bool
	cwnd        float64 // bytes
	alpha       float64 // EWMA of the marked fraction, 0..1
	ackedRound  int     // packets acked in the current observation round
	markedRound int     // of which ECN marked
	roundEnd    int64   // when the current round ends (one RTT after it began)
	srtt        int64
}

// AIMD is the MetaRoCE sender controller (docs/spec.md §3.5): per path, an
// additive increase of one MSS per RTT and, once per RTT in which marks were
// seen, a multiplicative decrease by alpha/2 where alpha is the EWMA of the
// marked fraction (DCTCP's proportional cut, so light marking trims a little
// and heavy marking halves). The connection window is the sum of the path
// windows, capped by Config.ConnWindow and by rate hint × RTT; the pacing rate
// follows the rate hint. Losses do not change windows: on a lossy fabric a
// drop says nothing about queues, and ECN already does.
type AIMD struct {
	cfg    Config
	paths  []pathState
	hint   uint64 // bytes/s, 0 = none
	srtt   int64  // connection-wide smoothed RTT, ns
	minRTT int64  // smallest RTT sample, ns (0 = none yet)
	sum    float64

	// The connection's share of the hint (docs/spec.md §3.5): the hint
	// divides the receiver's inbound rate exactly, so a queue built before
	// the hints arrived (or by pacing bursts) would never drain at 100%.
	// ECN marks therefore also scale the paced rate down, DCTCP-style once
	// per RTT over all paths, and unmarked rounds restore it.
	rateScale   float64 // 1/64..1
	connAlpha   float64
	connAcked   int
	connMarked  int
	connRoundAt int64
}

// NewAIMD returns a controller with no paths.
func NewAIMD(cfg Config) *AIMD {
	cfg.fill()
	return &AIMD{cfg: cfg, srtt: cfg.InitRTT, rateScale: 1}
}

// AddPath implements Controller.
func (a *AIMD) AddPath(now int64, p int) {
	if p < 0 || p >= MaxPaths {
		return
	}
	for len(a.paths) <= p {
		a.paths = append(a.paths, pathState{})
	}
	ps := &a.paths[p]
	if ps.used {
		a.sum -= ps.cwnd
	}
	*ps = pathState{used: true, cwnd: float64(a.cfg.InitWindow), srtt: a.srtt}
	a.sum += ps.cwnd
}

// PathWindow implements Controller.
func (a *AIMD) PathWindow(p int) int {
	if p < 0 || p >= len(a.paths) || !a.paths[p].used {
		return 0
	}
	return int(a.paths[p].cwnd)
}

// ConnWindow implements Controller.
func (a *AIMD) ConnWindow() int {
	w := a.sum
	if a.cfg.ConnWindow > 0 && w > float64(a.cfg.ConnWindow) {
		w = float64(a.cfg.ConnWindow)
	}
	if a.hint > 0 {
		// Allow twice the hinted bandwidth-delay product in flight so that
		// the pacer, not the window, is what holds the sender at its share.
		bdp := 2 * float64(a.hint) * float64(a.srtt) / 1e9
		if bdp < float64(2*a.cfg.MSS) {
			bdp = float64(2 * a.cfg.MSS)
		}
		if w > bdp {
			w = bdp
		}
	}
	return int(w)
}

// PacingRate implements Controller: the hint scaled by the ECN rate
// factor, capped by the line rate.
func (a *AIMD) PacingRate() uint64 {
	r := uint64(float64(a.hint) * a.rateScale)
	if a.hint > 0 && r == 0 {
		r = 1
	}
	if a.cfg.LineRate > 0 && (r == 0 || r > a.cfg.LineRate) {
		r = a.cfg.LineRate
	}
	return r
}

// Burst is the number of bytes the pacer lets out back to back: at most
// PacingBurst, and under a hint at most a quarter of the hinted
// bandwidth-delay product (at least one packet), so that N senders that
// start together put about BDP/4 into the receiver's queue, not
// N × PacingBurst.
func (a *AIMD) Burst() int {
	b := a.cfg.PacingBurst
	if r := a.PacingRate(); a.hint > 0 && r > 0 {
		rtt := a.minRTT
		if rtt <= 0 {
			rtt = a.srtt
		}
		b = min(b, max(a.cfg.MSS, int(float64(r)*float64(rtt)/1e9/4)))
	}
	return b
}

// SRTT is the connection-wide smoothed RTT in nanoseconds.
func (a *AIMD) SRTT() int64 { return a.srtt }

// OnAck implements Controller.
func (a *AIMD) OnAck(now int64, p int, ackedBytes, ackedPkts, markedPkts int, rtt int64) {
	if p < 0 || p >= len(a.paths) || !a.paths[p].used {
		return
	}
	ps := &a.paths[p]
	if rtt > 0 {
		if ps.srtt == 0 {
			ps.srtt = rtt
		} else {
			ps.srtt += (rtt - ps.srtt) / 8
		}
		a.srtt += (rtt - a.srtt) / 8
		if a.minRTT == 0 || rtt < a.minRTT {
			a.minRTT = rtt
		}
	}
	a.onAckRate(now, ackedPkts, markedPkts)
	ps.ackedRound += ackedPkts
	ps.markedRound += markedPkts
	old := ps.cwnd
	if markedPkts == 0 {
		// Additive increase: one MSS per window's worth of acked bytes.
		ps.cwnd += float64(a.cfg.MSS) * float64(ackedBytes) / ps.cwnd
	}
	if now >= ps.roundEnd {
		if ps.ackedRound > 0 {
			f := float64(ps.markedRound) / float64(ps.ackedRound)
			g := 1 / float64(a.cfg.G)
			ps.alpha = (1-g)*ps.alpha + g*f
			if ps.markedRound > 0 {
				// A marked round: cut in proportion to the congestion
				// extent; never below half.
				cut := ps.alpha / 2
				if f > ps.alpha {
					// React to a sudden surge within this round rather
					// than waiting for the EWMA to catch up.
					cut = f / 2
				}
				ps.cwnd *= 1 - cut
			}
		}
		ps.ackedRound, ps.markedRound = 0, 0
		srtt := ps.srtt
		if srtt <= 0 {
			srtt = a.srtt
		}
		ps.roundEnd = now + srtt
	}
	ps.cwnd = clamp(ps.cwnd, float64(a.cfg.MinWindow), float64(a.cfg.MaxWindow))
	a.sum += ps.cwnd - old
}

// onAckRate runs the connection-wide ECN round that scales the paced rate:
// once per smoothed RTT, a round with marks multiplies the scale by
// 1 − max(alpha, f)/2 (f the round's marked fraction, alpha its EWMA with
// gain 1/G); a round without marks adds 1/16 back, up to 1 (a faster
// return, half the distance per round, oscillated under 32-sender incast).
func (a *AIMD) onAckRate(now int64, acked, marked int) {
	a.connAcked += acked
	a.connMarked += marked
	if now < a.connRoundAt || a.connAcked == 0 {
		return
	}
	f := float64(a.connMarked) / float64(a.connAcked)
	g := 1 / float64(a.cfg.G)
	a.connAlpha = (1-g)*a.connAlpha + g*f
	if a.connMarked > 0 {
		a.rateScale *= 1 - max(a.connAlpha, f)/2
	} else {
		a.rateScale += 1.0 / 16
	}
	a.rateScale = clamp(a.rateScale, 1.0/64, 1)
	a.connAcked, a.connMarked = 0, 0
	a.connRoundAt = now + a.srtt
}

// OnLoss implements Controller: a loss is not a congestion signal.
func (a *AIMD) OnLoss(now int64, p int, bytes int) {}

// OnTimeout implements Controller: a timeout on a path means the path may be
// broken rather than congested; the window is reset to its initial value so
// that a revived path ramps up again instead of flooding.
func (a *AIMD) OnTimeout(now int64, p int) {
	if p < 0 || p >= len(a.paths) || !a.paths[p].used {
		return
	}
	ps := &a.paths[p]
	old := ps.cwnd
	if ps.cwnd > float64(a.cfg.InitWindow) {
		ps.cwnd = float64(a.cfg.InitWindow)
	}
	a.sum += ps.cwnd - old
}

// OnRateHint implements Controller.
func (a *AIMD) OnRateHint(now int64, bytesPerSec uint64) { a.hint = bytesPerSec }

func clamp(v, lo, hi float64) float64 {
	if v < lo {
		return lo
	}
	if v > hi {
		return hi
	}
	return v
}
