package cc

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestAIMDRestart checks when a sender restarting after idling drops its
// hint: only when the hint is older than StaleHintRTTs smoothed RTTs and
// allows less than the initial window per RTT; and a fresh hint ends it.
func TestAIMDRestart(t *testing.T) {
	const srtt = 10_000 // ns, the InitRTT of these controllers
	starting := uint64(testLine) / 126
	cases := []struct {
		name    string
		hint    uint64
		at      int64 // when Restart is called, ns after the hint
		restart bool
	}{
		{"no hint", 0, 10 * srtt, false},
		{"fresh hint", starting, StaleHintRTTs * srtt, false},
		{"stale small hint", starting, StaleHintRTTs*srtt + 1, true},
		{"stale full-link hint", testLine, 100 * srtt, false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			a := NewAIMD(Config{LineRate: testLine, InitRTT: srtt})
			a.AddPath(0, 0)
			a.AddPath(0, 1)
			a.OnRateHint(0, tc.hint)
			wantRate, wantWin := a.PacingRate(), a.ConnWindow()
			assert.Equal(t, tc.restart, a.Restart(tc.at))
			if !tc.restart {
				assert.Equal(t, wantRate, a.PacingRate())
				assert.Equal(t, wantWin, a.ConnWindow())
				return
			}
			assert.Equal(t, uint64(testLine), a.PacingRate())
			assert.Equal(t, 2*a.cfg.InitWindow, a.ConnWindow(), "each path's initial window")
			assert.False(t, a.Hinted())
			assert.Equal(t, a.cfg.PacingBurst, a.Burst())
			assert.True(t, a.Restart(tc.at+1), "restart lasts until a hint")
			a.OnRateHint(tc.at+srtt, testLine/2)
			assert.True(t, a.Hinted())
			assert.Equal(t, uint64(testLine/2), a.PacingRate())
		})
	}
}

// TestAIMDRestartWindowKeepsCuts: a restarting sender may have each path's
// initial window in flight, what a new connection may, but a path that
// ECN cut below it restarts at its cut size, and a grown path at no more
// than the initial window.
func TestAIMDRestartWindowKeepsCuts(t *testing.T) {
	const srtt = 10_000
	a := NewAIMD(Config{LineRate: testLine, InitRTT: srtt})
	for p := 0; p < 3; p++ {
		a.AddPath(0, p)
	}
	init := a.cfg.InitWindow
	// Path 0 grows, path 1 is cut by a fully marked round.
	now := int64(srtt)
	for i := 0; i < 40; i++ {
		a.OnAck(now, 0, a.cfg.MSS, 1, 0, srtt)
		now += srtt / 4
	}
	a.OnAck(now, 1, 4*a.cfg.MSS, 4, 4, srtt)
	a.OnAck(now+2*srtt, 1, 4*a.cfg.MSS, 4, 4, srtt)
	require.Greater(t, a.PathWindow(0), init)
	require.Less(t, a.PathWindow(1), init)
	a.OnRateHint(now, uint64(testLine)/126)
	require.True(t, a.Restart(now+2*StaleHintRTTs*srtt))
	want := init + a.PathWindow(1) + init
	require.Equal(t, want, a.ConnWindow())
}
