package cc

import (
	"testing"

	"github.com/stretchr/testify/require"
)

// TestConfigValidate: zero fields (the defaults) and consistent windows
// pass; a negative field, or window bounds that contradict each other once
// the defaults are filled in, are refused with an error naming the field,
// its value and what it takes.
func TestConfigValidate(t *testing.T) {
	for _, tc := range []struct {
		name string
		cfg  Config
		want string // "" = valid; else a substring of the error
	}{
		{"zero", Config{}, ""},
		{"defaults", DefaultConfig(), ""},
		{"explicit windows", Config{InitWindow: 1 << 20, MinWindow: 1 << 10, MaxWindow: 1 << 20}, ""},
		{"catch-up none", Config{CatchUpTime: -1, CatchUpBytes: -1}, ""},
		{"negative MSS", Config{MSS: -1}, "Config.MSS is -1: want a positive value, or 0 for the default"},
		{"negative init window", Config{InitWindow: -5}, "Config.InitWindow is -5"},
		{"negative min window", Config{MinWindow: -5}, "Config.MinWindow is -5"},
		{"negative max window", Config{MaxWindow: -5}, "Config.MaxWindow is -5"},
		{"negative conn window", Config{ConnWindow: -5}, "Config.ConnWindow is -5"},
		{"negative gain", Config{G: -16}, "Config.G is -16"},
		{"negative RTT", Config{InitRTT: -1}, "Config.InitRTT is -1"},
		{"negative burst", Config{PacingBurst: -1}, "Config.PacingBurst is -1"},
		{"floor above ceiling", Config{MinWindow: 1 << 20, MaxWindow: 1 << 16},
			"Config.MinWindow (1048576 bytes) exceeds MaxWindow (65536 bytes)"},
		{"default floor above ceiling", Config{MSS: 9000, MaxWindow: 10000},
			"Config.MinWindow (18000 bytes) exceeds MaxWindow (10000 bytes)"},
		{"start above ceiling", Config{MaxWindow: 1 << 15},
			"Config.InitWindow (65536 bytes) exceeds MaxWindow (32768 bytes)"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.cfg.Validate()
			if tc.want == "" {
				require.NoError(t, err)
				return
			}
			require.ErrorContains(t, err, tc.want)
		})
	}
}
