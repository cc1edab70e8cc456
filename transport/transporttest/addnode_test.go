package transporttest_test

import (
	"errors"
	"testing"

	"github.com/metaroce/metaroce/transport"
	"github.com/metaroce/metaroce/transport/transporttest"
	"github.com/stretchr/testify/require"
)

// TestAddNodeRefusesInvalidConfig: a configuration the core refuses makes
// no node. AddNode used to build the endpoint anyway, and the mistake
// showed only as a dial failing with ErrInvalid, or, where the refused
// node was the listener, as a handshake timeout.
func TestAddNodeRefusesInvalidConfig(t *testing.T) {
	n := transporttest.New(transporttest.NetConfig{Seed: 1})
	_, err := n.TryAddNode(transport.Config{Planes: 99})
	var ce *transport.ConfigError
	require.True(t, errors.As(err, &ce), "TryAddNode returned %v, want a *transport.ConfigError", err)
	require.Equal(t, "Planes", ce.Field)
	require.ErrorIs(t, err, transport.ErrInvalid)
	require.ErrorContains(t, err, "transporttest: node 0: ")
	require.Zero(t, n.Nodes(), "a refused configuration added a node")

	require.PanicsWithError(t, err.Error(), func() { n.AddNode(transport.Config{Planes: 99}) })
	require.Zero(t, n.Nodes())

	// A valid configuration still makes node 0, whose index the refused
	// ones did not take.
	i, err := n.TryAddNode(transport.Config{Listen: true})
	require.NoError(t, err)
	require.Zero(t, i)
	require.Equal(t, 1, n.AddNode(transport.Config{}))
}
