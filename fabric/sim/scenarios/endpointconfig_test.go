package scenarios

import (
	"errors"
	"testing"

	"github.com/metaroce/metaroce/transport"
	"github.com/stretchr/testify/require"
)

// TestMetaRoCEConfigRefusedAsUsage: options that pass their own checks
// but make a MetaRoCE endpoint configuration the core refuses (here a
// 1000 s link delay, whose base RTT scales the timers past the core's
// hour) are a usage error naming the core's field, returned before the
// run; they used to surface as connections that never came up.
func TestMetaRoCEConfigRefusedAsUsage(t *testing.T) {
	_, err := Run("loss", Options{Smoke: true, LinkDelay: 1e12})
	require.ErrorIs(t, err, ErrUsage)
	var ce *transport.ConfigError
	require.True(t, errors.As(err, &ce), "Run returned %v, want a *transport.ConfigError in the chain", err)
	require.ErrorContains(t, err, "MetaRoCE endpoint of host 0")
	require.ErrorContains(t, err, "Config."+ce.Field)
}
