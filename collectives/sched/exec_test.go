package sched

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/metaroce/metaroce/collectives/reduce"
	"github.com/stretchr/testify/require"
)

// runCollective builds the plans of cfg, checks their invariants, executes them
// on random inputs and compares every rank's output with the naive reference.
func runCollective(t *testing.T, rng *rand.Rand, cfg Config, opt ExecOptions) {
	t.Helper()
	plans, err := BuildAll(cfg)
	if err != nil {
		t.Fatalf("%+v: %v", cfg, err)
	}
	if err := Validate(plans); err != nil {
		t.Fatalf("%+v: %v", cfg, err)
	}
	checkHazards(t, plans)
	n := cfg.NRanks
	inputs := make([][]byte, n)
	bufs := make([]Buffers, n)
	for r := range n {
		inputs[r] = make([]byte, inputBytes(cfg))
		fillInput(rng, inputs[r], cfg.DType, cfg.Op)
		p := plans[r]
		recv := make([]byte, p.RecvBytes)
		for i := range recv {
			recv[i] = 0xa5 // poison: a missing write shows
		}
		if cfg.InPlace {
			off := int64(0)
			if cfg.Collective == AllGather {
				off = int64(r) * cfg.Count * int64(cfg.DType.Size())
			}
			copy(recv[off:], inputs[r])
			bufs[r] = Buffers{Recv: recv}
		} else {
			bufs[r] = Buffers{Send: append([]byte(nil), inputs[r][:p.SendBytes]...), Recv: recv}
		}
	}
	if err := Execute(plans, bufs, opt); err != nil {
		t.Fatalf("%+v: %v", cfg, err)
	}
	want, at := expected(cfg, inputs)
	esize := int64(cfg.DType.Size())
	for r := range n {
		got := bufs[r].Recv[at[r]*esize:]
		got = got[:min(int64(len(got)), int64(len(want[r])))]
		if !sameResult(cfg, got, want[r]) {
			t.Fatalf("%+v %+v: rank %d output differs\n got % x\nwant % x", cfg, opt, r, got, want[r])
		}
		if !cfg.InPlace && p2pIdle(cfg, r) && len(bufs[r].Recv) != 0 {
			t.Fatalf("idle p2p rank %d has a receive buffer", r)
		}
	}
}

func p2pIdle(cfg Config, r int) bool { return cfg.Collective == P2P && r != cfg.Peer }

// checkHazards verifies that the dependencies order every pair of steps of a
// rank that touch a common byte with at least one write (directly or through
// a chain), so any executor that honours Deps computes the sequential result.
func checkHazards(t *testing.T, plans []*Plan) {
	t.Helper()
	for _, p := range plans {
		if len(p.Steps) > 400 {
			continue // quadratic check: small plans only
		}
		reach := make([][]bool, len(p.Steps)) // reach[i][j]: j is a (transitive) dependency of i
		for i := range p.Steps {
			reach[i] = make([]bool, len(p.Steps))
			for _, d := range p.Steps[i].Deps {
				reach[i][d] = true
				for j := range d {
					reach[i][j] = reach[i][j] || reach[d][j]
				}
			}
		}
		for i := range p.Steps {
			wi, iw := p.Steps[i].Writes()
			for j := range i {
				wj, jw := p.Steps[j].Writes()
				conflict := false
				if iw {
					for _, r := range append(p.Steps[j].Reads(), wj) {
						conflict = conflict || r.Overlaps(wi)
					}
				}
				if jw {
					for _, r := range p.Steps[i].Reads() {
						conflict = conflict || r.Overlaps(wj)
					}
				}
				if conflict && !reach[i][j] {
					t.Fatalf("rank %d: steps %d (%s) and %d (%s) conflict but are unordered", p.Rank, j, &p.Steps[j], i, &p.Steps[i])
				}
			}
		}
	}
}

