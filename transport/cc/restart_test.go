package cc

import (
	"testing"

	"github.com/stretchr/testify/assert"
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
			assert.Equal(t, a.cfg.InitWindow, a.ConnWindow())
			assert.False(t, a.Hinted())
			assert.Equal(t, a.cfg.PacingBurst, a.Burst())
			assert.True(t, a.Restart(tc.at+1), "restart lasts until a hint")
			a.OnRateHint(tc.at+srtt, testLine/2)
			assert.True(t, a.Hinted())
			assert.Equal(t, uint64(testLine/2), a.PacingRate())
		})
	}
}
