package agents

import (
	"errors"
	"math/rand/v2"
	"testing"

	"github.com/metaroce/metaroce/transport"
	"github.com/stretchr/testify/require"
)

// TestNewMetaRoCERefusesInvalidConfig: a configuration the core refuses
// returns its *transport.ConfigError and no adapter, instead of an
// endpoint whose dials fail and whose peers' handshakes time out.
func TestNewMetaRoCERefusesInvalidConfig(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	m, err := NewMetaRoCE(transport.Config{Listen: true, MaxDatagram: 312}, rng)
	require.Nil(t, m)
	var ce *transport.ConfigError
	require.True(t, errors.As(err, &ce), "NewMetaRoCE returned %v, want a *transport.ConfigError", err)
	require.Equal(t, "MaxDatagram", ce.Field)
	require.ErrorIs(t, err, transport.ErrInvalid)

	m, err = NewMetaRoCE(transport.Config{Listen: true, MaxDatagram: 576, ConcurrentSenders: 3}, rng)
	require.NoError(t, err)
	require.NotNil(t, m.EP)
	require.Equal(t, 3, m.bound)
}
