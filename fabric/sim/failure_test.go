package sim

import (
	"encoding/binary"
	"math"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// stamper is a blaster whose datagrams carry their send time (ns, header
// bytes 0–7) and a key naming them (bytes 8–15: sender << 32 | sequence),
// so that a receiver can tell which ones it got and when they left.
type stamper struct {
	blaster
	id   int
	sent int
	// cut is a time, ns; afterCut counts the datagrams received at or
	// after it, late those of them sent before it.
	cut            int64
	late, afterCut int
	got            map[uint64]bool // keys received
}

func (b *stamper) PollTransmit(now int64, buf []byte) (Tx, bool) {
	tx, ok := b.blaster.PollTransmit(now, buf)
	if ok {
		binary.LittleEndian.PutUint64(buf, uint64(now))
		binary.LittleEndian.PutUint64(buf[8:], uint64(b.id)<<32|uint64(b.sent))
		b.sent++
	}
	return tx, ok
}

func (b *stamper) Receive(now int64, from, plane int, ecn ECN, data []byte) int {
	placed := b.blaster.Receive(now, from, plane, ecn, data)
	b.got[binary.LittleEndian.Uint64(data[8:])] = true
	if now >= b.cut {
		b.afterCut++
		if int64(binary.LittleEndian.Uint64(data)) < b.cut {
			b.late++
		}
	}
	return placed
}

// keysQueued returns the keys (see stamper) of the packets queued at port
// pi.
func keysQueued(s *Sim, pi int32) []uint64 {
	p := &s.ports[pi]
	var keys []uint64
	for i := 0; i < p.qLen; i++ {
		keys = append(keys, binary.LittleEndian.Uint64(p.q[(p.qHead+i)%len(p.q)].Hdr[8:]))
	}
	return keys
}

// incast builds the 4-host fabric of small (2 leaves, 2 spines) with
// hosts 1, 2 and 3 each sending n datagrams of 4218 bytes to host 0 (the
// queue builds at leaf 0's port to host 0, and with PFC behind it), and
// cut set on host 0.
func incast(t *testing.T, n int, cut int64, mod func(*Config)) (*Sim, []*stamper) {
	s, c := smallFabric(t, mod)
	bs := make([]*stamper, c.Hosts())
	for h := range bs {
		bs[h] = &stamper{blaster: blaster{dst: -1}, id: h, cut: cut, got: map[uint64]bool{}}
		s.Attach(h, bs[h], nil)
	}
	for h := 1; h < 4; h++ {
		bs[h].dst, bs[h].n, bs[h].entropy = 0, n, uint16(h)
	}
	return s, bs
}

// queued is the number of packets queued at every port of s.
func queued(s *Sim) (n int) {
	for i := range s.ports {
		n += s.ports[i].qLen
	}
	return n
}

// checkPFCClear asserts that no port of s is paused, holds a pause it
// sent, or counts ingress bytes.
func checkPFCClear(t *testing.T, s *Sim, when string) {
	t.Helper()
	for i := range s.ports {
		p := &s.ports[i]
		assert.False(t, p.paused, "%s: port %d paused", when, i)
		assert.False(t, p.xoff, "%s: port %d holds a pause", when, i)
		assert.Zero(t, p.ingress, "%s: port %d ingress bytes", when, i)
	}
}

// TestLinkFailureDropsQueuedPacketsAtOnce: when the links fail, what is
// queued for them is dropped at that instant, counted as lost to a link
// failure at the port that held it, and a down/up flap far shorter than
// the queue's drain time delivers none of it afterwards. Every link of the
// plane (the only one) goes down at 20 µs, while about 400 packets (1.7 MB)
// wait at leaf 0's port to host 0, and comes back 200 ns later.
func TestLinkFailureDropsQueuedPacketsAtOnce(t *testing.T) {
	const down, up = 20_000, 20_200
	s, bs := incast(t, 500, down, nil)
	perPort := make([]int, len(s.ports))
	var lostBefore uint64
	// Registered before the failure: runs just before it at the same time.
	s.At(down, func(int64) {
		for i := range s.ports {
			perPort[i] = s.ports[i].qLen
		}
		lostBefore = s.Stats.Lost
	})
	require.NoError(t, s.FailPlane(0, down, up))
	checked := false
	s.At(down, func(int64) {
		checked = true
		held := 0
		for i := range s.ports {
			p := &s.ports[i]
			held += perPort[i]
			assert.Zero(t, p.qLen, "port %d still queues after the failure", i)
			assert.Zero(t, p.qBytes, "port %d still holds bytes", i)
			assert.EqualValues(t, perPort[i], p.linkLost, "port %d: its queue counted as lost to the link", i)
		}
		require.Greater(t, held, 100, "a queue had built before the failure")
		assert.EqualValues(t, held, s.Stats.Lost-lostBefore, "dropped at the failure, not drained later")
		assert.EqualValues(t, held, s.Stats.LinkLost, "every one lost to the link failure")
	})
	s.Start()
	s.Run(math.MaxInt64, nil)
	require.True(t, checked)

	assert.Zero(t, bs[0].late, "nothing that left before the failure arrives after it")
	assert.Positive(t, bs[0].afterCut, "the senders go on after the flap")
	assert.Zero(t, queued(s))
	sent := bs[1].sent + bs[2].sent + bs[3].sent
	assert.Equal(t, 1500, sent)
	assert.Equal(t, sent, bs[0].rx+int(s.Stats.Lost+s.Stats.Dropped), "every packet arrives or is counted lost")
	assert.Equal(t, s.Stats.Lost, s.Stats.LinkLost, "no random loss configured")
}

// TestSpineLinkFlapDeliversNothingQueuedBefore: the same for one link
// between leaf 1 and spine 0, onto which leaf 1 hashes both its senders
// (800 Gb/s into 400): the queue at leaf 1's uplink is dropped at the
// failure, and after a 100 ns flap none of the packets it held arrives;
// packets already past the link (queued at spine 0 or leaf 0) and those
// sent on after the flap still do.
func TestSpineLinkFlapDeliversNothingQueuedBefore(t *testing.T) {
	const down, up = 30_000, 30_100
	s, bs := incast(t, 1000, down, nil)
	onSpine0(t, s, bs)
	uplink := s.nodes[s.leafNode(0, 1)].ports[2] // leaf 1 → spine 0
	var held []uint64
	var dropped uint64
	s.At(down, func(int64) { held = keysQueued(s, uplink) })
	require.NoError(t, s.FailSpineLink(0, 1, 0, down, up))
	s.At(down, func(int64) { dropped = s.ports[uplink].linkLost })
	s.Start()
	s.Run(math.MaxInt64, nil)
	require.Greater(t, len(held), 100, "a queue at leaf 1's uplink when it failed")
	assert.EqualValues(t, len(held), dropped, "dropped at the failure")
	// Later, the packet being serialised then and those on the wire (a
	// link delay's worth, 12) are lost where they would have arrived.
	assert.InDelta(t, len(held)+13, float64(s.ports[uplink].linkLost), 2)
	arrived := 0
	for _, k := range held {
		if bs[0].got[k] {
			arrived++
		}
	}
	assert.Zero(t, arrived, "packets queued at the link when it failed that arrived")
	assert.Positive(t, bs[0].afterCut)
	assert.Equal(t, 3000, bs[0].rx+int(s.Stats.Lost+s.Stats.Dropped))
}

// onSpine0 gives hosts 2 and 3 (leaf 1) entropies that leaf 1 hashes onto
// spine 0 while no link is down.
func onSpine0(t *testing.T, s *Sim, bs []*stamper) {
	leaf := &s.nodes[s.leafNode(0, 1)]
	up := leaf.ports[s.cfg.HostsPerLeaf:]
	for h := 2; h < 4; h++ {
		e := 0
		for ; e < 64; e++ {
			pk := &Packet{Src: int32(h), Dst: 0, SrcPort: uint16(SrcPortBase + e), DstPort: DstPort}
			if s.ecmp(leaf, up, pk, 0) == up[0] {
				break
			}
		}
		require.Less(t, e, 64)
		bs[h].entropy = uint16(e)
	}
}

// TestDownSwitchPortHoldsNoQueue: a switch forwarding to a port whose link
// is down drops the packet at once (a link-failure loss), without queueing,
// marking or serialising it. Leaf 1's link to spine 0 is down from the
// start and leaf 0 never learns it (no RerouteDelay), so spine 0 receives
// host 0's packets to host 2 on some entropies and has nowhere to send
// them.
func TestDownSwitchPortHoldsNoQueue(t *testing.T) {
	s, bs := small(t, nil)
	require.NoError(t, s.FailSpineLink(0, 1, 0, 0, 0))
	bs[0].dst, bs[0].n = 2, 0
	for e := 0; e < 64; e++ {
		bs[0].entropy, bs[0].n = uint16(e), 10
		s.Start()
		s.Run(math.MaxInt64, nil)
	}
	dead := &s.ports[s.nodes[s.spineNode(0, 0)].ports[1]]
	require.Positive(t, dead.lost, "some entropies hash onto spine 0")
	assert.Equal(t, dead.lost, dead.linkLost)
	assert.Zero(t, dead.maxQ, "a down port holds no queue")
	assert.Zero(t, dead.sentPkts, "nor serialises anything")
	assert.Zero(t, dead.marks)
	assert.Equal(t, 640, bs[2].rx+int(s.Stats.LinkLost))
	assert.Equal(t, s.Stats.Lost, s.Stats.LinkLost)
}

// TestFailureFlushKeepsPFCStraight: with PFC, the packets a failure drops
// give back the ingress bytes they held and the failed link's pause state
// starts afresh, so no port is left paused (the pause and resume frames on
// the failed link are lost with it) and every count returns to zero.
// Hosts 1–3 fill host 0's leaf port far past XOFF, the pauses spread back
// to the senders, and a link carrying them (leaf 1 to spine 0, onto which
// leaf 1 hashes both its senders), then the whole plane, fail and come
// back.
func TestFailureFlushKeepsPFCStraight(t *testing.T) {
	for _, kase := range []string{"spine link", "plane"} {
		const down, up = 40_000, 41_000
		s, bs := incast(t, 1500, down, func(c *Config) { c.PFC = true })
		onSpine0(t, s, bs)
		pausedAtFailure := 0
		s.At(down, func(int64) {
			for i := range s.ports {
				if s.ports[i].paused {
					pausedAtFailure++
				}
			}
		})
		if kase == "plane" {
			require.NoError(t, s.FailPlane(0, down, up))
			s.At(down, func(int64) {
				assert.Zero(t, queued(s), "%s: queues flushed", kase)
				checkPFCClear(t, s, kase+" right after the failure")
			})
		} else {
			require.NoError(t, s.FailSpineLink(0, 1, 0, down, up))
		}
		s.Start()
		s.Run(math.MaxInt64, nil)
		require.Positive(t, pausedAtFailure, "%s: PFC paused ports before the failure", kase)
		for h := 1; h < 4; h++ {
			assert.Zero(t, bs[h].n, "%s: host %d sent everything (no port stuck paused)", kase, h)
		}
		assert.Positive(t, s.Stats.LinkLost, kase)
		assert.Zero(t, s.Stats.Dropped, "%s: PFC drops nothing at the tail", kase)
		assert.Equal(t, 4500, bs[0].rx+int(s.Stats.Lost), kase)
		if kase == "plane" {
			assert.Zero(t, bs[0].late, "%s: nothing from before the failure after it", kase)
		}
		assert.Zero(t, queued(s), kase)
		checkPFCClear(t, s, kase+" at the end")
	}
}

// echo sends one datagram of n header and pay payload bytes to host to
// at the start and answers every datagram it receives with one of ackN
// header bytes; it records when its first answer came back.
type echo struct {
	to, n, pay, ackN int
	out              []Tx
	back             int64
}

func (e *echo) Receive(now int64, from, plane int, ecn ECN, data []byte) int {
	if e.to < 0 {
		e.out = append(e.out, Tx{To: from, Plane: plane, N: e.ackN})
		return 0
	}
	if e.back < 0 {
		e.back = now
	}
	return 0
}
func (e *echo) PollTransmit(now int64, buf []byte) (Tx, bool) {
	if len(e.out) == 0 {
		return Tx{}, false
	}
	tx := e.out[0]
	e.out = e.out[1:]
	return tx, true
}
func (e *echo) HandleTimeout(int64)                                      {}
func (e *echo) NextTimeout() int64                                       { return math.MaxInt64 }
func (e *echo) Dial(int64, int) (uint32, error)                          { return 0, nil }
func (e *echo) Send(int64, uint32, uint32, uint64, uint32, uint64) error { return nil }
func (e *echo) PostRecv(int64, uint32, uint32, uint64, uint32, uint64) error {
	return nil
}
func (e *echo) PollEvent() (Event, bool) { return Event{}, false }

// TestBaseRTTUsesEachLinksRate: BaseRTT serialises the packet and its
// acknowledgement at the host rate on the two host links and at the
// leaf–spine rate on the two uplinks of the path, and matches the round
// trip an idle fabric gives a 4218-byte packet (56-byte header, 4096-byte
// payload, 66 bytes of overhead) and a 130-byte answer (64 + 66). Hand
// computations, 1 µs links (8 × 1000 ns), each serialisation rounded down
// to a whole ns:
//
//   - 400 Gb/s hosts, 8 per leaf, 4 spines: 800 Gb/s uplinks (the failure
//     scenario). Data 84.36 → 84 and 42.18 → 42 ns, answer 2.6 → 2 and
//     1.3 → 1 ns: 8000 + 2·(84 + 42) + 2·(2 + 1) = 8258 ns (counting the
//     uplinks at the host rate gave 8344).
//   - 400 Gb/s hosts, 8 per leaf, 8 spines, oversubscription 2: 200 Gb/s
//     uplinks. 168.72 → 168 and 5.2 → 5 ns on them: 8000 + 2·(84 + 168) +
//     2·(2 + 5) = 8518 ns.
//   - 600 Gb/s hosts, 4 per leaf, 2 spines: 1.2 Tb/s uplinks. 56.24 → 56,
//     28.12 → 28, 1.73 → 1, 0.87 → 0 ns: 8000 + 2·(56 + 28) + 2·(1 + 0)
//     = 8170 ns.
//   - 400 Gb/s everywhere (8 hosts, 8 spines, the other scenarios):
//     8000 + 4·84 + 4·2 = 8344 ns, as before.
func TestBaseRTTUsesEachLinksRate(t *testing.T) {
	for _, k := range []struct {
		rate                  float64
		leaves, spines, hosts int
		oversub               float64
		want                  int64
	}{
		{400e9, 4, 4, 8, 1, 8258},
		{400e9, 2, 8, 8, 2, 8518},
		{600e9, 2, 2, 4, 1, 8170},
		{400e9, 2, 8, 8, 1, 8344},
	} {
		c := DefaultConfig()
		c.LinkRate, c.Leaves, c.Spines, c.HostsPerLeaf, c.Oversub = k.rate, k.leaves, k.spines, k.hosts, k.oversub
		assert.Equal(t, k.want, c.BaseRTT(4218, 130), "%+v", k)

		s, err := New(c)
		require.NoError(t, err)
		far := c.Hosts() - 1 // under the last leaf
		ask := &echo{to: far, back: -1, out: []Tx{{To: far, N: 56, PayloadLen: 4096}}}
		for h := range s.Hosts() {
			var tr Transport = &echo{to: -1, ackN: 64}
			if h == 0 {
				tr = ask
			}
			s.Attach(h, tr, nil)
		}
		s.Start()
		s.Run(math.MaxInt64, nil)
		assert.Equal(t, k.want, ask.back, "%+v: the simulated round trip", k)
	}
}

// TestFailureWithUnattachedHosts: a link's failure and recovery prompt the
// idle host ports at its ends to send again; a host with no transport
// attached (Start leaves such hosts alone) has nothing to send and must be
// passed over, not polled.
func TestFailureWithUnattachedHosts(t *testing.T) {
	s, _ := smallFabric(t, nil)
	b := &blaster{dst: 0, n: 10}
	s.Attach(1, b, nil)
	s.Start()
	require.NoError(t, s.FailPlane(0, 1000, 5000))
	s.Run(100_000, nil)
	require.Zero(t, b.n, "host 1 did not send everything")
}
