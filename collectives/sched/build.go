package sched

import (
	"errors"
	"fmt"
	"math"
	"slices"
	"sort"

	"github.com/metaroce/metaroce/collectives/reduce"
)

// ErrConfig is wrapped by every error Build returns for a bad Config.
var ErrConfig = errors.New("sched: invalid config")

// MaxRanks bounds NRanks; it only guards against absurd input.
const MaxRanks = 1 << 16

func (c *Config) check() error {
	bad := func(format string, args ...any) error {
		return fmt.Errorf("%w: "+format, append([]any{ErrConfig}, args...)...)
	}
	switch {
	case c.Collective >= numCollectives:
		return bad("unknown collective %d", c.Collective)
	case c.NRanks < 1 || c.NRanks > MaxRanks:
		return bad("%d ranks, want 1..%d", c.NRanks, MaxRanks)
	case c.Rank < 0 || c.Rank >= c.NRanks:
		return bad("rank %d outside 0..%d", c.Rank, c.NRanks-1)
	case c.Count < 0:
		return bad("negative count %d", c.Count)
	case !c.DType.Valid():
		return bad("unknown data type %d", c.DType)
	case !c.Op.Valid():
		return bad("unknown operation %d", c.Op)
	case c.Channels < 0 || c.Channels > 1024:
		return bad("%d channels, want 0..1024", c.Channels)
	case c.ChunkBytes < 0:
		return bad("negative chunk size %d", c.ChunkBytes)
	case c.AllToAllInFlight < 0:
		return bad("negative all-to-all messages in flight %d", c.AllToAllInFlight)
	case c.GroupSize < 0 || c.GroupSize > 0 && c.NRanks%c.GroupSize != 0:
		return bad("group size %d does not divide %d ranks", c.GroupSize, c.NRanks)
	case c.Algorithm == AlgoHierarchical && c.GroupSize == 0:
		return bad("algorithm %s needs a group size", c.Algorithm)
	case (c.Collective == Broadcast || c.Collective == P2P) && (c.Root < 0 || c.Root >= c.NRanks):
		return bad("root %d outside 0..%d", c.Root, c.NRanks-1)
	case c.Collective == P2P && (c.Peer < 0 || c.Peer >= c.NRanks):
		return bad("peer %d outside 0..%d", c.Peer, c.NRanks-1)
	case c.Count > math.MaxInt64/int64(max(c.NRanks, 4))/int64(c.DType.Size()):
		// The largest buffer a plan names: the whole of an all-gather's
		// output (NRanks blocks), recursive doubling's scratch (3) or a
		// reduce-scatter average's (4 blocks).
		return bad("count %d too large", c.Count)
	}
	if !algorithmFits(c.Collective, c.Algorithm) {
		return bad("algorithm %s does not implement %s", c.Algorithm, c.Collective)
	}
	return nil
}

// algorithmFits reports whether a implements c.
func algorithmFits(c Collective, a Algorithm) bool {
	if a == AlgoAuto {
		return true
	}
	switch c {
	case AllReduce:
		return a == AlgoRing || a == AlgoRecursiveDoubling || a == AlgoHalvingDoubling || a == AlgoHierarchical
	case ReduceScatter, AllGather:
		return a == AlgoRing
	case AllToAll:
		return a == AlgoPairwise
	case Broadcast:
		return a == AlgoChain
	}
	return a == AlgoDirect
}

