package core

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/metaroce/metaroce/net-plugin/internal/backend"
)

// nopBackend completes every request at once and allocates nothing, so that
// allocations measured through it are the plugin core's own.
type nopBackend struct{ req nopReq }

type nopReq struct{}

func (nopReq) Test(sizes []int) (bool, error) {
	if len(sizes) > 0 {
		sizes[0] = 1
	}
	return true, nil
}

func (b *nopBackend) Name() string { return "nop" }
func (b *nopBackend) Devices() []backend.Device {
	return []backend.Device{{Name: "metaroce_nop", SpeedMbps: 1, Planes: 1, Paths: 1}}
}
func (b *nopBackend) Listen(int) (backend.Listener, error)         { return b, nil }
func (b *nopBackend) Dial(int, []byte) (backend.Dialer, error)     { return b, nil }
func (b *nopBackend) Close() error                                 { return nil }
func (b *nopBackend) Handle() []byte                               { return []byte("nop") }
func (b *nopBackend) Accept() (backend.RecvConn, error)            { return b, nil }
func (b *nopBackend) Step() (backend.SendConn, error)              { return b, nil }
func (b *nopBackend) Abort()                                       {}
func (b *nopBackend) Isend([]byte, int32) (backend.Request, error) { return &b.req, nil }
func (b *nopBackend) Irecv([][]byte, []int32) (backend.Request, error) {
	return &b.req, nil
}

// TestDataPathAllocations bounds the allocations of the Go side of
// isend/irecv/test (handle tables, dispatch): none in steady state.
func TestDataPathAllocations(t *testing.T) {
	p, sc, rc := pluginOver(t, &nopBackend{})
	buf := make([]byte, 64)
	bufs := [][]byte{buf, buf}
	tags := []int32{1, 2}
	sizes := make([]int, backend.MaxRecvs)
	step := func() {
		s, err := p.Isend(sc, buf, 1)
		require.NoError(t, err)
		r, err := p.Irecv(rc, bufs, tags)
		require.NoError(t, err)
		for _, h := range []Handle{s, r} {
			done, _, err := p.Test(h, sizes)
			require.NoError(t, err)
			require.True(t, done)
		}
	}
	step() // grow the tables once
	require.Zero(t, testing.AllocsPerRun(1000, step))
}

// pluginOver returns a plugin whose backend is b, with a send and a receive
// comm connected through it; b is registered for the test's duration.
func pluginOver(t *testing.T, b backend.Backend) (p *Plugin, sc, rc Handle) {
	t.Helper()
	name := registerBackend(t, b)
	p = New(envMap(map[string]string{"METAROCE_BACKEND": name}))
	ctx, err := p.Init(12, 1)
	require.NoError(t, err)
	handle := make([]byte, backend.HandleSize)
	lc, err := p.Listen(ctx, 0, handle)
	require.NoError(t, err)
	sc, err = p.Connect(ctx, 0, handle)
	require.NoError(t, err)
	rc, err = p.Accept(lc)
	require.NoError(t, err)
	return p, sc, rc
}
