package scenarios

import (
	"errors"
	"math"
	"testing"

	"github.com/metaroce/metaroce/transport"
	"github.com/stretchr/testify/require"
)

// TestOptionsOutOfRangeRefused: values no fabric has are refused with
// ErrUsage before anything runs, instead of running on tables of zeros
// and NaNs; zeros keep meaning "the default".
func TestOptionsOutOfRangeRefused(t *testing.T) {
	tests := []struct {
		name string
		o    Options
		want string
	}{
		{"NaN rate", Options{LinkGbps: math.NaN()}, "link rate"},
		{"infinite rate", Options{LinkGbps: math.Inf(1)}, "link rate"},
		{"negative rate", Options{LinkGbps: -5}, "link rate"},
		{"rate under 1 kb/s", Options{LinkGbps: 1e-7}, "link rate 1e-07 Gb/s"},
		{"negative MTU", Options{MTU: -1}, "MTU"},
		{"tiny MTU", Options{MTU: 100}, "MTU"},
		// A DATA datagram of 256 + 56 bytes is below the protocol's
		// 576: every MetaRoCE dial used to time out.
		{"MTU under the minimum datagram", Options{MTU: 256}, "MTU 256 bytes: want 0 (the default, 4096) or 520 to 65000"},
		{"MTU one under", Options{MTU: 519}, "at least the protocol's minimum datagram of 576 bytes"},
		{"huge MTU", Options{MTU: 100_000_000}, "MTU"},
		{"negative delay", Options{LinkDelay: -1}, "link delay"},
		{"negative buffer", Options{Buffer: -1}, "buffer"},
		{"inverted ramp", Options{Kmin: 500_000, Kmax: 100_000}, "Kmin must not exceed Kmax"},
		// The fabric's own check, past the default Kmax (400 KB).
		{"Kmin past the default Kmax", Options{Kmin: 500_000}, "Kmax 400000 < Kmin 500000"},
		{"timeout exponent", Options{RoCETimeoutExp: 32}, "exponent"},
		{"negative senders", Options{ConcurrentSenders: -1}, "concurrent senders"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			tc.o.Smoke = true
			_, err := Run("loss", tc.o)
			require.ErrorIs(t, err, ErrUsage)
			require.ErrorContains(t, err, tc.want)
		})
	}
	for _, o := range []Options{{}, {LinkGbps: 100, MTU: 1024, Kmin: 1000, Kmax: 1000, RoCETimeoutExp: 14}, {LinkGbps: MinLinkGbps}, {MTU: 520}, {MTU: 65_000}} {
		require.NoError(t, o.check(), "%+v", o)
	}
}

// TestMinMTUIsTheCoresMinimum: the smallest MTU the options take makes a
// MetaRoCE endpoint configuration the core accepts, and one byte less
// would not, so that the bound follows the protocol's minimum datagram.
func TestMinMTUIsTheCoresMinimum(t *testing.T) {
	for _, mtu := range []int{MinMTU, MinMTU - 1} {
		o := Options{MTU: mtu}
		o.fill()
		c := o.fabric(2, 1, 1, 1)
		err := metaroceConfig(&o, c).Validate()
		if mtu == MinMTU {
			require.NoError(t, err, "MTU %d", mtu)
			continue
		}
		var ce *transport.ConfigError
		require.True(t, errors.As(err, &ce), "MTU %d: %v", mtu, err)
		require.Equal(t, "MaxDatagram", ce.Field)
	}
}

// TestExportedBoundsAreChecked: the bounds a command line quotes in its
// help (MinLinkGbps, MaxLinkGbps, MinMTU, MaxMTU) are those check applies,
// each accepted and the nearest value past it refused, so that help and
// refusal cannot disagree.
func TestExportedBoundsAreChecked(t *testing.T) {
	for _, o := range []Options{{LinkGbps: MinLinkGbps}, {LinkGbps: MaxLinkGbps}, {MTU: MinMTU}, {MTU: MaxMTU}} {
		require.NoError(t, o.check(), "%+v", o)
	}
	for _, tc := range []struct {
		o    Options
		want string
	}{
		{Options{LinkGbps: math.Nextafter(MinLinkGbps, 0)}, "want 0 (the default) or 1e-06 to 100000"},
		{Options{LinkGbps: math.Nextafter(MaxLinkGbps, math.Inf(1))}, "want 0 (the default) or 1e-06 to 100000"},
		{Options{MTU: MinMTU - 1}, "MTU 519 bytes: want 0 (the default, 4096) or 520 to 65000"},
		{Options{MTU: MaxMTU + 1}, "MTU 65001 bytes: want 0 (the default, 4096) or 520 to 65000"},
	} {
		err := tc.o.check()
		require.ErrorIs(t, err, ErrUsage, "%+v", tc.o)
		require.ErrorContains(t, err, tc.want, "%+v", tc.o)
	}
}
