package sched

import (
	"errors"
	"maps"
	"math/bits"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/metaroce/metaroce/collectives/reduce"
)

func TestBuildErrors(t *testing.T) {
	ok := Config{Collective: AllReduce, NRanks: 4, Count: 10, DType: reduce.Float32}
	cases := []struct {
		name string
		edit func(*Config)
	}{
		{"no ranks", func(c *Config) { c.NRanks = 0 }},
		{"rank out of range", func(c *Config) { c.Rank = 4 }},
		{"negative count", func(c *Config) { c.Count = -1 }},
		{"bad dtype", func(c *Config) { c.DType = 77 }},
		{"bad op", func(c *Config) { c.Op = 77 }},
		{"bad collective", func(c *Config) { c.Collective = 77 }},
		{"negative chunk", func(c *Config) { c.ChunkBytes = -1 }},
		{"too many channels", func(c *Config) { c.Channels = 5000 }},
		{"root out of range", func(c *Config) { c.Collective, c.Root = Broadcast, 9 }},
		{"peer out of range", func(c *Config) { c.Collective, c.Peer = P2P, -1 }},
		{"algorithm mismatch", func(c *Config) { c.Collective, c.Algorithm = AllToAll, AlgoRing }},
		{"overflow", func(c *Config) { c.Count = 1 << 62 }},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			cfg := ok
			c.edit(&cfg)
			if _, err := Build(cfg); !errors.Is(err, ErrConfig) {
				t.Fatalf("got %v, want ErrConfig", err)
			}
		})
	}
	if _, err := BuildAll(ok); err != nil {
		t.Fatal(err)
	}
}

func TestBusBWFactor(t *testing.T) {
	cases := []struct {
		c    Collective
		n    int
		want float64
	}{
		{AllReduce, 4, 1.5}, {AllReduce, 1, 0}, {ReduceScatter, 4, 0.75}, {AllGather, 8, 0.875},
		{AllToAll, 2, 0.5}, {Broadcast, 8, 1}, {SendRecv, 8, 1}, {P2P, 2, 1}, {AllReduce, 0, 0},
	}
	for _, c := range cases {
		if got := BusBWFactor(c.c, c.n); got != c.want {
			t.Errorf("BusBWFactor(%s, %d) = %v, want %v", c.c, c.n, got, c.want)
		}
	}
}

func TestChooseAlgorithm(t *testing.T) {
	const rd, hb = AutoRecursiveDoublingMaxBytes, AutoHalvingMaxBlockBytes
	const hm = AutoHierarchicalMinBlockBytes
	cases := []struct {
		n, group int
		bytes    int64
		want     Algorithm
	}{
		{8, 0, rd, AlgoRecursiveDoubling},
		{8, 0, 4 << 10, AlgoRecursiveDoubling},
		{2, 0, 4 << 10, AlgoRecursiveDoubling},
		{3, 0, 4 << 10, AlgoRecursiveDoubling},
		{8, 0, rd + 1, AlgoHalvingDoubling},
		{8, 0, 8 * hb, AlgoHalvingDoubling},
		{8, 0, 8*hb + 8, AlgoRing},
		{64, 0, 1 << 20, AlgoHalvingDoubling},
		{64, 0, 4 << 20, AlgoHalvingDoubling},
		{64, 0, 16 << 20, AlgoRing},
		{4, 0, 256 << 10, AlgoHalvingDoubling},
		{4, 0, 1 << 20, AlgoRing},
		// Two ranks: the ring does less local work for the same traffic.
		{2, 0, 1 << 20, AlgoRing},
		{2, 0, rd + 1, AlgoRing},
		// Not a power of two: the fold would add whole-buffer transfers.
		{3, 0, rd + 1, AlgoRing},
		{6, 0, 256 << 10, AlgoRing},
		{48, 0, 1 << 20, AlgoRing},
		// A known grouping: the hierarchical ring from 16 KiB blocks, and
		// over any rank count that the groups divide.
		{64, 8, 1 << 20, AlgoHierarchical},
		{64, 8, 64 * hm, AlgoHierarchical},
		{64, 8, 64*hm - 64, AlgoHalvingDoubling},
		{64, 8, 16 << 20, AlgoHierarchical},
		{48, 8, 256 << 10, AlgoHierarchical},
		{64, 8, rd, AlgoRecursiveDoubling},
		// Groups that do not split the ranks change nothing.
		{64, 64, 16 << 20, AlgoRing},
		{64, 1, 16 << 20, AlgoRing},
		{64, 7, 16 << 20, AlgoRing},
		{64, 0, 16 << 20, AlgoRing},
	}
	for _, c := range cases {
		if a := ChooseAlgorithm(AllReduce, c.n, c.group, c.bytes); a != c.want {
			t.Errorf("%d ranks in groups of %d, %d bytes: %s, want %s", c.n, c.group, c.bytes, a, c.want)
		}
	}
	p, err := Build(Config{Collective: AllReduce, NRanks: 4, Count: 1 << 20, DType: reduce.Float32})
	if err != nil || p.Algorithm != AlgoRing {
		t.Fatalf("auto 4 MiB over 4 ranks: %v %v", p.Algorithm, err)
	}
	p, err = Build(Config{Collective: AllReduce, NRanks: 64, Rank: 5, Count: 1 << 18, DType: reduce.Float32})
	if err != nil || p.Algorithm != AlgoHalvingDoubling {
		t.Fatalf("auto 1 MiB over 64 ranks: %v %v", p.Algorithm, err)
	}
}

