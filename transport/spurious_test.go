package transport_test

import (
	"testing"

	"github.com/metaroce/metaroce/transport"
	"github.com/metaroce/metaroce/transport/transporttest"
	"github.com/stretchr/testify/require"
)

// streaming connects two nodes and starts one message of size bytes from
// node 0 to node 1.
func streaming(t *testing.T, ncfg transporttest.NetConfig, size int) (*transporttest.Net, transport.ConnID) {
	t.Helper()
	n, ca, cb := pair(t, ncfg, baseCfg())
	_, err := n.PostRecv(1, cb, 0, transporttest.RecvSpec{Cap: uint64(size)})
	require.NoError(t, err)
	require.NoError(t, n.RunFor(50*transport.Microsecond))
	_, err = n.Send(0, ca, 0, make([]byte, size), 0)
	require.NoError(t, err)
	require.NoError(t, n.RunFor(200*transport.Microsecond)) // windows open
	return n, ca
}

func connStats(t *testing.T, n *transporttest.Net, c transport.ConnID) transport.ConnStats {
	t.Helper()
	st, ok := n.Node(0).EP.Stats(c)
	require.True(t, ok)
	return st
}

// TestLateAcksRaiseTheTimerFloor: the receiver stalls for 4 × MinRTO once
// per millisecond (its acknowledgements leave late, in order; nothing is
// lost) while a message streams to it. The first stall times the busy
// paths out, and the acknowledgements after it show those timeouts
// spurious; the raised per-path floor then rides out every later stall
// with no timeout and no path move. Without detection every stall cost a
// timeout and a move on every busy path.
func TestLateAcksRaiseTheTimerFloor(t *testing.T) {
	const (
		stalls = 6
		period = transport.Millisecond
		stall  = 200 * transport.Microsecond // 4 × MinRTO of baseCfg
		size   = 12 << 20
	)
	cfg := baseCfg()
	n := newStallNet(cfg, 7)
	ca, cb, err := n.connect()
	require.NoError(t, err)
	require.NoError(t, n.eps[1].PostRecv(n.now, cb, 0, []transport.RecvBuf{{Cap: size, Cookie: 1}}))
	require.NoError(t, n.run(n.now+50*transport.Microsecond))
	require.NoError(t, n.eps[0].Send(n.now, ca, 0, size, 0, 1))
	start := n.now + 300*transport.Microsecond
	for k := 0; k < stalls; k++ {
		from := start + transport.Time(k)*period
		n.stalls = append(n.stalls, [2]transport.Time{from, from + stall})
	}
	stats := func() transport.ConnStats {
		st, ok := n.eps[0].Stats(ca)
		require.True(t, ok)
		return st
	}
	require.NoError(t, n.run(start))
	prev := stats()
	require.Zero(t, prev.Timeouts, "timeouts before any stall")
	var perStall []transport.ConnStats
	for k := 0; k < stalls; k++ {
		require.NoError(t, n.run(start+transport.Time(k+1)*period))
		st := stats()
		d := st
		d.Timeouts -= prev.Timeouts
		d.PathChanges -= prev.PathChanges
		d.SpuriousTimeouts -= prev.SpuriousTimeouts
		d.Lost -= prev.Lost
		d.Spurious -= prev.Spurious
		perStall = append(perStall, d)
		prev = st
		t.Logf("stall %d: timeouts %d (spurious %d), path moves %d, lost %d (spurious %d)",
			k, d.Timeouts, d.SpuriousTimeouts, d.PathChanges, d.Lost, d.Spurious)
	}
	require.Less(t, prev.BytesSent, uint64(size), "the message should outlast the stalls")
	first := perStall[0]
	require.Positive(t, first.Timeouts, "the first stall should time paths out")
	require.Equal(t, first.Timeouts, first.SpuriousTimeouts, "every timeout of the first stall was spurious")
	require.Equal(t, first.Lost, first.Spurious, "every packet declared lost arrived")
	for k, d := range perStall[1:] {
		require.Zero(t, d.Timeouts, "stall %d: timeouts after the floor rose", k+1)
		require.Zero(t, d.PathChanges, "stall %d: path moves after the floor rose", k+1)
	}
	for i := 0; i < cfg.Planes*cfg.PathsPerPlane; i++ {
		ps, ok := n.eps[0].PathStats(ca, i)
		require.True(t, ok)
		require.True(t, ps.Active, "path %d left probing although it was alive", i)
		if ps.SpuriousTimeouts > 0 {
			require.Greater(t, ps.RTOFloor, stall, "path %d", i)
			require.LessOrEqual(t, ps.RTOFloor, n.eps[0].Config().MaxRTO, "path %d", i)
		}
	}
}

// TestBlackholeStillAbandonedFast: a route that swallows everything is
// left as fast as before, whether or not acknowledgements were lost just
// before, and its timeouts are never taken for spurious ones (nothing the
// timeout declared lost is ever acknowledged). Lost acknowledgements make
// timeouts that a later cumulative acknowledgement shows needless, but they
// prove no timer early: they leave the path's floor where it was (see
// TestLateAcksRaiseTheTimerFloor for acknowledgements that are late).
func TestBlackholeStillAbandonedFast(t *testing.T) {
	for _, tc := range []struct {
		name   string
		ackGap bool
	}{
		{"quiet", false},
		// 200 µs without acknowledgements (dropped: the next ones are
		// cumulative) time the paths out.
		{"after-lost-acks", true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			n, ca := streaming(t, baseNet(7), 32<<20)
			if tc.ackGap {
				r := transporttest.AnyRule(n.Now())
				r.Src, r.Dst = 1, 0
				r.Until = r.From + 200*transport.Microsecond
				n.AddRule(r)
				require.NoError(t, n.RunFor(transport.Millisecond))
				st := connStats(t, n, ca)
				require.Positive(t, st.SpuriousTimeouts, "the gap should have timed paths out needlessly")
			}
			const victim = 1
			ps, ok := n.Node(0).EP.PathStats(ca, victim)
			require.True(t, ok)
			require.True(t, ps.Active)
			require.Zero(t, ps.RTOFloor, "lost acknowledgements raised the timer floor")
			within := 4 * 50 * transport.Microsecond
			before := connStats(t, n, ca)
			at := n.Now()
			n.Blackhole(0, int(ps.Plane), int(ps.Entropy), at)
			require.NoError(t, n.RunUntil(func() bool {
				p, _ := n.Node(0).EP.PathStats(ca, victim)
				return p.PathChanges > ps.PathChanges
			}, at+within), "path %d not moved within %v (floor %v)", victim, within, ps.RTOFloor)
			require.NoError(t, n.RunFor(2*transport.Millisecond))
			after := connStats(t, n, ca)
			require.Equal(t, before.SpuriousTimeouts, after.SpuriousTimeouts, "a real black hole counted as spurious")
			p, _ := n.Node(0).EP.PathStats(ca, victim)
			require.NotEqual(t, ps.Entropy, p.Entropy, "path stayed on the black-holed route")
		})
	}
}
