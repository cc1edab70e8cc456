package cc

import "fmt"

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
	// CatchUpTime (ns) and CatchUpBytes let a backlogged sender (held by
	// the pacer or its window since before its next packet was due) make
	// up the lateness of the turn that sends it: the pacing rate's bytes
	// of at most CatchUpTime, at most CatchUpBytes, may leave back to
	// back (transport's pacer applies it). After an idle spell only Burst
	// applies, which keeps the senders of an incast within BDP/4 each. 0 (the default)
	// or less: none, for a pacer that can send at any instant. A software
	// pacer runs only when its event loop turns, tens of µs apart on a
	// busy host: held to Burst, one packet under a hint, it moved a
	// 1.25 GB/s hint at one 1472-byte datagram per turn.
	CatchUpTime  int64
	CatchUpBytes int
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

// Validate reports the first field of c that is out of range, naming the
// field, its value and what it takes; nil when c is usable. Zero fields
// stand for their defaults and are accepted. A negative size, gain or RTT
// is refused rather than read as the default: whoever wrote it meant
// something (none, unlimited) the default is not. CatchUpTime and
// CatchUpBytes keep their documented meaning of 0 or less (none). The
// window bounds must hold together once defaults are filled in: a floor
// above the ceiling, or a start above it, leaves no window the controller
// can keep to (clamp would pin every path at MinWindow, above MaxWindow).
func (c Config) Validate() error {
	for _, f := range []struct {
		name string
		v    int64
	}{
		{"MSS", int64(c.MSS)}, {"InitWindow", int64(c.InitWindow)}, {"MinWindow", int64(c.MinWindow)},
		{"MaxWindow", int64(c.MaxWindow)}, {"ConnWindow", int64(c.ConnWindow)}, {"G", int64(c.G)},
		{"InitRTT", c.InitRTT}, {"PacingBurst", int64(c.PacingBurst)},
	} {
		if f.v < 0 {
			return fmt.Errorf("cc: Config.%s is %d: want a positive value, or 0 for the default", f.name, f.v)
		}
	}
	c.fill()
	if c.MinWindow > c.MaxWindow {
		return fmt.Errorf("cc: Config.MinWindow (%d bytes) exceeds MaxWindow (%d bytes): want MinWindow ≤ MaxWindow (0 takes 2 × MSS and %d bytes)",
			c.MinWindow, c.MaxWindow, DefaultConfig().MaxWindow)
	}
	if c.InitWindow > c.MaxWindow {
		return fmt.Errorf("cc: Config.InitWindow (%d bytes) exceeds MaxWindow (%d bytes): want InitWindow ≤ MaxWindow (0 takes %d and %d bytes)",
			c.InitWindow, c.MaxWindow, DefaultConfig().InitWindow, DefaultConfig().MaxWindow)
	}
	return nil
}

type pathState struct {
	used        bool
	cwnd        float64 // bytes
	alpha       float64 // EWMA of the marked fraction, 0..1
	ackedRound  int     // packets acked in the current observation round
	markedRound int     // of which ECN marked
	roundEnd    int64   // when the current round ends (one RTT after it began)
	roundFlight int     // most bytes in flight on the path in the round (0 = unknown)
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
	npaths int // paths in use
	// marked is set by the first ACK that reports CE marks: until then the
	// path windows are at least their share of hint × srtt (hintFloor).
	marked bool
	hint   uint64 // bytes/s, 0 = none
	hintAt int64  // when hint was set, ns
	// restart is set while the sender restarts after idling on a stale
	// hint (Restart): the hint is ignored and the connection window is at
	// most InitWindow, until the next hint arrives.
	restart bool
	srtt    int64 // connection-wide smoothed RTT, ns
	minRTT  int64 // smallest RTT sample, ns (0 = none yet)
	fRTT    int64 // fast-moving RTT average (gain 1/2), ns: the queueing now
	fFwd    int64 // forward queueing delay now (OnFwdDelay), ns
	fwdSeen bool  // the receiver reports forward delays: fFwd, not fRTT, drives drain
	ackAt   int64 // time of the latest ACK, ns
	markAt  int64 // time of the latest ACK that reported CE marks, ns
	sum     float64
}

