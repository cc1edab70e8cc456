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

// TestLinkRateAndMTUTogether: a link rate and an MTU each in range whose
// round trip is too long for the MetaRoCE core's timers (65000-byte
// packets at 1 kb/s) are refused by the options' check with an error that
// names both and what to change, instead of by the first MetaRoCE
// endpoint with the core's Config.InitialRTT, which no caller sets. The
// bound is the core's: just inside it the check passes and the loss
// scenario's endpoints are built; one byte, or one bit per second, past
// it the check refuses, and so would the core.
func TestLinkRateAndMTUTogether(t *testing.T) {
	// At 1 kb/s a round trip across spines is 8 µs of link delay, four
	// serialisations of the DATA packet (MTU + 56 + 66 bytes) and four of
	// the 130-byte ACK, at 8 ms a byte: 1799.97 s at MTU 55997, 1800.000008
	// s at 55998, and the endpoints' first RTT estimate, twice it, may be
	// an hour at most (transport.MaxRTTScale). At 1161 b/s a 65000-byte
	// MTU's round trip is 1798.5 s, at 1160 b/s 1800.05 s. With a 4096-byte
	// MTU at 400 Gb/s the packets take 344 ns, the rest is 8 link delays.
	inside := []Options{
		{LinkGbps: 1e-6, MTU: 55_997},
		{LinkGbps: 1.161e-6, MTU: 65_000},
		{LinkDelay: 224_999_999_957},
	}
	for _, o := range inside {
		require.NoError(t, o.check(), "%+v", o)
		o.fill()
		s, err := build(&o, o.fabric(8, 1, 1, 1), MetaRoCE) // the loss scenario's fabric
		require.NoError(t, err, "%+v", o)
		require.NotNil(t, s)
	}
	for _, tc := range []struct {
		o    Options
		want string
	}{
		{Options{LinkGbps: 1e-6, MTU: 55_998}, "MTU 55998 bytes at link rate 1e-06 Gb/s: a full packet's round trip across the fabric takes 1.8e+03s, " +
			"and the MetaRoCE endpoints' timers, scaled to it (a first RTT estimate of 3.6e+03s), would pass the hour the core takes (transport.MaxRTTScale); " +
			"want an MTU of at most 55997 bytes at this rate, or a link rate of at least 1.001e-06 Gb/s for this MTU"},
		{Options{LinkGbps: 1.16e-6, MTU: 65_000}, "want an MTU of at most 64997 bytes at this rate, or a link rate of at least 1.161e-06 Gb/s for this MTU"},
		{Options{LinkGbps: 1e-6, MTU: 65_000}, "MTU 65000 bytes at link rate 1e-06 Gb/s: a full packet's round trip across the fabric takes 2.09e+03s, " +
			"and the MetaRoCE endpoints' timers, scaled to it (a first RTT estimate of 4.18e+03s), would pass the hour the core takes (transport.MaxRTTScale); " +
			"want an MTU of at most 55997 bytes at this rate, or a link rate of at least 1.161e-06 Gb/s for this MTU"},
		{Options{LinkDelay: 224_999_999_958}, "MTU 4096 bytes at link rate 400 Gb/s and link delay 224999999958 ns: " +
			"a full packet's round trip across the fabric takes 1.8e+03s"},
		// Neither MTU nor rate helps: the delay is named. 8 × 2^62 ns
		// would overflow a round trip's nanoseconds.
		{Options{LinkDelay: 1 << 62}, "link delay 4611686018427387904 ns: a round trip across the fabric crosses eight links, " +
			"past the hour the MetaRoCE core takes as a round trip (transport.MaxRTTScale); want a link delay of at most 224999999957 ns"},
	} {
		err := tc.o.check()
		require.ErrorIs(t, err, ErrUsage, "%+v", tc.o)
		require.ErrorContains(t, err, tc.want, "%+v", tc.o)
		require.NotContains(t, err.Error(), "Config.InitialRTT", "%+v", tc.o)
		if tc.o.LinkDelay > int64(transport.MaxRTTScale) {
			continue
		}
		// The core refuses the loss scenario's endpoints alike.
		o := tc.o
		o.fill()
		var ce *transport.ConfigError
		require.ErrorAs(t, metaroceConfig(&o, o.fabric(8, 1, 1, 1)).Validate(), &ce, "%+v", tc.o)
		require.Equal(t, "InitialRTT", ce.Field)
	}
	// Through Run, the scenario stops at the check, before any endpoint.
	_, err := Run("loss", Options{Smoke: true, LinkGbps: 1e-6, MTU: 65_000})
	require.ErrorIs(t, err, ErrUsage)
	require.ErrorContains(t, err, "want an MTU of at most 55997 bytes at this rate")
}
