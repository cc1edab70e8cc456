package cc

import "math"

// DCQCNConfig parameterises DCQCN (Zhu et al., "Congestion Control for
// Large-Scale RDMA Deployments", SIGCOMM 2015). Zero fields take the
// defaults of DefaultDCQCNConfig. Rates are bytes per second, times
// nanoseconds.
type DCQCNConfig struct {
	LineRate    uint64  // NIC rate, the start and ceiling of the current rate (required)
	G           float64 // alpha EWMA gain; paper: 1/256
	AlphaTimer  int64   // alpha decays by (1-G) when no CNP arrived for this long; paper: 55 µs
	RateTimer   int64   // one rate-increase stage per this much time; paper: 55 µs
	ByteCounter int64   // one rate-increase stage per this many bytes sent; paper: 10 MB
	F           int     // fast-recovery stages before additive increase; paper: 5
	RAI         uint64  // additive increase step; paper: 40 Mb/s at 40 Gb/s, scaled here as LineRate/1000
	RHAI        uint64  // hyper-increase step; ours: 10 × RAI
	MinRate     uint64  // floor of the current rate; ours: LineRate/4096
	CNPInterval int64   // receiver (NP) sends at most one CNP per QP per interval; paper: 50 µs
}

// DefaultDCQCNConfig returns the paper's parameters for a NIC of lineRate
// bytes per second, scaling the additive step with the line rate (the paper
// tuned 40 Mb/s for 40 Gb/s links).
func DefaultDCQCNConfig(lineRate uint64) DCQCNConfig {
	c := DCQCNConfig{LineRate: lineRate}
	c.fill()
	return c
}

func (c *DCQCNConfig) fill() {
	if c.LineRate == 0 {
		c.LineRate = 50e9 // 400 Gb/s
	}
	if c.G <= 0 || c.G > 1 {
		c.G = 1.0 / 256
	}
	if c.AlphaTimer <= 0 {
		c.AlphaTimer = 55_000
	}
	if c.RateTimer <= 0 {
		c.RateTimer = 55_000
	}
	if c.ByteCounter <= 0 {
		c.ByteCounter = 10 << 20
	}
	if c.F <= 0 {
		c.F = 5
	}
	if c.RAI == 0 {
		c.RAI = c.LineRate / 1000
	}
	if c.RHAI == 0 {
		c.RHAI = 10 * c.RAI
	}
	if c.MinRate == 0 {
		c.MinRate = c.LineRate / 4096
	}
	if c.CNPInterval <= 0 {
		c.CNPInterval = 50_000
	}
}

// maxTicks bounds the timer stages replayed in one call; after that many
// stages the rate has long returned to line rate.
const maxTicks = 1 << 14

// DCQCN is the reaction point (sender) of DCQCN for one queue pair: a rate
// limiter cut multiplicatively on every congestion notification (CNP) in
// proportion to alpha, the EWMA of how often CNPs arrive, and raised in
// stages driven by a timer and a byte counter: F fast-recovery stages
// towards the rate before the cut, then additive, then hyper increase.
//
// It implements Controller with one path: PacingRate is the current rate,
// windows are unlimited, an ACK with marked packets counts as a CNP and
// acknowledged bytes drive the byte counter (a driver with exact sent-byte
// counts calls OnSent instead). Timers are evaluated lazily from the now of
// each call, so no external timer is needed.
type DCQCN struct {
	cfg       DCQCNConfig
	rc, rt    float64 // current and target rate, bytes/s
	alpha     float64
	lastAlpha int64 // start of the current alpha-timer period
	lastRate  int64 // start of the current rate-timer period
	bytes     int64 // bytes counted towards the next byte-counter stage
	t, bc     int   // timer and byte-counter stages since the last cut
	cut       bool  // at least one CNP seen (timers idle until then)
	cnps      uint64
}

// NewDCQCN returns a controller sending at line rate.
func NewDCQCN(cfg DCQCNConfig) *DCQCN {
	cfg.fill()
	r := float64(cfg.LineRate)
	return &DCQCN{cfg: cfg, rc: r, rt: r, alpha: 1}
}

// Config returns the filled-in configuration.
func (d *DCQCN) Config() DCQCNConfig { return d.cfg }