// TestRecursiveDoublingRounds pins the message count of the latency algorithm:
// ⌈log2 n⌉-ish rounds, one message per round per channel on the core ranks.
func TestRecursiveDoublingRounds(t *testing.T) {
	for _, c := range []struct{ n, maxSends int }{{2, 1}, {4, 2}, {8, 3}, {5, 3}, {6, 3}, {7, 3}} {
		plans, err := BuildAll(Config{Collective: AllReduce, Algorithm: AlgoRecursiveDoubling, NRanks: c.n, Count: 8, DType: reduce.Int32})
		if err != nil {
			t.Fatal(err)
		}
		for _, p := range plans {
			sends := 0
			for _, s := range p.Steps {
				if s.Kind == KindSend {
					sends++
				}
			}
			if sends > c.maxSends {
				t.Errorf("n=%d rank %d sends %d messages, want ≤ %d", c.n, p.Rank, sends, c.maxSends)
			}
		}
	}
}

// TestRoundsOverlap: a round of recursive doubling, or of the
// reduce-scatter of recursive halving and doubling, costs one message
// latency. Its receive may be posted before the previous round's
// reduction (it lands in the other slot), and its reduction does not wait
// for its own send to complete (which reads other bytes).
func TestRoundsOverlap(t *testing.T) {
	for _, algo := range []Algorithm{AlgoRecursiveDoubling, AlgoHalvingDoubling} {
		for _, n := range []int{4, 6, 8, 64} {
			plans, err := BuildAll(Config{Collective: AllReduce, Algorithm: algo, NRanks: n, Count: 640,
				DType: reduce.Int32, Op: reduce.OpSum})
			if err != nil {
				t.Fatal(err)
			}
			for _, p := range plans {
				anc := ancestors(p)
				of := func(kind Kind, round int) int {
					for i, s := range p.Steps {
						if s.Kind == kind && s.Round == round {
							return i
						}
					}
					return -1
				}
				for k := 2; ; k++ {
					recv, prevReduce, send, reduce := of(KindRecv, k), of(KindReduce, k-1), of(KindSend, k), of(KindReduce, k)
					if recv < 0 || reduce < 0 {
						break
					}
					if prevReduce >= 0 && anc[recv][prevReduce] {
						t.Errorf("%s n=%d rank %d: round %d's receive waits for round %d's reduction", algo, n, p.Rank, k, k-1)
					}
					if anc[reduce][send] {
						t.Errorf("%s n=%d rank %d: round %d's reduction waits for its send", algo, n, p.Rank, k)
					}
				}
			}
		}
	}
}

// ancestors returns, for each step of p, the steps it waits for directly
// or transitively.
func ancestors(p *Plan) []map[int]bool {
	anc := make([]map[int]bool, len(p.Steps))
	for i, s := range p.Steps { // dependencies always point backwards
		anc[i] = map[int]bool{}
		for _, d := range s.Deps {
			anc[i][d] = true
			for a := range anc[d] {
				anc[i][a] = true
			}
		}
	}
	return anc
}

