package core

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/metaroce/metaroce/net-plugin/internal/backend"
)

// stalledDialer is a connect that never completes on its own; it records
// whether it was aborted.
type stalledDialer struct{ aborted bool }

func (d *stalledDialer) Step() (backend.SendConn, error) {
	if d.aborted {
		return nil, internalf("step after abort")
	}
	return nil, nil
}

func (d *stalledDialer) Abort() { d.aborted = true }

// stallingBackend hands out stalledDialers and keeps them, by the first
// byte of the listen handle, so that a test can inspect them.
type stallingBackend struct {
	nopBackend
	dialers map[byte]*stalledDialer
}

func (b *stallingBackend) Dial(_ int, handle []byte) (backend.Dialer, error) {
	d := &stalledDialer{}
	b.dialers[handle[0]] = d
	return d, nil
}

// TestFinalizeAbortsItsOwnAbandonedConnects: NCCL abandons the connects in
// progress of a communicator it aborts and then finalizes that
// communicator's context, while other communicators of the process keep
// theirs. The finalize releases exactly the connects started under its
// context; those of the live context carry on.
func TestFinalizeAbortsItsOwnAbandonedConnects(t *testing.T) {
	b := &stallingBackend{dialers: map[byte]*stalledDialer{}}
	name := registerBackend(t, b)
	p := New(envMap(map[string]string{"METAROCE_BACKEND": name}))

	aborted, err := p.Init(12, 1)
	require.NoError(t, err)
	live, err := p.Init(12, 2)
	require.NoError(t, err)

	handle := func(id byte) []byte {
		h := make([]byte, backend.HandleSize)
		h[0] = id
		return h
	}
	sc, err := p.Connect(aborted, 0, handle('a'))
	require.NoError(t, err)
	require.Zero(t, sc, "the connect must stay in progress")
	sc, err = p.Connect(live, 0, handle('l'))
	require.NoError(t, err)
	require.Zero(t, sc)
	require.Equal(t, 2, p.Live())

	require.NoError(t, p.Finalize(aborted))
	require.True(t, b.dialers['a'].aborted, "the finalized context's connect was not aborted")
	require.False(t, b.dialers['l'].aborted, "another context's connect was aborted")
	require.Equal(t, 1, p.Live(), "the finalized context's connect is still held")

	// The live context's connect is still the one in progress: calling
	// again with its handle steps it rather than dialing anew.
	sc, err = p.Connect(live, 0, handle('l'))
	require.NoError(t, err)
	require.Zero(t, sc)
	require.Equal(t, 1, p.Live())

	require.NoError(t, p.Finalize(live))
	require.True(t, b.dialers['l'].aborted)
	require.Zero(t, p.Live())
}

// TestFinalizeReleasesConnectsOverRealBackends: over each backend, a
// connect left in progress under one context is released when that
// context is finalized, while another context of the same plugin lives on.
func TestFinalizeReleasesConnectsOverRealBackends(t *testing.T) {
	for _, be := range []string{"udp", "tcp"} {
		t.Run(be, func(t *testing.T) {
			rp, sp, rctx, sctx, handle := stuckConnect(t, be)
			other, err := sp.Init(12, 3)
			require.NoError(t, err)
			sc, err := sp.Connect(sctx, 0, handle)
			require.NoError(t, err)
			require.Zero(t, sc, "connect must not complete in its first call")
			require.Equal(t, 1, sp.Live())

			require.NoError(t, sp.Finalize(sctx))
			require.Equal(t, 1, sp.Refs())
			require.Zero(t, sp.Live(), "the finalized context's connect is still held")

			require.NoError(t, sp.Finalize(other))
			require.NoError(t, rp.Finalize(rctx))
		})
	}
}

// TestIdleConnectsAreReleased: before ABI v11 nothing tells the plugin that
// NCCL gave a connect up. A connect NCCL has not called for abandonAfter is
// aborted by a later connect call, one it keeps calling is not, and a call
// with the released handle after all fails with an error that says why,
// dialing nothing.
func TestIdleConnectsAreReleased(t *testing.T) {
	b := &stallingBackend{dialers: map[byte]*stalledDialer{}}
	name := registerBackend(t, b)
	p := New(envMap(map[string]string{"METAROCE_BACKEND": name, "METAROCE_TIMEOUT_MS": "20000"}))
	clock := time.Unix(1000, 0)
	p.now = func() time.Time { return clock }
	require.NoError(t, p.InitLegacy(10))
	after := p.abandonAfter()
	require.Equal(t, minAbandonAfter, after, "2 × 20 s is under the floor")

	handle := func(id byte) []byte {
		h := make([]byte, backend.HandleSize)
		h[0] = id
		return h
	}
	connect := func(id byte) {
		t.Helper()
		sc, err := p.Connect(0, 0, handle(id))
		require.NoError(t, err)
		require.Zero(t, sc)
	}
	connect('a') // given up by NCCL after this call
	connect('b') // still called
	clock = clock.Add(after / 2)
	connect('b')
	clock = clock.Add(after/2 + time.Millisecond) // 'a' idle just over the limit
	connect('b')
	require.True(t, b.dialers['a'].aborted, "the idle connect was not released")
	require.False(t, b.dialers['b'].aborted, "a connect still called was released")
	require.Equal(t, 1, p.Live())

	// A late call for the released handle fails and dials nothing.
	first := b.dialers['a']
	_, err := p.Connect(0, 0, handle('a'))
	require.ErrorIs(t, err, backend.ErrInvalidUsage)
	require.ErrorContains(t, err, "released")
	require.Same(t, first, b.dialers['a'], "a late call dialed anew")
	require.Equal(t, 1, p.Live())

	// Sweeps are at most once per sweepEvery: 'b' idle past the limit is
	// kept until the next sweep is due.
	clock = clock.Add(after + sweepEvery/2)
	connect('c') // sweeps: 'b' is now idle too long
	require.True(t, b.dialers['b'].aborted)
	require.Equal(t, 1, p.Live())
	connect('d') // within sweepEvery of the last sweep: nothing swept
	require.Equal(t, 2, p.Live())
	clock = clock.Add(after / 2)
	connect('d')
	clock = clock.Add(after/2 + time.Millisecond)
	connect('d') // 'c' idle too long, 'd' called throughout
	require.True(t, b.dialers['c'].aborted)
	require.False(t, b.dialers['d'].aborted)
	require.Equal(t, 1, p.Live())
}