// TestCollectivesMatchReference is the main equivalence test: every collective
// and algorithm × data type × op × 1..8 ranks × sizes × in/out of place ×
// eager/rendezvous, against the naive elementwise model.
func TestCollectivesMatchReference(t *testing.T) {
	rng := rand.New(rand.NewPCG(2024, 7))
	dtypes := []reduce.DType{reduce.Int32, reduce.Float32, reduce.Float64, reduce.Float16, reduce.BFloat16, reduce.Uint8}
	type variant struct {
		c    Collective
		algo Algorithm
	}
	variants := []variant{
		{AllReduce, AlgoRing}, {AllReduce, AlgoRecursiveDoubling}, {AllReduce, AlgoHalvingDoubling}, {AllReduce, AlgoHierarchical}, {AllReduce, AlgoAuto},
		{ReduceScatter, AlgoAuto}, {AllGather, AlgoAuto}, {AllToAll, AlgoAuto},
		{Broadcast, AlgoAuto}, {SendRecv, AlgoAuto}, {P2P, AlgoAuto},
	}
	const chunkBytes = 24 // small, and not a multiple of 16 or 8... of every size
	for _, v := range variants {
		t.Run(fmt.Sprintf("%s-%s", v.c, v.algo), func(t *testing.T) {
			for _, dt := range dtypes {
				ops := []reduce.Op{reduce.OpSum}
				if v.c.Reduces() {
					ops = reduce.AllOps()
				}
				esize := int64(dt.Size())
				chunkElems := max(chunkBytes/esize, 1)
				counts := []int64{0, 1, 13, 3*chunkElems + 1, 3072/esize + 3}
				for _, op := range ops {
					for n := 1; n <= 8; n++ {
						for ci, count := range counts {
							for _, inPlace := range []bool{false, true} {
								cfg := Config{
									Collective: v.c, Algorithm: v.algo, NRanks: n, Count: count, DType: dt, Op: op,
									Root: (n - 1) / 2, Peer: n - 1, Channels: 1 + (n+ci)%3, ChunkBytes: chunkBytes, InPlace: inPlace,
								}
								if count > 100 && op != reduce.OpSum && op != reduce.OpAvg {
									continue // the big size once per dtype with sum/avg keeps the run short
								}
								if v.algo == AlgoHierarchical {
									// Every divisor in turn, 1 and n included.
									ds := divisors(n)
									cfg.GroupSize = ds[(ci+int(op))%len(ds)]
								}
								runCollective(t, rng, cfg, ExecOptions{Rendezvous: (n+ci)%2 == 0})
							}
						}
					}
				}
			}
		})
	}
}

// divisors returns the divisors of n in increasing order.
func divisors(n int) []int {
	var ds []int
	for d := 1; d <= n; d++ {
		if n%d == 0 {
			ds = append(ds, d)
		}
	}
	return ds
}

// TestBothSemantics runs representative plans under eager and rendezvous sends.
func TestBothSemantics(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 5))
	for _, c := range AllCollectives() {
		for _, algo := range []Algorithm{AlgoAuto, AlgoRing} {
			if !algorithmFits(c, algo) {
				continue
			}
			for _, n := range []int{2, 3, 5, 8} {
				for _, ip := range []bool{false, true} {
					for _, rv := range []bool{false, true} {
						cfg := Config{Collective: c, Algorithm: algo, NRanks: n, Count: 301, DType: reduce.Float32,
							Op: reduce.OpAvg, Root: 1, Peer: 0, Channels: 2, ChunkBytes: 64, InPlace: ip}
						runCollective(t, rng, cfg, ExecOptions{Rendezvous: rv})
					}
				}
			}
		}
	}
}

// TestAllToAllNoIncast checks the shifted pairwise property: within a round
// (and channel), no two ranks send to the same destination.
func TestAllToAllNoIncast(t *testing.T) {
	for n := 1; n <= 9; n++ {
		plans, err := BuildAll(Config{Collective: AllToAll, NRanks: n, Count: 100, DType: reduce.Int32, Channels: 2, ChunkBytes: 64})
		if err != nil {
			t.Fatal(err)
		}
		type slot struct{ round, ch, dst, seq int }
		seen := make(map[slot]int)
		for _, p := range plans {
			for _, s := range p.Steps {
				if s.Kind != KindSend {
					continue
				}
				if s.Peer != mod(p.Rank+s.Round, n) {
					t.Fatalf("n=%d rank %d round %d sends to %d, want %d", n, p.Rank, s.Round, s.Peer, mod(p.Rank+s.Round, n))
				}
				k := slot{s.Round, s.Channel, s.Peer, s.Seq}
				if other, ok := seen[k]; ok && other != p.Rank {
					t.Fatalf("n=%d round %d: ranks %d and %d both send to %d", n, s.Round, other, p.Rank, s.Peer)
				}
				seen[k] = p.Rank
			}
		}
	}
}