// Rate is the current rate in bytes per second after advancing timers to now.
func (d *DCQCN) Rate(now int64) uint64 {
	d.advance(now)
	return uint64(d.rc)
}

// Alpha is the current congestion estimate, 0..1.
func (d *DCQCN) Alpha() float64 { return d.alpha }

// CNPs is the number of congestion notifications received.
func (d *DCQCN) CNPs() uint64 { return d.cnps }

// OnCNP applies a congestion notification: remember the rate as target, cut
// the current rate by alpha/2, raise alpha and restart the increase stages.
func (d *DCQCN) OnCNP(now int64) {
	d.advance(now)
	d.cnps++
	d.rt = d.rc
	d.rc *= 1 - d.alpha/2
	if min := float64(d.cfg.MinRate); d.rc < min {
		d.rc = min
	}
	d.alpha = (1-d.cfg.G)*d.alpha + d.cfg.G
	d.lastAlpha, d.lastRate = now, now
	d.bytes, d.t, d.bc = 0, 0, 0
	d.cut = true
}

// OnSent counts bytes sent towards the byte-counter increase stage.
func (d *DCQCN) OnSent(now int64, n int) {
	d.advance(now)
	if !d.cut {
		return
	}
	d.bytes += int64(n)
	for d.bytes >= d.cfg.ByteCounter {
		d.bytes -= d.cfg.ByteCounter
		d.bc++
		d.increase()
	}
}

// advance replays the alpha and rate timers up to now.
func (d *DCQCN) advance(now int64) {
	if !d.cut {
		return
	}
	if n := (now - d.lastAlpha) / d.cfg.AlphaTimer; n > 0 {
		d.alpha *= math.Pow(1-d.cfg.G, float64(n))
		d.lastAlpha += n * d.cfg.AlphaTimer
	}
	n := (now - d.lastRate) / d.cfg.RateTimer
	if n <= 0 {
		return
	}
	d.lastRate += n * d.cfg.RateTimer
	if n > maxTicks {
		n = maxTicks
	}
	for i := int64(0); i < n && d.cut; i++ {
		d.t++
		d.increase()
	}
}

// increase runs one increase stage (paper §3.2, Figure 7).
func (d *DCQCN) increase() {
	f := d.cfg.F
	switch {
	case max(d.t, d.bc) < f:
		// fast recovery: halve the distance to the target
	case min(d.t, d.bc) > f:
		i := min(d.t, d.bc) - f
		d.rt += float64(i) * float64(d.cfg.RHAI)
	default:
		d.rt += float64(d.cfg.RAI)
	}
	line := float64(d.cfg.LineRate)
	if d.rt > line {
		d.rt = line
	}
	d.rc = (d.rt + d.rc) / 2
	if d.rc >= line*0.9999 {
		// Back at line rate: nothing left to recover.
		d.rc, d.rt = line, line
		d.cut = false
	}
}

// AddPath implements Controller; DCQCN keeps one rate per queue pair.
func (d *DCQCN) AddPath(now int64, p int) {}

// PathWindow implements Controller: DCQCN is purely rate based.
func (d *DCQCN) PathWindow(p int) int { return math.MaxInt32 }

// ConnWindow implements Controller: DCQCN is purely rate based.
func (d *DCQCN) ConnWindow() int { return math.MaxInt32 }

// PacingRate implements Controller: the current rate. Callers that need the
// rate at a later time than their last call use Rate(now).
func (d *DCQCN) PacingRate() uint64 { return uint64(d.rc) }

// OnAck implements Controller: marked packets stand for a CNP, acked bytes
// for sent bytes.
func (d *DCQCN) OnAck(now int64, p int, ackedBytes, ackedPkts, markedPkts int, rtt int64) {
	if markedPkts > 0 {
		d.OnCNP(now)
		return
	}
	d.OnSent(now, ackedBytes)
}

// OnLoss implements Controller: DCQCN does not react to loss.
func (d *DCQCN) OnLoss(now int64, p int, pkts int) { d.advance(now) }

// OnTimeout implements Controller: DCQCN does not react to timeouts.
func (d *DCQCN) OnTimeout(now int64, p int) { d.advance(now) }

// OnRateHint implements Controller: DCQCN has no receiver hints.
func (d *DCQCN) OnRateHint(now int64, bytesPerSec uint64) { d.advance(now) }

var _ Controller = (*DCQCN)(nil)