// TestHalvingDoublingTraffic pins what recursive halving and doubling is
// chosen for: on a power of two of ranks every rank sends 2·log2(n) messages
// per channel (one per round, unchunked here) carrying 2(n-1)/n of the
// buffer in all, as the ring does in 2(n-1) messages, and hears from at most
// two partners at once. Beyond a power of two the folded ranks hand over
// and get back the whole buffer.
func TestHalvingDoublingTraffic(t *testing.T) {
	const count = 3 * 64 * 8 // elements, a multiple of every n below
	for _, c := range []struct{ n, channels int }{{2, 1}, {4, 1}, {8, 2}, {16, 1}, {64, 3}, {6, 1}} {
		plans, err := BuildAll(Config{Collective: AllReduce, Algorithm: AlgoHalvingDoubling, NRanks: c.n, Count: count,
			DType: reduce.Float32, Op: reduce.OpSum, Channels: c.channels, ChunkBytes: 1 << 30})
		if err != nil {
			t.Fatal(err)
		}
		pow := 1 << (bits.Len(uint(c.n)) - 1)
		rem := c.n - pow
		logp := bits.Len(uint(pow)) - 1
		for _, p := range plans {
			var sends, sent int64
			for _, s := range p.Steps {
				if s.Kind == KindSend {
					sends++
					sent += s.Src.Len
				}
			}
			wantSends, wantSent := int64(2*logp*c.channels), int64(2*(pow-1))*count*4/int64(pow)
			switch {
			case p.Rank < 2*rem && p.Rank%2 == 0:
				wantSends, wantSent = int64(c.channels), count*4
			case p.Rank < 2*rem:
				wantSends += int64(c.channels)
				wantSent += count * 4
			}
			if sends != wantSends || sent != wantSent {
				t.Errorf("n=%d rank %d: %d messages of %d bytes in all, want %d of %d", c.n, p.Rank, sends, sent, wantSends, wantSent)
			}
			wantPeers := min(c.n-1, 2)
			if p.Rank < 2*rem && p.Rank%2 == 0 {
				wantPeers = 1 // it hears from its odd partner only
			}
			if got := p.RecvPeers(); got != wantPeers {
				t.Errorf("n=%d rank %d: RecvPeers %d, want %d", c.n, p.Rank, got, wantPeers)
			}
		}
	}
}

// TestHierarchicalTraffic pins what the hierarchical ring is chosen for:
// every rank sends 2(g-1) messages per channel inside its group and 2(l-1)
// to the next group (one per step, unchunked here), 2(n-1)/n of the buffer
// in all as the flat ring does, of which only 2(l-1)/n crosses between
// groups; it hears from two peers, the one before it in its group and in
// its cross ring, and declares one at a time. Its cross-group receives wait
// for the local receive one step before phase 1 ends.
func TestHierarchicalTraffic(t *testing.T) {
	const count = 3 * 64 * 8 // elements, a multiple of every n below
	for _, c := range []struct{ n, g, channels int }{{4, 2, 1}, {8, 4, 2}, {8, 2, 1}, {64, 8, 1}, {6, 3, 2}, {6, 2, 1}} {
		plans, err := BuildAll(Config{Collective: AllReduce, Algorithm: AlgoHierarchical, NRanks: c.n, GroupSize: c.g,
			Count: count, DType: reduce.Float32, Op: reduce.OpSum, Channels: c.channels, ChunkBytes: 1 << 30})
		if err != nil {
			t.Fatal(err)
		}
		l := c.n / c.g
		for _, p := range plans {
			group := p.Rank / c.g
			var localSends, crossSends, localBytes, crossBytes int64
			peers := map[int]bool{}
			for _, s := range p.Steps {
				switch {
				case s.Kind == KindSend && s.Peer/c.g == group:
					localSends++
					localBytes += s.Src.Len
				case s.Kind == KindSend:
					crossSends++
					crossBytes += s.Src.Len
				case s.Kind == KindRecv:
					peers[s.Peer] = true
				}
			}
			ch := int64(c.channels)
			wantLocal, wantCross := int64(2*(c.g-1))*ch, int64(2*(l-1))*ch
			wantLocalBytes := int64(2*(c.g-1)) * count * 4 / int64(c.g)
			wantCrossBytes := int64(2*(l-1)) * count * 4 / int64(c.n)
			if localSends != wantLocal || crossSends != wantCross || localBytes != wantLocalBytes || crossBytes != wantCrossBytes {
				t.Errorf("n=%d g=%d rank %d: %d local messages (%d B), %d cross (%d B); want %d (%d B), %d (%d B)",
					c.n, c.g, p.Rank, localSends, localBytes, crossSends, crossBytes, wantLocal, wantLocalBytes, wantCross, wantCrossBytes)
			}
			localLeft, crossLeft := group*c.g+(p.Rank%c.g+c.g-1)%c.g, (p.Rank-c.g+c.n)%c.n
			wantPeers := map[int]bool{localLeft: true, crossLeft: true}
			if !maps.Equal(peers, wantPeers) {
				t.Errorf("n=%d g=%d rank %d: hears from %v, want %v", c.n, c.g, p.Rank, peers, wantPeers)
			}
			if got := p.RecvPeers(); got != 1 {
				t.Errorf("n=%d g=%d rank %d: RecvPeers %d, want 1", c.n, c.g, p.Rank, got)
			}
			gate := lastRecvOfRound(p, max(c.g-3, 0))
			for i, s := range p.Steps {
				if s.Kind == KindRecv && s.Peer/c.g != group && !slices.Contains(s.Deps, gate) {
					t.Errorf("n=%d g=%d rank %d: cross receive %d (%s) is not gated on step %d", c.n, c.g, p.Rank, i, &p.Steps[i], gate)
				}
			}
		}
	}
}

