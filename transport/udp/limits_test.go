package udp

import (
	"testing"

	"github.com/metaroce/metaroce/transport"
	"github.com/stretchr/testify/require"
)

// TestLocalLimitErrorsNameTheBound: a send or receive that would exceed
// one of the core's configured bounds on this side fails with ErrLimit,
// and its error names the bound (the Config field a user can raise) and
// what else to do, and leaves the connection usable.
func TestLocalLimitErrorsNameTheBound(t *testing.T) {
	cfg := Config{}
	cfg.Core.MaxFlowsPerConn = 2
	cfg.Core.MaxPendingRecvs = 2
	cfg.Core.MaxPendingSends = 2
	p := newPair(t, cfg)
	ctx := testCtx(t)
	post := func(flow uint32) *Request {
		r, err := p.a.Recv(flow, [][]byte{make([]byte, 4)}, []uint32{0})
		require.NoError(t, err)
		return r
	}
	send := func(flow uint32) *Request {
		r, err := p.a.Send(flow, []byte("abcd"), 0)
		require.NoError(t, err)
		return r
	}
	post(1)
	post(1)
	err := post(1).Wait(ctx)
	require.ErrorIs(t, err, transport.ErrLimit)
	require.ErrorContains(t, err, "MaxPendingRecvs (2)")

	send(2)
	send(2)
	err = send(2).Wait(ctx)
	require.ErrorIs(t, err, transport.ErrLimit)
	require.ErrorContains(t, err, "MaxPendingSends (2)")

	err = post(3).Wait(ctx)
	require.ErrorIs(t, err, transport.ErrLimit)
	require.ErrorContains(t, err, "MaxFlowsPerConn (2)")
	require.ErrorContains(t, err, "ReleaseFlow")

	require.Equal(t, "established", p.a.Stats().State)
}

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
