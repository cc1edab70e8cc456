package cc

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestAIMDDrainForwardOnly checks the drain factor of docs/spec.md §3.5:
// RTT samples inflated by a queue on the acknowledgements' way back slow a
// sender that learns only RTTs down to a quarter of its hint, while one
// whose receiver reports an empty forward path keeps its hint; a forward
// queue drains as an inflated RTT used to.
func TestAIMDDrainForwardOnly(t *testing.T) {
	const base = 10_000 // ns
	hint := uint64(testLine) / 2
	run := func(fwd int64, report bool) uint64 {
		a := NewAIMD(Config{LineRate: testLine, InitRTT: base})
		a.AddPath(0, 0)
		a.OnRateHint(0, hint)
		now := int64(0)
		a.OnAckFlight(now, 0, 4096, 1, 0, base, 0)
		for i := 0; i < 8; i++ {
			now += base
			if report {
				a.OnFwdDelay(now, fwd)
			}
			// Marked ACKs, each an RTT of three base RTTs: the
			// queue is on the reverse path unless fwd says otherwise.
			a.OnAckFlight(now, 0, 4096, 1, 1, 3*base, 0)
		}
		return a.PacingRate()
	}
	assert.Equal(t, hint/4, run(0, false), "RTT inflation alone drains at the floor")
	assert.Equal(t, hint, run(0, true), "an empty forward path keeps the hint")
	assert.Equal(t, hint/4, run(2*base, true), "a forward queue of two base RTTs drains at the floor")
	got := run(base/2, true)
	want := float64(hint) * (1 - (0.5 - 0.125))
	assert.InDelta(t, want, float64(got), want*1e-3, "a forward queue of half a base RTT")
}

// TestAIMDCutFromFlight checks that a marked round cuts a path's window from
// what the path had in flight when that is less than the window (docs/spec.md
// §3.5): a window that grew while the pacer held the sender back would
// otherwise take several marked rounds before it slowed anything.
func TestAIMDCutFromFlight(t *testing.T) {
	const rtt = 10_000 // ns
	grown := func(flight int) *AIMD {
		a := NewAIMD(Config{LineRate: testLine, InitRTT: rtt})
		a.AddPath(0, 0)
		now := int64(0)
		// Unmarked rounds grow the window to about 1 MB while only
		// 40 KB is ever in flight.
		for a.PathWindow(0) < 1<<20 {
			now += 100
			a.OnAckFlight(now, 0, 4096, 1, 0, rtt, flight)
		}
		return a
	}
	cut := func(a *AIMD, flight int) int {
		now := int64(1) << 40
		// Two rounds with every ACK marked.
		for i := 0; i < 2; i++ {
			a.OnAckFlight(now, 0, 4096, 1, 1, rtt, flight)
			now += rtt
		}
		return a.PathWindow(0)
	}
	a := grown(40_000)
	w := a.PathWindow(0)
	require.Greater(t, w, 1<<20-8192)
	assert.LessOrEqual(t, cut(a, 40_000), 40_000/2+4096, "cut from the 44 KB in flight")
	b := grown(-1)
	assert.Greater(t, cut(b, -1), w/4, "flight unknown: cut from the window, as OnAck does")
}

// TestAIMDNoCutWhileDraining checks that a marked round leaves the path
// windows alone while the pacer drains a forward queue that every path
// reports (docs/spec.md §3.5), and cuts them as before once the forward
// delay says the queue is on some routes only.
func TestAIMDNoCutWhileDraining(t *testing.T) {
	const rtt = 10_000 // ns
	run := func(fwd int64) (before, after int) {
		a := NewAIMD(Config{LineRate: testLine, InitRTT: rtt})
		a.AddPath(0, 0)
		a.OnRateHint(0, uint64(testLine)/2)
		now := int64(0)
		a.OnAckFlight(now, 0, 4096, 1, 1, rtt, 200_000)
		now += 2 * rtt
		a.OnAckFlight(now, 0, 4096, 1, 0, rtt, 200_000)
		before = a.PathWindow(0)
		for i := 0; i < 3; i++ {
			now += rtt
			a.OnFwdDelay(now, fwd)
			a.OnAckFlight(now, 0, 4096, 1, 1, rtt, 200_000)
		}
		return before, a.PathWindow(0)
	}
	b, w := run(rtt / 2)
	assert.Less(t, float64(b-w), 0.01*float64(b), "a queue the pacer drains: no cut")
	b, w = run(0)
	assert.Less(t, w, b*3/4, "no common forward queue: marked rounds cut")
}

// TestAIMDHintFloor checks the window floor of docs/spec.md §3.5: while
// the connection follows a hint and has seen no CE mark, every path may
// hold its share of hint × srtt whatever its window (the initial RTT
// before a sample), so the pacer alone holds the sender at its hint; the
// first marked ACK ends the floor, the windows taking over from what it
// allowed and the marked round cutting them from there. Without a hint,
// and while restarting on a stale one, the windows alone apply.
func TestAIMDHintFloor(t *testing.T) {
	const (
		rtt   = 10_000 // ns
		paths = 4
		init  = 16 << 10
	)
	newAIMD := func() *AIMD {
		a := NewAIMD(Config{LineRate: testLine, InitRTT: 2 * rtt, InitWindow: init})
		for p := 0; p < paths; p++ {
			a.AddPath(0, p)
		}
		return a
	}
	a := newAIMD()
	assert.Equal(t, init, a.PathWindow(0), "no hint: the initial window")
	assert.Equal(t, paths*init, a.ConnWindow())

	a.OnRateHint(0, testLine)
	bdp := float64(testLine) * 2 * rtt / 1e9 // the initial RTT before a sample
	assert.InDelta(t, bdp/paths, a.PathWindow(0), 1, "the share of hint × initial RTT")
	assert.InDelta(t, bdp, a.ConnWindow(), paths)

	// RTT samples bring srtt, and the floor, down towards the path's RTT.
	now := int64(0)
	for i := 0; i < 64; i++ {
		now += rtt / 8
		a.OnAckFlight(now, i%paths, 4096, 1, 0, rtt, -1)
	}
	bdp = float64(testLine) * rtt / 1e9
	assert.InDelta(t, bdp/paths, a.PathWindow(1), 0.02*bdp/paths, "the share of hint × srtt")
	require.Greater(t, a.PathWindow(1), 2*init)

	// The first mark ends the floor: the path is cut from what the floor
	// allowed at the end of its marked round, not from its initial
	// window, and the other paths keep that window until marked.
	floor := a.PathWindow(1)
	now += 2 * rtt
	a.OnAckFlight(now, 1, 4096, 1, 1, rtt, -1)
	assert.Less(t, a.PathWindow(1), floor, "the marked round cut path 1")
	assert.Greater(t, a.PathWindow(1), floor/2)
	a.OnRateHint(now, 2*testLine)
	assert.InDelta(t, floor, a.PathWindow(2), 4096, "no floor after the mark: a larger hint does not raise the windows")

	// A sender restarting on a stale hint ignores it, its floor with it.
	b := newAIMD()
	b.OnRateHint(0, testLine/1000)
	require.True(t, b.Restart(100*rtt))
	assert.Equal(t, init, b.PathWindow(0))
}