func TestParseNames(t *testing.T) {
	for _, c := range AllCollectives() {
		if got, err := ParseCollective(c.String()); err != nil || got != c {
			t.Fatalf("%s: %v %v", c, got, err)
		}
	}
	if got, err := ParseCollective("All_Reduce"); err != nil || got != AllReduce {
		t.Fatalf("All_Reduce: %v %v", got, err)
	}
	if got, err := ParseAlgorithm("recursive-doubling"); err != nil || got != AlgoRecursiveDoubling {
		t.Fatalf("recursive-doubling: %v %v", got, err)
	}
	if _, err := ParseCollective("gossip"); err == nil {
		t.Fatal("accepted gossip")
	}
	if _, err := ParseAlgorithm("magic"); err == nil {
		t.Fatal("accepted magic")
	}
}

func FuzzParseCollective(f *testing.F) {
	for _, s := range []string{"allreduce", "all_to_all", "Broadcast", "", "x"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		c, err := ParseCollective(s)
		if err != nil {
			return
		}
		if back, err := ParseCollective(c.String()); err != nil || back != c {
			t.Fatalf("%q -> %v does not round-trip", s, c)
		}
	})
}

func FuzzParseAlgorithm(f *testing.F) {
	for _, s := range []string{"ring", "rd", "auto", "pairwise", ""} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		a, err := ParseAlgorithm(s)
		if err != nil {
			return
		}
		if back, err := ParseAlgorithm(a.String()); err != nil || back != a {
			t.Fatalf("%q -> %v does not round-trip", s, a)
		}
	})
}

// FuzzBuild turns arbitrary parameters into a config: Build must either reject
// it with ErrConfig or return plans that validate and compute the reference
// result under rendezvous sends.
func FuzzBuild(f *testing.F) {
	f.Add(uint8(0), uint8(0), uint8(4), uint16(37), uint8(8), uint8(0), uint8(2), uint16(24), false, uint8(1))
	f.Add(uint8(3), uint8(0), uint8(7), uint16(5), uint8(6), uint8(0), uint8(3), uint16(2), true, uint8(2))
	f.Add(uint8(0), uint8(2), uint8(5), uint16(100), uint8(7), uint8(4), uint8(1), uint16(0), true, uint8(0))
	f.Add(uint8(0), uint8(7), uint8(6), uint16(301), uint8(8), uint8(12), uint8(2), uint16(20), false, uint8(0))
	f.Fuzz(func(t *testing.T, coll, algo, n uint8, count uint16, dt, op, ch uint8, chunk uint16, inPlace bool, root uint8) {
		cfg := Config{
			Collective: Collective(coll % 8), Algorithm: Algorithm(algo % 9), NRanks: int(n % 10), Count: int64(count % 600),
			DType: reduce.DType(dt % 11), Op: reduce.Op(op % 6), Channels: int(ch % 5), ChunkBytes: int64(chunk),
			InPlace: inPlace, Root: int(root % 10), Peer: int(n % 7),
			AllToAllInFlight: int(root % 5), // the root matters to broadcast and p2p only
			GroupSize:        int(op / 6 % 5),
		}
		if _, err := BuildAll(cfg); err != nil {
			if !errors.Is(err, ErrConfig) {
				t.Fatalf("%+v: unexpected error kind %v", cfg, err)
			}
			return
		}
		rng := rand.New(rand.NewPCG(uint64(count), uint64(n)))
		runCollective(t, rng, cfg, ExecOptions{Rendezvous: true})
	})
}

