package scenarios

import (
	"errors"
	"testing"

	"github.com/metaroce/metaroce/transport"
	"github.com/metaroce/metaroce/transport/rocev2"
	"github.com/stretchr/testify/require"
)

// TestMetaRoCEConfigRefusedAsUsage: options that pass their own checks
// but make a MetaRoCE endpoint configuration the core refuses (here a
// 1000 s link delay, whose base RTT scales the timers past the core's
// hour) are a usage error returned before the run; they used to surface
// as connections that never came up. The options' check refuses them,
// naming the link delay and the longest that fits; should options it
// passes still make a configuration the core refuses, building the
// endpoints does, naming the host and the core's field.
func TestMetaRoCEConfigRefusedAsUsage(t *testing.T) {
	o := Options{Smoke: true, LinkDelay: 1e12}
	_, err := Run("loss", o)
	require.ErrorIs(t, err, ErrUsage)
	require.ErrorContains(t, err, "link delay 1000000000000 ns")
	require.ErrorContains(t, err, "want a link delay of at most 224999999957 ns")

	o.fill()
	_, err = build(&o, o.fabric(8, 1, 1, 1), MetaRoCE)
	require.ErrorIs(t, err, ErrUsage)
	var ce *transport.ConfigError
	require.True(t, errors.As(err, &ce), "build returned %v, want a *transport.ConfigError in the chain", err)
	require.ErrorContains(t, err, "MetaRoCE endpoint of host 0")
	require.ErrorContains(t, err, "Config."+ce.Field)
}

// TestRoCEv2ConfigRefusedAsUsage: a RoCEv2 endpoint configuration that
// the baseline refuses, from options that bypassed their check (here a
// timeout exponent past its 31), is a usage error naming the host, as a
// MetaRoCE one is, rather than a run failure.
func TestRoCEv2ConfigRefusedAsUsage(t *testing.T) {
	o := Options{Smoke: true}
	o.fill()
	o.RoCETimeoutExp = 40
	_, err := build(&o, o.fabric(8, 1, 1, 1), RoCEv2)
	require.ErrorIs(t, err, ErrUsage)
	require.ErrorIs(t, err, rocev2.ErrInvalid)
	require.ErrorContains(t, err, "RoCEv2 endpoint of host 0")
}