// NewAIMD returns a controller with no paths.
func NewAIMD(cfg Config) *AIMD {
	cfg.fill()
	return &AIMD{cfg: cfg, srtt: cfg.InitRTT}
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
	} else {
		a.npaths++
	}
	*ps = pathState{used: true, cwnd: float64(a.cfg.InitWindow), srtt: a.srtt}
	a.sum += ps.cwnd
}

// PathWindow implements Controller.
func (a *AIMD) PathWindow(p int) int {
	if p < 0 || p >= len(a.paths) || !a.paths[p].used {
		return 0
	}
	return int(max(a.paths[p].cwnd, a.hintFloor()))
}

// hintFloor is the least window of a path while the connection has seen no
// CE mark and follows a rate hint: the path's share of hint × srtt, what
// the connection must have in flight to send at its hint (docs/spec.md
// §3.5). The pacer holds the sender at the hint, which is the receiver's
// share for it, and no switch has reported congestion yet, so the windows
// have nothing to hold back; an initial window below the bandwidth-delay
// product only stalled the sender for an RTT (a 64 KiB path window is 0.6 of
// a 400 Gb/s, 8.3 µs fabric's BDP over four paths). Before the first RTT
// sample srtt is the configured initial RTT. From the first marked ACK on
// the windows alone bound the paths. 0 when no floor applies.
func (a *AIMD) hintFloor() float64 {
	hint := a.liveHint()
	if a.marked || hint == 0 || a.npaths == 0 {
		return 0
	}
	return float64(hint) * float64(a.srtt) / 1e9 / float64(a.npaths)
}