// TestRecvPeers: a ring's rank receives from the rank before it only; an
// all-to-all's from as many peers as it has rounds in flight (64 KiB per
// peer in 16 lanes of 4 KiB: in-flight 0 or 16 is lockstep, 64 four rounds,
// 1000 every round); a single rank from none.
func TestRecvPeers(t *testing.T) {
	for _, n := range []int{1, 2, 3, 8} {
		ring := min(n-1, 1)
		for _, c := range []struct {
			coll     Collective
			algo     Algorithm
			inFlight int
			want     int
		}{
			{AllReduce, AlgoRing, 0, ring}, {AllGather, AlgoRing, 0, ring}, {ReduceScatter, AlgoRing, 0, ring},
			{AllToAll, AlgoPairwise, 0, ring}, {AllToAll, AlgoPairwise, 16, ring},
			{AllToAll, AlgoPairwise, 64, min(n-1, 4)}, {AllToAll, AlgoPairwise, 1000, n - 1},
		} {
			plans, err := BuildAll(Config{Collective: c.coll, Algorithm: c.algo, NRanks: n, DType: reduce.Uint8,
				Op: reduce.OpSum, Count: 64 << 10, Channels: 2, ChunkBytes: 4 << 10, AllToAllInFlight: c.inFlight})
			if err != nil {
				t.Fatalf("%v n=%d: %v", c.coll, n, err)
			}
			for _, p := range plans {
				if got := p.RecvPeers(); got != c.want {
					t.Errorf("%v n=%d in flight %d rank %d: RecvPeers %d, want %d", c.coll, n, c.inFlight, p.Rank, got, c.want)
				}
			}
		}
	}
}

// TestAutoAllToAllInFlight: at least four messages, as many as fit in
// AllToAllInFlightBytes while they are small, never more than every
// round's; 4-rank plans keep the window they had with a fixed four.
func TestAutoAllToAllInFlight(t *testing.T) {
	for _, c := range []struct {
		n        int
		perPeer  int64 // bytes
		channels int
		want     int
	}{
		{64, 16 << 10, 1, 63},  // 1 MiB over 64 ranks: every round
		{64, 256 << 10, 1, 16}, // 16 MiB: 4 MiB of 256 KiB messages
		{64, 1 << 20, 1, 8},    // 64 MiB: 512 KiB chunks
		{4, 256 << 10, 1, 4},   // 1 MiB over 4 ranks: all 3 rounds, as before
		{4, 4 << 20, 1, 8},     // 16 MiB over 4 ranks: 8 lanes, lockstep as before
		{8, 128 << 10, 1, 7},
		{8, 128 << 10, 2, 14},
		{2, 0, 1, MinAllToAllInFlight},
		{3, 1, 1, MinAllToAllInFlight},
	} {
		cfg := Config{Collective: AllToAll, NRanks: c.n, DType: reduce.Uint8, Count: c.perPeer, Channels: c.channels, ChunkBytes: 512 << 10}
		got := AutoAllToAllInFlight(cfg)
		if got != c.want {
			t.Errorf("%d ranks, %d B per peer, %d channels: %d in flight, want %d", c.n, c.perPeer, c.channels, got, c.want)
		}
	}
	// Against the lanes the builder actually cuts (pieces), over odd
	// counts, channels, chunks and element sizes.
	// Half the cases put shares on whole chunks plus a remainder, where the
	// lane count (not the budget) decides.
	rng := rand.New(rand.NewPCG(11, 12))
	for i := range 4000 {
		cfg := Config{Collective: AllToAll, NRanks: 2 + rng.IntN(70), DType: []reduce.DType{reduce.Uint8, reduce.Float16, reduce.Float32, reduce.Float64}[rng.IntN(4)],
			Count: rng.Int64N(3 << 20), Channels: rng.IntN(5), ChunkBytes: rng.Int64N(1 << 20)}
		if i%2 == 0 {
			ch := int64(max(cfg.Channels, 1))
			cfg.ChunkBytes = 8 * (1 + rng.Int64N(16))
			cfg.Count = ch*cfg.chunkElems()*(1+rng.Int64N(4)) + rng.Int64N(ch)
		}
		pcs := pieces(cfg.Count, max(cfg.Channels, 1), cfg.chunkElems())
		var msg int64
		for _, pc := range pcs {
			msg = max(msg, pc.len*int64(cfg.DType.Size()))
		}
		want := MinAllToAllInFlight
		if msg > 0 {
			want = max(MinAllToAllInFlight, int(min(AllToAllInFlightBytes/msg, int64((cfg.NRanks-1)*len(pcs)))))
		}
		if got := AutoAllToAllInFlight(cfg); got != want {
			t.Fatalf("%+v: %d in flight, the builder's lanes give %d", cfg, got, want)
		}
	}
}