func TestDeadlockDetected(t *testing.T) {
	mk := func(rank, peer int) *Plan {
		return &Plan{Collective: SendRecv, Rank: rank, NRanks: 2, DType: reduce.Int32, Channels: 1, RecvBytes: 8, SendBytes: 8,
			Steps: []Step{
				{Kind: KindRecv, Peer: peer, Dst: Range{Buf: BufRecv, Len: 4}},
				{Kind: KindSend, Peer: peer, Src: Range{Buf: BufSend, Len: 4}, Deps: []int{0}},
			}}
	}
	plans := []*Plan{mk(0, 1), mk(1, 0)}
	bufs := []Buffers{{Send: make([]byte, 8), Recv: make([]byte, 8)}, {Send: make([]byte, 8), Recv: make([]byte, 8)}}
	for _, rv := range []bool{false, true} {
		err := Execute(plans, bufs, ExecOptions{Rendezvous: rv})
		if !errors.Is(err, ErrDeadlock) {
			t.Fatalf("rendezvous=%v: got %v, want a deadlock", rv, err)
		}
	}
}

// TestRendezvousOnlyDeadlock: two ranks that both send first then receive work
// with eager sends but deadlock when sends need a ready receive that depends on
// the send.
func TestRendezvousOnlyDeadlock(t *testing.T) {
	mk := func(rank, peer int) *Plan {
		return &Plan{Collective: SendRecv, Rank: rank, NRanks: 2, DType: reduce.Int32, Channels: 1, RecvBytes: 4, SendBytes: 4,
			Steps: []Step{
				{Kind: KindSend, Peer: peer, Src: Range{Buf: BufSend, Len: 4}},
				{Kind: KindRecv, Peer: peer, Dst: Range{Buf: BufRecv, Len: 4}, Deps: []int{0}},
			}}
	}
	plans := []*Plan{mk(0, 1), mk(1, 0)}
	bufs := []Buffers{{Send: make([]byte, 4), Recv: make([]byte, 4)}, {Send: make([]byte, 4), Recv: make([]byte, 4)}}
	if err := Execute(plans, bufs, ExecOptions{}); err != nil {
		t.Fatalf("eager: %v", err)
	}
	if err := Execute(plans, bufs, ExecOptions{Rendezvous: true}); !errors.Is(err, ErrDeadlock) {
		t.Fatalf("rendezvous: got %v, want a deadlock", err)
	}
}

// TestAllToAllInFlight runs the pairwise all-to-all with overlapping rounds
// against the reference under both message semantics, and checks the window:
// with w = inFlight/lanes rounds, a round's send waits for the send of the
// round w earlier on its lane and for nothing of the rounds in between.
func TestAllToAllInFlight(t *testing.T) {
	rng := rand.New(rand.NewPCG(11, 4))
	for n := 1; n <= 8; n++ {
		for _, c := range []struct {
			count    int64 // int32 elements per peer
			chunk    int64 // bytes
			inFlight int
			window   int
		}{
			{10, 0, 0, 1},   // lockstep
			{10, 0, 1, 1},   // lockstep
			{10, 0, 3, 3},   // one lane: three rounds
			{10, 0, 100, 0}, // every round at once
			{40, 40, 4, 1},  // four lanes of 10 elements: lockstep
			{40, 40, 8, 2},  // four lanes, eight messages: two rounds
		} {
			for _, inPlace := range []bool{false, true} {
				cfg := Config{Collective: AllToAll, NRanks: n, Count: c.count, DType: reduce.Int32, Channels: 1,
					ChunkBytes: c.chunk, AllToAllInFlight: c.inFlight, InPlace: inPlace}
				for _, rv := range []bool{false, true} {
					runCollective(t, rng, cfg, ExecOptions{Rendezvous: rv})
				}
				p, err := Build(cfg)
				require.NoError(t, err)
				w := c.window
				if w == 0 {
					w = n // every round at once: no round waits for another
				}
				// round and lane of every send and receive step
				type pos struct{ round, lane int }
				at := map[int]pos{}
				lanes := map[int]int{}
				for i, s := range p.Steps {
					if s.Kind == KindSend || s.Kind == KindRecv {
						at[i] = pos{s.Round, lanes[s.Round*2+int(s.Kind)]}
						lanes[s.Round*2+int(s.Kind)]++
					}
				}
				for i, s := range p.Steps {
					if s.Kind != KindSend {
						continue
					}
					me := at[i]
					waits := false
					for _, d := range s.Deps {
						dp, ok := at[d]
						if !ok {
							continue
						}
						require.Equal(t, me.lane, dp.lane, "n=%d %+v step %d waits on another lane", n, c, i)
						require.Equal(t, me.round-w, dp.round, "n=%d %+v step %d (round %d) waits on round %d", n, c, i, me.round, dp.round)
						waits = true
					}
					require.Equal(t, me.round > w, waits, "n=%d %+v step %d round %d: waits=%v", n, c, i, me.round, waits)
				}
			}
		}
	}
}
