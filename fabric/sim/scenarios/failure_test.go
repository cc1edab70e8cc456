package scenarios

import (
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/metaroce/metaroce/transport"
)

// TestFailureFabricBaseRTT: the failure scenario's fabric (4 leaves, 4
// spines, 8 hosts per leaf) has 800 Gb/s uplinks under 400 Gb/s host
// links, and its base RTT, its RTT bins and the MetaRoCE timers scaled to
// it count them at 800 Gb/s: a 4218-byte packet takes 84 ns on a host link
// and 42 on an uplink, its 130-byte acknowledgement 2 and 1, so
// 8 × 1000 + 2 × (84 + 42) + 2 × (2 + 1) = 8258 ns (8344 with every link
// at the host rate). TestFailureSmoke checks the smoke fabric's (2 × 2 × 4,
// the same rates).
func TestFailureFabricBaseRTT(t *testing.T) {
	o := Options{}
	o.fill()
	c := o.fabric(4, 4, 8, 1)
	assert.Equal(t, 800e9, c.UplinkRate())
	assert.EqualValues(t, 8258, c.BaseRTT(4218, 130))
	tc := metaroceConfig(&o, c)
	assert.Equal(t, 2*8258*transport.Nanosecond, tc.InitialRTT)
	assert.Equal(t, 4129*transport.Nanosecond, tc.AckDelay)
	assert.Equal(t, 8258*transport.Nanosecond, tc.TailProbeFloor)

}

// TestRecoveryRTTs checks recoveryRTTs on synthetic bins of one RTT from
// the failure: the first 3-bin window (bins 0–2) ends 3 RTTs after it.
func TestRecoveryRTTs(t *testing.T) {
	const floor = 0.9
	flat := func(n int) []float64 {
		fr := make([]float64, n)
		for i := range fr {
			fr[i] = 1
		}
		return fr
	}

	assert.Equal(t, 3.0, recoveryRTTs(flat(12), floor), "every window passes: the first one's end")

	// A dip in bin 6 fails the windows ending with bins 6, 7 and 8; the
	// first passing window is bins 7–9, which ends 10 RTTs after the
	// failure (the end of the last failing window, 9, would be one short).
	fr := flat(12)
	fr[6] = 0.5
	assert.Equal(t, 10.0, recoveryRTTs(fr, floor))

	// A dip in the first RTT that the next two make up for fails nothing.
	fr = flat(12)
	fr[0] = 0.75
	assert.Equal(t, 3.0, recoveryRTTs(fr, floor))

	// Only the first window fails: recovery at the end of the second.
	fr = flat(12)
	fr[0] = 0.5
	assert.Equal(t, 4.0, recoveryRTTs(fr, floor))

	// The last window fails: never recovered.
	fr = flat(12)
	fr[11] = 0.5
	assert.Equal(t, -1.0, recoveryRTTs(fr, floor))

	// The run ends before a whole window after the failure.
	assert.Equal(t, -1.0, recoveryRTTs(flat(2), floor))
}

// TestRecoveryBin checks recoveryBin on synthetic 50 µs bins from the bin
// of the failure, against a floor of 90 (90% of a level of 100 before
// it). Recovery is judged against that floor, never against the run's
// own final level: a throughput that collapses to zero and stays there
// is the same at the end as right after the failure, and must read
// "never", not "at once".
func TestRecoveryBin(t *testing.T) {
	for _, tc := range []struct {
		name  string
		g     []float64
		floor float64
		want  int
	}{
		{"every bin at the level", []float64{100, 100, 100, 100}, 90, 0},
		{"a dip, then recovered for good", []float64{100, 40, 80, 95, 100}, 90, 3},
		{"exactly the floor counts", []float64{50, 90, 90}, 90, 1},
		{"collapsed to zero", []float64{100, 0, 0, 0, 0}, 90, -1},
		{"zero from the failure on", []float64{0, 0, 0}, 90, -1},
		{"settled below the floor", []float64{100, 30, 30, 30}, 90, -1},
		{"recovered, then lost again at the end", []float64{100, 100, 100, 50}, 90, -1},
		{"nothing before the failure: no recovery to nothing", []float64{0, 0, 0}, 0, -1},
		{"nothing before the failure, something after", []float64{0, 5, 5}, 0, 1},
		{"no bins after the failure", nil, 90, -1},
	} {
		assert.Equal(t, tc.want, recoveryBin(tc.g, tc.floor), tc.name)
	}
}