// ChooseAlgorithm returns the algorithm AlgoAuto resolves to for n ranks
// in groups of groupSize consecutive ranks (0: unknown) and a buffer of
// bytes. For all-reduce: recursive doubling up to
// AutoRecursiveDoublingMaxBytes; above that, when the ranks form several
// groups of more than one (groupSize divides n, 1 < groupSize < n) and the
// blocks (bytes/n) are at least AutoHierarchicalMinBlockBytes, the
// hierarchical ring; for a power of two of at least 4 ranks whose blocks
// are at most AutoHalvingMaxBlockBytes, recursive halving and doubling
// (with a known grouping, below AutoHierarchicalMinBlockBytes whatever the
// block); the hierarchical ring over a known grouping otherwise; the ring
// otherwise. The one algorithm of every other collective.
//
// Above AutoRecursiveDoublingMaxBytes two ranks stay on the ring: both
// algorithms then send the whole buffer once, but recursive doubling also
// copies the input and reduces the whole buffer on each rank, where the
// ring reduces half of it in place and copies nothing. On a CPU-bound host that local work decides: measured
// with BenchmarkBusBW (2 in-process ranks over MetaRoCE), the ring needs
// 0.39-0.40 CPU ns/B at 1 MiB against recursive doubling's 0.51-0.52, and
// 0.57-0.60 against 0.77-0.81 at 16 and 64 MiB.
func ChooseAlgorithm(c Collective, nranks, groupSize int, bytes int64) Algorithm {
	switch c {
	case AllReduce:
		if bytes <= AutoRecursiveDoublingMaxBytes {
			return AlgoRecursiveDoubling
		}
		block := bytes / int64(max(nranks, 1))
		grouped := groupSize > 1 && groupSize < nranks && nranks%groupSize == 0
		if grouped && block >= AutoHierarchicalMinBlockBytes {
			return AlgoHierarchical
		}
		if nranks >= 4 && nranks&(nranks-1) == 0 && (grouped || block <= AutoHalvingMaxBlockBytes) {
			return AlgoHalvingDoubling
		}
		if grouped {
			return AlgoHierarchical
		}
		return AlgoRing
	case ReduceScatter, AllGather:
		return AlgoRing
	case AllToAll:
		return AlgoPairwise
	case Broadcast:
		return AlgoChain
	}
	return AlgoDirect
}

// Build returns the plan of cfg.Rank for the collective cfg describes.
func Build(cfg Config) (*Plan, error) {
	if err := cfg.check(); err != nil {
		return nil, err
	}
	n, esize := int64(cfg.NRanks), int64(cfg.DType.Size())
	p := &Plan{
		Collective: cfg.Collective, Rank: cfg.Rank, NRanks: cfg.NRanks, Root: cfg.Root, Peer: cfg.Peer,
		DType: cfg.DType, Op: cfg.Op, Count: cfg.Count, InPlace: cfg.InPlace, Channels: max(cfg.Channels, 1),
	}
	if !cfg.Collective.Reduces() {
		p.Op = 0
	}
	bytes := cfg.Count * esize
	p.SendBytes, p.RecvBytes = bytes, bytes
	switch cfg.Collective {
	case ReduceScatter:
		p.SendBytes = n * bytes
	case AllGather:
		p.RecvBytes = n * bytes
	case AllToAll:
		p.SendBytes, p.RecvBytes = n*bytes, n*bytes
	case Broadcast:
		if cfg.Rank != cfg.Root {
			p.SendBytes = 0
		}
	case P2P:
		if cfg.Rank != cfg.Root {
			p.SendBytes = 0
		}
		if cfg.Rank != cfg.Peer {
			p.RecvBytes = 0
		}
	}
	if cfg.InPlace {
		p.RecvBytes = max(p.SendBytes, p.RecvBytes)
		p.SendBytes = 0
	}
	chunkElems := cfg.chunkElems()
	p.Algorithm = cfg.Algorithm
	if p.Algorithm == AlgoAuto {
		p.Algorithm = ChooseAlgorithm(cfg.Collective, cfg.NRanks, cfg.GroupSize, bytes)
	}
	b := newBuilder(p)
	scaling := 0 // scaling steps added before the algorithm's
	if cfg.Collective.Reduces() && reduce.PreMultiplies(cfg.DType, cfg.Op) && cfg.NRanks > 1 {
		b.preMul = true
		// A floating-point average scales the input first. All-reduce
		// scales it into BufRecv and runs the in-place algorithm on that
		// copy, which needs no more memory; a reduce-scatter scales each
		// piece into scratch as it needs it (buildRingReduceScatter): out
		// of place its output is too small to hold the input, and in place
		// the blocks other than this rank's must keep the caller's data.
		if cfg.Collective == AllReduce {
			src := Range{Buf: BufRecv, Len: p.RecvBytes}
			if !cfg.InPlace {
				src.Buf = BufSend
				p.InPlace = true // for the algorithm; restored below
			}
			b.preMultiply(Range{Buf: BufRecv, Len: p.RecvBytes}, src, chunkElems)
			scaling = len(p.Steps)
		}
	}
	switch p.Algorithm {
	case AlgoRing:
		switch cfg.Collective {
		case AllReduce:
			buildRingAllReduce(b, chunkElems)
		case ReduceScatter:
			buildRingReduceScatter(b, chunkElems)
		case AllGather:
			buildRingAllGather(b, chunkElems)
		}
	case AlgoRecursiveDoubling:
		buildRecursiveDoubling(b)
	case AlgoHalvingDoubling:
		buildHalvingDoubling(b, chunkElems)
	case AlgoHierarchical:
		buildHierarchicalAllReduce(b, chunkElems, cfg.GroupSize)
	case AlgoPairwise:
		buildPairwiseAllToAll(b, chunkElems, cfg.AllToAllInFlight)
	case AlgoChain:
		buildChainBroadcast(b, chunkElems)
	case AlgoDirect:
		if cfg.Collective == SendRecv {
			buildSendRecv(b, chunkElems)
		} else {
			buildP2P(b, chunkElems)
		}
	}
	p.InPlace = cfg.InPlace
	orderPreMul(p, scaling)
	return p, nil
}

