package sim

import (
	"context"
	"math"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestHeapOrdersByTimeThenSequence(t *testing.T) {
	s := &Sim{}
	var got []int
	for i, at := range []int64{5, 1, 5, 3, 1, 0} {
		i := i
		s.At(at, func(int64) { got = append(got, i) })
	}
	s.Run(math.MaxInt64, nil)
	assert.Equal(t, []int{5, 1, 4, 3, 0, 2}, got)
}

// blaster sends fixed-size datagrams to dst on entropy e as fast as the NIC
// takes them, and counts what it receives.
type blaster struct {
	dst, n  int
	entropy uint16
	plane   int
	rx      int
	ce      int
}

// Receive places every payload byte: what follows the 56-byte header.
func (b *blaster) Receive(now int64, from, plane int, ecn ECN, data []byte) int {
	b.rx++
	if ecn == CE {
		b.ce++
	}
	return max(len(data)-56, 0)
}
func (b *blaster) PollTransmit(now int64, buf []byte) (Tx, bool) {
	if b.n == 0 || b.dst < 0 {
		return Tx{}, false
	}
	b.n--
	return Tx{To: b.dst, Plane: b.plane, Entropy: b.entropy, N: 56, PayloadLen: 4096}, true
}
func (b *blaster) HandleTimeout(int64)                                      {}
func (b *blaster) NextTimeout() int64                                       { return math.MaxInt64 }
func (b *blaster) Dial(int64, int) (uint32, error)                          { return 0, nil }
func (b *blaster) Send(int64, uint32, uint32, uint64, uint32, uint64) error { return nil }
func (b *blaster) PostRecv(int64, uint32, uint32, uint64, uint32, uint64) error {
	return nil
}
func (b *blaster) PollEvent() (Event, bool) { return Event{}, false }

// smallFabric builds the 4-host fabric of 2 leaves and 2 spines, changed by
// mod, with no agents attached.
func smallFabric(t *testing.T, mod func(*Config)) (*Sim, Config) {
	c := DefaultConfig()
	c.Leaves, c.Spines, c.HostsPerLeaf = 2, 2, 2
	if mod != nil {
		mod(&c)
	}
	s, err := New(c)
	require.NoError(t, err)
	return s, c
}

func small(t *testing.T, mod func(*Config)) (*Sim, []*blaster) {
	s, c := smallFabric(t, mod)
	bs := make([]*blaster, c.Hosts())
	for h := range bs {
		bs[h] = &blaster{dst: -1}
		s.Attach(h, bs[h], nil)
	}
	return s, bs
}

// TestLineRateAndDelay: 1000 packets of 4218 bytes across spines take
// 1000 serialisations plus 4 link delays and 3 store-and-forward hops, at
// rates whose time per byte is not a whole number of picoseconds too
// (600 Gb/s: 13.33 ps; 20 Tb/s: 0.4 ps, which rounding made 0).
func TestLineRateAndDelay(t *testing.T) {
	for _, rate := range []float64{400e9, 600e9, 20e12} {
		s, bs := small(t, func(c *Config) { c.LinkRate = rate })
		bs[0].dst, bs[0].n = 2, 1000
		s.Start()
		s.Run(math.MaxInt64, nil)
		require.Equal(t, 1000, bs[2].rx)
		per := 4218 * 8e9 / rate // ns
		want := 1000*per + 4*1000 + 3*per
		assert.InDelta(t, want, float64(s.Now()), 5, "%g b/s", rate)
		assert.Zero(t, s.Stats.Dropped+s.Stats.Lost)
	}
}

// TestRxSerialisation: a host sees, for every packet delivered, when its
// link serialised it (TxStart to TxEnd, one link delay before the
// arrival) and what its transport placed. Back to back at the line rate
// the intervals touch without overlapping, and the packets whose
// intervals lie within [a, b) with TxEnd before b carry less than the
// link's rate times b − a: the bound goodput fractions rest on, which the
// ports' rounding to whole ns would break by up to 1 ns's worth were the
// last ns counted too. 20 Tb/s is 0.4 ps per byte, 600 Gb/s 13.33 ps:
// every packet carries a fraction of a ns over.
func TestRxSerialisation(t *testing.T) {
	for _, rate := range []float64{400e9, 600e9, 20e12} {
		s, bs := small(t, func(c *Config) { c.LinkRate = rate })
		bs[0].dst, bs[0].n = 2, 200
		type rx struct{ start, end int64 }
		var got []rx
		s.OnRx = func(now int64, h *Host, pk *Packet) {
			require.Equal(t, 2, h.ID)
			assert.Equal(t, int32(4096), pk.Placed, "blaster places its payload")
			assert.Equal(t, now-s.Config().LinkDelay, pk.TxEnd)
			ser := 4218 * 8e9 / rate
			assert.InDelta(t, ser, float64(pk.TxEnd-pk.TxStart), 1, "%g b/s", rate)
			got = append(got, rx{pk.TxStart, pk.TxEnd})
		}
		s.Start()
		s.Run(math.MaxInt64, nil)
		require.Len(t, got, 200)
		for i := 1; i < len(got); i++ {
			require.GreaterOrEqual(t, got[i].start, got[i-1].end, "packet %d overlaps the one before", i)
		}
		// Every window from a packet's start to the ns after another's
		// end, the largest that counts both, carries less than its time.
		for i := 100; i < len(got); i++ {
			for k := i; k < len(got); k++ {
				a, b := got[i].start, got[k].end+1
				bits := float64(k-i+1) * 4218 * 8
				require.Less(t, bits, rate*float64(b-a)/1e9, "%g b/s, packets %d to %d", rate, i, k)
			}
		}
	}
}

// TestTxTimeExact: every port serialises at its exact rate over a long run
// (within the 1 ns the carry holds back), host links and uplinks alike,
// including uplinks faster than the host links (4 hosts, 2 spines: twice
// the host rate, the failure scenario's 3.2 Tb/s at --link-gbps 1600,
// which rounding to 3 ps per byte ran 17% slow) and oversubscribed ones.
func TestTxTimeExact(t *testing.T) {
	for _, k := range []struct {
		rate          float64
		perLeaf, spns int
		oversub       float64
	}{
		{400e9, 2, 2, 1}, {600e9, 2, 2, 1}, {20e12, 2, 2, 1}, {1.6e12, 4, 2, 1}, {400e9, 8, 2, 3}, {100e9, 3, 7, 1},
	} {
		c := DefaultConfig()
		c.Leaves, c.HostsPerLeaf, c.Spines, c.Oversub, c.LinkRate = 2, k.perLeaf, k.spns, k.oversub, k.rate
		s, err := New(c)
		require.NoError(t, err)
		host := &s.ports[s.nodes[0].ports[0]]
		up := &s.ports[s.nodes[s.leafNode(0, 0)].ports[k.perLeaf]]
		for _, pr := range []struct {
			p    *port
			rate float64
		}{{host, k.rate}, {up, k.rate * float64(k.perLeaf) / (float64(k.spns) * k.oversub)}} {
			var total int64
			for i := 0; i < 1000; i++ {
				total += pr.p.txTime(4218)
			}
			want := 1000 * 4218 * 8e9 / pr.rate
			assert.InDelta(t, want, float64(total), 1, "%+v: port at %g b/s", k, pr.rate)
		}
	}
}

// TestPacketsOnFailedLinkAreLost: a packet already on a leaf–spine link
// when the link fails is lost, whether the link stays down or comes back
// before the packet would have arrived; a packet sent after the link is
// back arrives.
func TestPacketsOnFailedLinkAreLost(t *testing.T) {
	for _, up := range []int64{0, 1600} {
		s, bs := small(t, nil)
		// Host 0 → host 2 (other leaf): serialised 0–84 ns on the host
		// link, at leaf 0 at 1084, on an uplink 1084–1168 and on its
		// wire until 2168. Both uplinks of leaf 0 fail at 1500.
		for sp := 0; sp < 2; sp++ {
			require.NoError(t, s.FailSpineLink(0, 0, sp, 1500, up))
		}
		bs[0].dst, bs[0].n = 2, 1
		s.Start()
		s.Run(math.MaxInt64, nil)
		assert.Zero(t, bs[2].rx, "up at %d: the packet on the wire is lost", up)
		assert.EqualValues(t, 1, s.Stats.Lost)
		var lost uint64
		for _, pi := range s.nodes[s.leafNode(0, 0)].ports[2:] {
			lost += s.ports[pi].lost
		}
		assert.EqualValues(t, 1, lost, "counted at the uplink that sent it")
		if up > 0 {
			bs[0].n = 1
			s.hosts[0].pump()
			s.Run(math.MaxInt64, nil)
			assert.Equal(t, 1, bs[2].rx, "a packet sent after the recovery arrives")
			assert.EqualValues(t, 1, s.Stats.Lost)
		}
	}
}

func TestIncastMarksAndDropsTail(t *testing.T) {
	s, bs := small(t, func(c *Config) { c.Buffer = 200_000; c.Kmin = 20_000; c.Kmax = 100_000 })
	for _, h := range []int{1, 2, 3} {
		bs[h].dst, bs[h].n = 0, 500
	}
	s.Start()
	s.Run(math.MaxInt64, nil)
	st := s.DownlinkStats(0, 0)
	assert.Positive(t, st.Drops)
	assert.Positive(t, bs[0].ce)
	assert.LessOrEqual(t, st.MaxQueue, 200_000)
	assert.Equal(t, 1500, bs[0].rx+int(s.Stats.Dropped))
}

func TestPFCIsLossless(t *testing.T) {
	s, bs := small(t, func(c *Config) { c.PFC = true; c.Buffer = 200_000 })
	for _, h := range []int{1, 2, 3} {
		bs[h].dst, bs[h].n = 0, 500
	}
	s.Start()
	s.Run(math.MaxInt64, nil)
	assert.Equal(t, 1500, bs[0].rx)
	assert.Positive(t, s.Stats.Pauses)
	assert.Zero(t, s.Stats.Dropped)
	assert.Less(t, s.DownlinkStats(0, 0).MaxQueue, 1<<20)
}

func TestRandomLossAndDeterminism(t *testing.T) {
	run := func() (int, uint64) {
		s, bs := small(t, func(c *Config) { c.Loss = 0.1; c.Seed = 7 })
		bs[0].dst, bs[0].n = 3, 2000
		s.Start()
		s.Run(math.MaxInt64, nil)
		return bs[3].rx, s.Stats.Events
	}
	rx, ev := run()
	// Four links at 10% each: about 0.9^4 = 66% arrive.
	assert.InDelta(t, 0.656*2000, float64(rx), 80)
	rx2, ev2 := run()
	assert.Equal(t, rx, rx2)
	assert.Equal(t, ev, ev2)
}

func TestECMPSpreadsByEntropyAndAvoidsDownLink(t *testing.T) {
	s, bs := small(t, func(c *Config) { c.Spines = 4 })
	for e := 0; e < 64; e++ {
		bs[0].dst, bs[0].n, bs[0].entropy = 2, 1, uint16(e)
		s.Start()
		s.Run(math.MaxInt64, nil)
	}
	used := 0
	for _, pi := range s.nodes[s.leafNode(0, 0)].ports[2:] {
		if s.ports[pi].sentPkts > 0 {
			used++
		}
	}
	assert.Equal(t, 4, used, "64 entropies must use every uplink")
	require.NoError(t, s.FailSpineLink(0, 0, 1, s.Now()+1, 0))
	s.Run(s.Now()+10, nil)
	before := bs[2].rx
	bs[0].n = 200
	for e := 0; e < 200; e++ {
		bs[0].entropy = uint16(e)
		s.hosts[0].pump()
		s.Run(s.Now()+100, nil)
	}
	s.Run(math.MaxInt64, nil)
	assert.Equal(t, before+200, bs[2].rx, "the leaf routes around its own down uplink")
	assert.Error(t, s.FailSpineLink(0, 9, 0, 0, 0))
	assert.Error(t, s.FailPlane(3, 0, 0))
}

// TestTimeNeverGoesBack: a failure scheduled for a time the run has
// passed happens now, and a Run to a time already passed leaves the time
// where it is; neither rewinds the clock that later events are scheduled
// from.
func TestTimeNeverGoesBack(t *testing.T) {
	s, bs := small(t, nil)
	bs[0].dst, bs[0].n = 2, 10
	s.Start()
	s.Run(math.MaxInt64, nil)
	end := s.Now()
	require.Greater(t, end, int64(1000))
	require.NoError(t, s.FailSpineLink(0, 0, 0, 500, 0))
	s.Run(math.MaxInt64, nil)
	require.Equal(t, end, s.Now(), "the failure due in the past ran now")
	var at []int64
	s.At(end-100, func(now int64) { at = append(at, now) })
	s.Run(math.MaxInt64, nil)
	require.Equal(t, []int64{end}, at)

	s.At(end+100_000, func(int64) {})
	s.Run(end-1000, nil)
	require.Equal(t, end, s.Now(), "Run to a time already passed")
	s.Run(end+50_000, nil)
	require.Equal(t, end+50_000, s.Now())
}

// TestECMPAfterFailureUsesEverySpine: with a link down, a leaf spreads
// flows over all its usable uplinks however many spines there are (a
// candidate list of 256 left spines 256 and up unused).
func TestECMPAfterFailureUsesEverySpine(t *testing.T) {
	const spines = 300
	s, _ := small(t, func(c *Config) { c.Spines = spines })
	require.NoError(t, s.FailSpineLink(0, 0, 7, 0, 0))
	s.Run(math.MaxInt64, nil)
	leaf := &s.nodes[s.leafNode(0, 0)]
	up := leaf.ports[2:]
	used := make([]int, spines)
	for e := 0; e < 16*spines; e++ {
		pk := &Packet{Src: 0, Dst: 2, SrcPort: uint16(SrcPortBase + e), DstPort: DstPort}
		pi := s.ecmp(leaf, up, pk, 1)
		for sp, p := range up {
			if p == pi {
				used[sp]++
			}
		}
	}
	require.Zero(t, used[7], "the down uplink")
	for sp, n := range used {
		if sp != 7 {
			require.Positive(t, n, "spine %d never chosen", sp)
		}
	}
}

func TestConfigErrors(t *testing.T) {
	for _, c := range []Config{{Planes: 17}, {Oversub: 0.5}, {Kmin: 10, Kmax: 5}, {Loss: 1}, {XOFF: 1, XON: 2},
		{LinkRate: math.NaN()}, {LinkRate: math.Inf(1)}, {LinkRate: 100}, {LinkRate: 2e18}, {Oversub: math.NaN()}} {
		_, err := New(c)
		assert.ErrorIs(t, err, ErrConfig, "%+v", c)
	}
}

func BenchmarkEngine(b *testing.B) {
	c := DefaultConfig()
	s, err := New(c)
	require.NoError(b, err)
	bs := make([]*blaster, c.Hosts())
	for h := range bs {
		bs[h] = &blaster{dst: (h + 8) % c.Hosts(), n: b.N/c.Hosts() + 1, entropy: uint16(h)}
		s.Attach(h, bs[h], nil)
	}
	b.ResetTimer()
	s.Start()
	s.Run(math.MaxInt64, nil)
	b.ReportMetric(float64(s.Stats.Events)/b.Elapsed().Seconds(), "events/s")
}

// ticker schedules an event every ns of virtual time on s, forever, calling
// each(n) with the count of events it has run so far.
func ticker(s *Sim, each func(n int)) {
	n := 0
	var tick func(now int64)
	tick = func(now int64) {
		n++
		each(n)
		s.At(now+1, tick)
	}
	s.At(0, tick)
}

// TestRunContextStopsWhenCancelled: a run without end (an event that
// schedules the next one, forever) whose context an event cancels returns
// the context's error within ctxCheckEvents events of the cancel, instead
// of running to its virtual-time limit; a context cancelled before the run
// stops it before its first event.
func TestRunContextStopsWhenCancelled(t *testing.T) {
	const cancelAt = 10_000
	s := &Sim{}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	ticker(s, func(n int) {
		if n == cancelAt {
			cancel()
		}
	})
	err := s.RunContext(ctx, math.MaxInt64, nil)
	require.ErrorIs(t, err, context.Canceled)
	assert.GreaterOrEqual(t, s.Stats.Events, uint64(cancelAt))
	assert.LessOrEqual(t, s.Stats.Events, uint64(cancelAt+ctxCheckEvents))

	before := s.Stats.Events
	require.ErrorIs(t, s.RunContext(ctx, math.MaxInt64, nil), context.Canceled)
	assert.Equal(t, before, s.Stats.Events, "a cancelled context runs no event")
}

// TestRunContextLiveIsRun: with a context that stays live, RunContext ends
// as Run does (at until, or when stop says so), after the same events, and
// returns nil.
func TestRunContextLiveIsRun(t *testing.T) {
	for _, tc := range []struct {
		name  string
		until int64
		stop  int
	}{
		{"until", 3*ctxCheckEvents + 5, 0},
		{"stop", math.MaxInt64, 2*ctxCheckEvents + 7},
	} {
		t.Run(tc.name, func(t *testing.T) {
			// A context that can be cancelled, and is not: RunContext
			// looks at it every ctxCheckEvents events.
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			runOne := func(withCtx bool) (uint64, int64) {
				s := &Sim{}
				n := 0
				ticker(s, func(k int) { n = k })
				stop := func() bool { return tc.stop > 0 && n >= tc.stop }
				if withCtx {
					require.NoError(t, s.RunContext(ctx, tc.until, stop))
				} else {
					s.Run(tc.until, stop)
				}
				return s.Stats.Events, s.Now()
			}
			e1, t1 := runOne(false)
			e2, t2 := runOne(true)
			assert.Equal(t, e1, e2)
			assert.Equal(t, t1, t2)
		})
	}
}
