package cc

import (
	"math"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

const testLine = 50e9 // 400 Gb/s in bytes/s

// effectiveRate is what a controller lets a sender achieve over a path of
// the given RTT: the pacing rate, bounded by window/RTT.
func effectiveRate(c Controller, rtt int64) float64 {
	r := math.Inf(1)
	if p := c.PacingRate(); p > 0 {
		r = float64(p)
	}
	if w := float64(c.ConnWindow()) * 1e9 / float64(rtt); w < r {
		r = w
	}
	return min(r, testLine)
}

// drive feeds a controller one RTT of ACKs per step for steps steps, all
// marked or none, and returns the time reached.
func drive(c Controller, now, rtt int64, steps int, marked bool) int64 {
	const mss = 4096 + 64
	for i := 0; i < steps; i++ {
		now += rtt
		bytes := int(effectiveRate(c, rtt) * float64(rtt) / 1e9)
		pkts := max(bytes/mss, 1)
		m := 0
		if marked {
			m = pkts
		}
		c.OnAck(now, 0, bytes, pkts, m, rtt)
	}
	return now
}

// TestControllersShared is the behaviour every controller shares: marks cut
// the rate, and without marks it recovers (docs/spec.md §3.5 for AIMD; the
// DCQCN paper §3 for DCQCN).
func TestControllersShared(t *testing.T) {
	cases := []struct {
		name string
		mk   func() Controller
	}{
		{"aimd", func() Controller { return NewAIMD(Config{LineRate: testLine}) }},
		{"dcqcn", func() Controller { return NewDCQCN(DCQCNConfig{LineRate: testLine}) }},
	}
	const rtt = 10_000
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			c := tc.mk()
			c.AddPath(0, 0)
			start := effectiveRate(c, rtt)
			now := drive(c, 0, rtt, 3, false)
			before := effectiveRate(c, rtt)
			require.GreaterOrEqual(t, before, start*0.99)
			now = drive(c, now, rtt, 20, true)
			cut := effectiveRate(c, rtt)
			assert.Less(t, cut, 0.5*before, "20 marked RTTs must at least halve the rate")
			// Loss and timeouts alone must not increase the rate.
			c.OnLoss(now, 0, 1)
			assert.LessOrEqual(t, effectiveRate(c, rtt), cut*1.0001)
			drive(c, now, rtt, 5000, false) // 50 ms clean
			assert.Greater(t, effectiveRate(c, rtt), 0.9*before, "rate must recover without marks")
		})
	}
}

func TestDCQCNCutFollowsAlpha(t *testing.T) {
	d := NewDCQCN(DCQCNConfig{LineRate: testLine})
	// alpha starts at 1: the first CNP halves the rate (paper, Figure 6).
	d.OnCNP(0)
	assert.InDelta(t, testLine/2, float64(d.Rate(0)), 1)
	assert.InDelta(t, 1.0, d.Alpha(), 1e-9)
	// Without CNPs alpha decays by (1-g) per 55 µs.
	d.Rate(10 * 55_000)
	assert.InDelta(t, math.Pow(1-1.0/256, 10), d.Alpha(), 1e-9)
}

func TestDCQCNFastRecovery(t *testing.T) {
	d := NewDCQCN(DCQCNConfig{LineRate: testLine})
	d.OnCNP(0)
	rt, rc := float64(testLine), float64(testLine)/2
	// Five timer stages halve the distance to the target each time.
	for i := 1; i <= 5; i++ {
		rc = (rt + rc) / 2
		assert.InDelta(t, rc, float64(d.Rate(int64(i)*55_000)), 1, "stage %d", i)
	}
	// The sixth stage is additive: the target moves up by R_AI, capped at
	// line rate.
	rt = min(rt+testLine/1000, testLine)
	rc = (rt + rc) / 2
	assert.InDelta(t, rc, float64(d.Rate(6*55_000)), 1)
}

func TestDCQCNByteCounterAndFloor(t *testing.T) {
	d := NewDCQCN(DCQCNConfig{LineRate: testLine})
	for i := 0; i < 10_000; i++ {
		d.OnCNP(int64(i))
	}
	assert.Equal(t, d.Config().MinRate, d.Rate(10_000))
	assert.EqualValues(t, 10_000, d.CNPs())

	d = NewDCQCN(DCQCNConfig{LineRate: testLine})
	d.OnCNP(0)
	r := d.Rate(0)
	d.OnSent(0, 10<<20-1)
	assert.Equal(t, r, d.Rate(0), "below one byte-counter stage")
	d.OnSent(0, 1) // completes one byte-counter stage: fast recovery
	assert.InDelta(t, (testLine+float64(r))/2, float64(d.Rate(0)), 1)
}

func TestDCQCNDefaults(t *testing.T) {
	c := DefaultDCQCNConfig(5e9) // 40 Gb/s, the paper's setting
	assert.EqualValues(t, 5e6, c.RAI, "40 Mb/s = 5 MB/s at 40 Gb/s")
	assert.InDelta(t, 1.0/256, c.G, 1e-12)
	assert.EqualValues(t, 55_000, c.RateTimer)
	assert.EqualValues(t, 10<<20, c.ByteCounter)
	assert.Equal(t, 5, c.F)
	assert.EqualValues(t, 50_000, c.CNPInterval)
}

// TestAIMDDrain: under a hint and while ACKs report CE marks, queueing
// delay beyond an eighth of the minimum RTT slows the pacer in proportion,
// floored at a quarter; no hint, no queue or no marks leave the rate alone.
func TestAIMDDrain(t *testing.T) {
	half := []int64{10_000, 16_250, 16_250, 16_250, 16_250, 16_250, 16_250, 16_250, 16_250, 16_250, 16_250}
	cases := []struct {
		name       string
		hint       uint64
		marked     int
		rtts       []int64
		wantFactor float64
	}{
		{"no hint", 0, 1, []int64{10_000, 20_000, 20_000}, 1},
		{"no queue", testLine / 4, 1, []int64{10_000, 10_000}, 1},
		{"within tolerance", testLine / 4, 1, []int64{10_000, 11_250, 11_250, 11_250, 11_250, 11_250, 11_250}, 1},
		{"half an RTT queued", testLine / 4, 1, half, 0.5},
		{"delay without marks", testLine / 4, 0, half, 1},
		{"floor", testLine / 4, 1, []int64{10_000, 90_000, 90_000, 90_000, 90_000, 90_000, 90_000, 90_000, 90_000, 90_000, 90_000}, 0.25},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			a := NewAIMD(Config{LineRate: testLine})
			a.AddPath(0, 0)
			a.OnRateHint(0, tc.hint)
			for i, r := range tc.rtts {
				a.OnAck(int64(i)*1000, 0, 4096, 1, tc.marked, r)
			}
			if tc.hint == 0 {
				assert.Equal(t, uint64(testLine), a.PacingRate())
				return
			}
			assert.InDelta(t, tc.wantFactor*float64(tc.hint), float64(a.PacingRate()), 0.02*float64(tc.hint))
		})
	}
}