// chunkElems is ChunkBytes (DefaultChunkBytes when 0) in whole elements,
// at least one.
func (c *Config) chunkElems() int64 {
	chunk := c.ChunkBytes
	if chunk == 0 {
		chunk = DefaultChunkBytes
	}
	return max(chunk/int64(c.DType.Size()), 1)
}

// BuildAll returns the plans of every rank (cfg.Rank is ignored).
func BuildAll(cfg Config) ([]*Plan, error) {
	cfg.Rank = 0
	if err := cfg.check(); err != nil {
		return nil, err
	}
	plans := make([]*Plan, cfg.NRanks)
	for r := range cfg.NRanks {
		cfg.Rank = r
		p, err := Build(cfg)
		if err != nil {
			return nil, err
		}
		plans[r] = p
	}
	return plans, nil
}

// orderPreMul reorders the first n steps of p, the scaling steps Build adds
// before an algorithm, by their first use, the earliest-needed last. None
// depends on another, so any order is valid; this one lets an executor that
// runs the most recently readied step first (as the collectives' does, so
// that a send follows the step that readied it at once) scale the chunk of
// its first message first, instead of most of the input before any
// message leaves.
func orderPreMul(p *Plan, n int) {
	if n < 2 {
		return
	}
	first := make([]int, n) // index of the first step that depends on each
	for i := range first {
		first[i] = len(p.Steps)
	}
	for i := n; i < len(p.Steps); i++ {
		for _, d := range p.Steps[i].Deps {
			if d < n && first[d] == len(p.Steps) {
				first[d] = i
			}
		}
	}
	order := make([]int, n) // order[new] = old
	for i := range order {
		order[i] = i
	}
	sort.SliceStable(order, func(a, b int) bool { return first[order[a]] > first[order[b]] })
	moved := make([]int, n) // moved[old] = new
	steps := make([]Step, n)
	for nw, old := range order {
		moved[old] = nw
		steps[nw] = p.Steps[old]
	}
	copy(p.Steps, steps)
	for i := n; i < len(p.Steps); i++ {
		deps := p.Steps[i].Deps
		changed := false
		for j, d := range deps {
			if d < n {
				deps[j], changed = moved[d], true
			}
		}
		if changed {
			slices.Sort(deps)
		}
	}
}
