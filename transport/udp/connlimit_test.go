package udp

import (
	"testing"

	"github.com/metaroce/metaroce/transport"
	"github.com/stretchr/testify/require"
)

// TestDialBeyondMaxConns: a Dial that would exceed Core.MaxConns fails at
// once with ErrLimit, and its error names the bound and what to do, as
// the other ErrLimit errors do, rather than a bare "resource limit
// reached".
func TestDialBeyondMaxConns(t *testing.T) {
	cfg := Config{}
	cfg.Core.MaxConns = 1
	p := newPair(t, cfg)
	cfg.Seed = 99
	ec, err := Listen(cfg)
	require.NoError(t, err)
	defer ec.Close()
	_, err = p.ea.Dial(testCtx(t), ec.Addrs())
	require.ErrorIs(t, err, transport.ErrLimit)
	require.ErrorContains(t, err, ec.Addrs()[0].String())
	require.ErrorContains(t, err, "MaxConns (1)")
}