// ConnWindow implements Controller.
func (a *AIMD) ConnWindow() int {
	w := max(a.sum, a.hintFloor()*float64(a.npaths))
	if a.cfg.ConnWindow > 0 && w > float64(a.cfg.ConnWindow) {
		w = float64(a.cfg.ConnWindow)
	}
	if a.restart {
		return int(min(w, a.restartWindow()))
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

// PacingRate implements Controller: the hint scaled by the drain factor,
// capped by the line rate. (ECN marks at the receiver's queue scale the
// hint itself, at the receiver, so that every sender gets the same cut;
// docs/spec.md §3.5.)
func (a *AIMD) PacingRate() uint64 {
	hint := a.liveHint()
	r := uint64(float64(hint) * a.drain())
	if hint > 0 && r == 0 {
		r = 1
	}
	if a.cfg.LineRate > 0 && (r == 0 || r > a.cfg.LineRate) {
		r = a.cfg.LineRate
	}
	return r
}

// drain is the factor that empties a queue standing in front of the
// receiver (docs/spec.md §3.5). The hints of all senders add up to the
// receiver's capacity exactly, so a queue built before they took hold (the
// first packets of an incast, whose count no hint can prevent) would stand
// for ever, and the ECN rounds remove it only over tens of RTTs. The queueing
// delay q says how big the queue is in time at the bottleneck: the forward
// queueing the receiver measured (OnFwdDelay) when it reports it, else
// fRTT − minRTT, which also counts the queues the acknowledgements wait in
// on the way back (behind other connections' data, or behind the
// receiver's own outbound traffic on its NIC), and slowed senders whose
// own path was empty. Every sender of an incast sees the same q, so pacing at
// hint × (1 − q/minRTT) drains it in about one RTT. An eighth of the minimum
// RTT of queueing is tolerated (jitter and the odd burst; a quarter let a
// 125 KB queue stand above a 100 KB marking threshold at 400 Gb/s and 10 µs),
// and the factor is floored at 1/4. It applies only while CE marks were
// reported within the last 1024 smoothed RTTs: a queue worth draining is
// one a switch marks (a bottleneck marked once is likely to fill again, so
// the memory is long: with 64 RTTs the queue of a 63-sender incast crept
// back above the marking threshold once the start-up marks were forgotten),
// and delay alone also grows with a software datapath's jitter, which must
// not slow a sender that sees no marks.
func (a *AIMD) drain() float64 {
	if a.liveHint() == 0 || a.minRTT <= 0 || a.fRTT <= 0 || a.markAt == 0 || a.ackAt-a.markAt > 1024*a.srtt {
		return 1
	}
	q := a.fRTT - a.minRTT
	if a.fwdSeen {
		q = a.fFwd
	}
	q -= a.minRTT / 8
	if q <= 0 {
		return 1
	}
	return max(0.25, 1-float64(q)/float64(a.minRTT))
}

// Burst is the number of bytes the pacer lets out back to back: at most
// PacingBurst, and under a hint at most a quarter of the hinted
// bandwidth-delay product (at least one packet), so that N senders that
// start together put about BDP/4 into the receiver's queue, not
// N × PacingBurst.
func (a *AIMD) Burst() int {
	b := a.cfg.PacingBurst
	if r := a.PacingRate(); a.liveHint() > 0 && r > 0 {
		// Before the first RTT sample one packet: the senders of an
		// incast start together, and a burst of BDP/4 each (with the
		// assumed RTT) was what filled the receiver's queue.
		b = a.cfg.MSS
		if a.minRTT > 0 {
			b = min(a.cfg.PacingBurst, max(a.cfg.MSS, int(float64(r)*float64(a.minRTT)/1e9/4)))
		}
	}
	return b
}

// CatchUp returns the pacer's catch-up allowance (Config.CatchUpTime, ns,
// and CatchUpBytes); span 0 when there is none.
func (a *AIMD) CatchUp() (span int64, most int) {
	if a.cfg.CatchUpTime <= 0 || a.cfg.CatchUpBytes <= 0 {
		return 0, 0
	}
	return a.cfg.CatchUpTime, a.cfg.CatchUpBytes
}

// Hinted reports whether the pacing rate follows a receiver's rate hint.
func (a *AIMD) Hinted() bool { return a.liveHint() > 0 }

// liveHint is the hint that governs the sender now: 0 while it restarts on
// a stale one.
func (a *AIMD) liveHint() uint64 {
	if a.restart {
		return 0
	}
	return a.hint
}

// StaleHintRTTs is the age, in smoothed RTTs, beyond which a hint received
// while the connection had nothing in flight no longer describes the
// receiver when the sender starts again (Restart). The senders of an
// incast, whose first RTT the receiver's starting hint is there to bound,
// hold their data before the RECV_READY carrying that hint arrives and
// start within the RTT; a pairwise all-to-all, which posts every receive
// up front, reaches its k-th peer k rounds later. With 4, the rounds of a
// 1 MiB all-to-all over 64 hosts that began within 4 RTTs of the posts
// were paced at the starting hint and took 2–3 times as long as the rest.
const StaleHintRTTs = 1

// Restart is called by the sender when it is about to send new data with
// nothing in flight, the hint having arrived while nothing was in flight
// either. A hint older than StaleHintRTTs smoothed RTTs is then stale: it
// was the receiver's starting hint for a connection that did not send yet
// (a share of the capacity among every established connection, halved;
// docs/spec.md §3.5), and a pairwise all-to-all, which posts every receive
// up front and then sends to one peer at a time, paced each round's first
// RTT at about 1/(2N) of the link that way. Until the next hint arrives
// (the ACK of its first DATA brings a fresh one) the sender ignores the
// stale hint and sends at most restartWindow, paced at LineRate; a stale
// hint that allows more than that per smoothed RTT is kept. Restart
// reports whether the sender restarts.
func (a *AIMD) Restart(now int64) bool {
	if a.restart {
		return true
	}
	if a.hint == 0 || now-a.hintAt <= StaleHintRTTs*a.srtt {
		return false
	}
	if float64(a.hint)*float64(a.srtt)/1e9 >= a.restartWindow() {
		// The stale hint already allows more than the restart window
		// per RTT: restarting would only slow the sender (a ring's
		// lone sender, hinted the whole link, idling between steps).
		return false
	}
	a.restart = true
	return true
}

// restartWindow is what a sender restarting on a stale hint may have in
// flight: its path windows, each at most InitWindow. That is what a new
// connection without any hint may put into the fabric in its first RTT
// (every path starts at InitWindow), less what ECN cuts took from a path
// since, so a path that saw congestion restarts no larger than it was.
// A cap of one path's InitWindow for the whole connection sent a round of
// a pairwise all-to-all (a quarter MiB per peer at 16 MiB over 64 hosts,
// less than one bandwidth-delay product) in two RTTs instead of one.
func (a *AIMD) restartWindow() float64 {
	var w float64
	for i := range a.paths {
		if ps := &a.paths[i]; ps.used {
			w += min(ps.cwnd, float64(a.cfg.InitWindow))
		}
	}
	return w
}

// SRTT is the connection-wide smoothed RTT in nanoseconds.
func (a *AIMD) SRTT() int64 { return a.srtt }

// OnAck implements Controller.
func (a *AIMD) OnAck(now int64, p int, ackedBytes, ackedPkts, markedPkts int, rtt int64) {
	a.OnAckFlight(now, p, ackedBytes, ackedPkts, markedPkts, rtt, -1)
}

// OnAckFlight is OnAck with the bytes still in flight on path p after the
// acknowledgement (-1: unknown). A marked round cuts the smaller of the
// window and the most the path had in flight in the round: a window that
// grew while the pacer, not the window, held the sender back is larger
// than what is in flight, and cutting it would not slow the path down.
func (a *AIMD) OnAckFlight(now int64, p int, ackedBytes, ackedPkts, markedPkts int, rtt int64, inflight int) {
	if p < 0 || p >= len(a.paths) || !a.paths[p].used {
		return
	}
	ps := &a.paths[p]
	a.ackAt = now
	if markedPkts > 0 {
		a.markAt = now
		if !a.marked {
			// The first congestion signal: the windows take over from
			// the floor at what the floor allowed, and the marked
			// round cuts them from there (at most from the flight).
			if f := a.hintFloor(); f > 0 {
				for i := range a.paths {
					if q := &a.paths[i]; q.used && q.cwnd < f {
						a.sum += f - q.cwnd
						q.cwnd = f
					}
				}
			}
			a.marked = true
		}
	}
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
		if a.fRTT == 0 {
			a.fRTT = rtt
		} else {
			a.fRTT += (rtt - a.fRTT) / 2
		}
	}
	ps.ackedRound += ackedPkts
	ps.markedRound += markedPkts
	if inflight >= 0 {
		ps.roundFlight = max(ps.roundFlight, inflight+ackedBytes)
	}
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
				if a.drain() < 1 {
					// The pacer is draining a queue that every
					// route to the receiver crosses (the least
					// forward delay of the active paths): the
					// marks are that queue's, which the pacer
					// already removes. Cutting the window too,
					// from a flight the pacer had already
					// shrunk, left it far below the
					// bandwidth-delay product once the queue was
					// gone, and additive increase took 10 and
					// more RTTs to restore it.
					cut = 0
				} else if ps.roundFlight > 0 {
					ps.cwnd = min(ps.cwnd, float64(ps.roundFlight))
				}
				ps.cwnd *= 1 - cut
			}
		}
		ps.ackedRound, ps.markedRound, ps.roundFlight = 0, 0, 0
		srtt := ps.srtt
		if srtt <= 0 {
			srtt = a.srtt
		}
		ps.roundEnd = now + srtt
	}
	ps.cwnd = clamp(ps.cwnd, float64(a.cfg.MinWindow), float64(a.cfg.MaxWindow))
	a.sum += ps.cwnd - old
}

// OnFwdDelay sets the forward queueing delay, ns, that the drain factor
// uses from now on instead of the RTT's inflation: the sender's estimate of
// the queue its DATA meets on the way to the receiver, from the delays the
// receiver measured (docs/spec.md §3.5).
func (a *AIMD) OnFwdDelay(now int64, q int64) {
	a.fwdSeen, a.fFwd = true, q
}

// OnLoss implements Controller: a loss is not a congestion signal.
func (a *AIMD) OnLoss(now int64, p int, pkts int) {}

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
func (a *AIMD) OnRateHint(now int64, bytesPerSec uint64) {
	a.hint, a.hintAt, a.restart = bytesPerSec, now, false
}

func clamp(v, lo, hi float64) float64 {
	if v < lo {
		return lo
	}
	if v > hi {
		return hi
	}
	return v
}
