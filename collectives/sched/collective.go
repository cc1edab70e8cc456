package sched

import (
	"fmt"
	"strings"

	"github.com/metaroce/metaroce/collectives/reduce"
)

// Collective is the operation a plan implements.
type Collective uint8

const (
	AllReduce Collective = iota
	ReduceScatter
	AllGather
	AllToAll
	Broadcast
	// SendRecv is nccl-tests' sendrecv: every rank sends its buffer to rank+1 and
	// receives from rank-1 (modulo NRanks).
	SendRecv
	// P2P is one transfer from Config.Root to Config.Peer; other ranks idle.
	P2P
	numCollectives
)

var collectiveNames = [numCollectives]string{"allreduce", "reducescatter", "allgather", "alltoall", "broadcast", "sendrecv", "p2p"}

func (c Collective) String() string {
	if c >= numCollectives {
		return fmt.Sprintf("collective(%d)", uint8(c))
	}
	return collectiveNames[c]
}

// AllCollectives lists every collective in order.
func AllCollectives() []Collective {
	out := make([]Collective, numCollectives)
	for i := range out {
		out[i] = Collective(i)
	}
	return out
}

// ParseCollective parses a collective name as nccl-tests spells its binaries
// (all_reduce, allreduce, all-reduce, ...), ignoring case.
func ParseCollective(s string) (Collective, error) {
	k := strings.NewReplacer("_", "", "-", "").Replace(strings.ToLower(strings.TrimSpace(s)))
	for i, n := range collectiveNames {
		if n == k {
			return Collective(i), nil
		}
	}
	return 0, fmt.Errorf("sched: unknown collective %q (want one of %s)", s, strings.Join(collectiveNames[:], " "))
}

// Reduces reports whether the collective combines data with an Op.
func (c Collective) Reduces() bool { return c == AllReduce || c == ReduceScatter }

// BusBWFactor returns the nccl-tests bus-bandwidth factor for c over n ranks:
// busbw = algbw × factor, where algbw = bytes / time and bytes is the size of
// the per-rank buffer nccl-tests reports (the larger of send and recv). The
// factor makes figures comparable to link speed: a ring all-reduce moves
// 2(n-1)/n of the buffer over each link.
func BusBWFactor(c Collective, n int) float64 {
	if n < 1 {
		return 0
	}
	fn := float64(n)
	switch c {
	case AllReduce:
		return 2 * (fn - 1) / fn
	case ReduceScatter, AllGather, AllToAll:
		return (fn - 1) / fn
	}
	return 1
}

// Algorithm selects how a collective is scheduled.
type Algorithm uint8

const (
	// AlgoAuto picks per collective and size (see Build).
	AlgoAuto Algorithm = iota
	// AlgoRing: reduce-scatter then all-gather around the ring, chunked and
	// pipelined over the channels (all-reduce, reduce-scatter, all-gather).
	AlgoRing
	// AlgoRecursiveDoubling: log2(n) exchange rounds of the whole vector, with a
	// fold-in/fold-out step for ranks beyond the largest power of two
	// (all-reduce only).
	AlgoRecursiveDoubling
	// AlgoPairwise: the shifted pairwise exchange of all-to-all.
	AlgoPairwise
	// AlgoChain: a chunked pipeline along the ring starting at the root (broadcast).
	AlgoChain
	// AlgoDirect: one direct message per pair (sendrecv, p2p).
	AlgoDirect
	// AlgoHalvingDoubling: Rabenseifner's reduce-scatter by recursive
	// halving and all-gather by recursive doubling, 2·log2(n) chunked
	// rounds, with the same fold as AlgoRecursiveDoubling beyond the largest
	// power of two (all-reduce only).
	AlgoHalvingDoubling
	// AlgoHierarchical: a ring reduce-scatter inside each group of
	// Config.GroupSize consecutive ranks, a ring all-reduce of each block
	// across the groups, and a ring all-gather inside each group
	// (all-reduce only).
	AlgoHierarchical
	numAlgorithms
)

var algorithmNames = [numAlgorithms]string{"auto", "ring", "recdoubling", "pairwise", "chain", "direct", "halving", "hierarchical"}

func (a Algorithm) String() string {
	if a >= numAlgorithms {
		return fmt.Sprintf("algorithm(%d)", uint8(a))
	}
	return algorithmNames[a]
}

// ParseAlgorithm parses an algorithm name ("rd" and "recursive-doubling" are
// accepted for recdoubling).
func ParseAlgorithm(s string) (Algorithm, error) {
	k := strings.NewReplacer("_", "", "-", "").Replace(strings.ToLower(strings.TrimSpace(s)))
	if k == "rd" || k == "recursivedoubling" {
		return AlgoRecursiveDoubling, nil
	}
	for i, n := range algorithmNames {
		if n == k {
			return Algorithm(i), nil
		}
	}
	return 0, fmt.Errorf("sched: unknown algorithm %q (want one of %s)", s, strings.Join(algorithmNames[:], " "))
}

// DefaultChunkBytes is the pipelining unit when Config.ChunkBytes is 0: large
// enough that per-message overheads stay small, small enough that a ring of 8
// ranks has several chunks in flight for a 4 MiB buffer.
const DefaultChunkBytes = 128 << 10

// AutoRecursiveDoublingMaxBytes is the largest all-reduce buffer for which
// AlgoAuto picks recursive doubling over the ring. Recursive doubling costs
// ⌈log2 n⌉ message latencies but moves the whole buffer each round; the ring
// moves only 2(n-1)/n of it in total but pays 2(n-1) latencies. With the
// 20-40 µs software round trips of the UDP transport and ~1-10 GB/s per link,
// the latency term dominates below a few tens of KiB; 64 KiB keeps the
// doubling cost (log2 n × 64 KiB ≈ 6-60 µs per round) near one latency.
const AutoRecursiveDoublingMaxBytes = 64 << 10

// MinAllToAllInFlight and AllToAllInFlightBytes set AutoAllToAllInFlight:
// at least 4 messages in flight per direction, and as many more as fit in
// 4 MiB. Measured on the simulated 64-host fabric over MetaRoCE (`go test
// ./fabric/sim/scenarios -run TestAllToAllInFlight -v`), the 1 MiB
// all-to-all (16 KiB messages) took 210 µs with 4 in flight, 117 with 8,
// 68 with 16 and 38 with every round in flight; the 16 MiB one (256 KiB
// messages) 600, 473, 412 and 383 µs. On this 2-vCPU host 8 in-process
// ranks took 1.9-2.0 ms per 1 MiB all-to-all with all 7 rounds in flight
// against 2.4 with 4, and the same at 16 MiB. The 4 MiB bound keeps the
// 4-rank plans as they were (from 16 MiB their 512 KiB messages stay in
// lockstep, which needs less CPU there) and the receives a rank posts at
// once bounded.
//
// Why overlap at all: in lockstep every round of a small all-to-all (one
// message per peer) costs each rank a full exchange latency and completion
// wake-ups of its own; with the rounds overlapping, transfers complete in
// batches and the datapath's turns carry several messages. Measured with 4
// in-process ranks on a 2-vCPU host, a 1 MiB all-to-all (one 256 KiB
// message per peer, every round in flight) needs 15-30% less CPU per byte
// than in lockstep, while at 16 MiB (eight messages per peer) overlapping
// rounds cost about 8% more, which is why rounds of many messages stay in
// lockstep.
const (
	MinAllToAllInFlight   = 4
	AllToAllInFlightBytes = 4 << 20
)

// AutoAllToAllInFlight returns the messages in flight per direction for the
// all-to-all cfg describes (its AllToAllInFlight is ignored): as many
// messages as fit in AllToAllInFlightBytes, at least MinAllToAllInFlight,
// and beyond that no more than every round's messages together.
func AutoAllToAllInFlight(cfg Config) int {
	if cfg.Count <= 0 || !cfg.DType.Valid() {
		return MinAllToAllInFlight
	}
	// The lanes pieces() cuts a peer's block into, and the longest one.
	chunk, channels := cfg.chunkElems(), int64(max(cfg.Channels, 1))
	share := (cfg.Count + channels - 1) / channels
	msg := min(share, chunk) * int64(cfg.DType.Size())
	var lanes int64
	q, r := cfg.Count/channels, cfg.Count%channels // splitEven's shares
	for c := range channels {
		l := q
		if c < r {
			l++
		}
		lanes += (l + chunk - 1) / chunk
	}
	all := int64(max(cfg.NRanks-1, 1)) * lanes
	return max(MinAllToAllInFlight, int(min(AllToAllInFlightBytes/msg, all)))
}

// AutoHalvingMaxBlockBytes is the largest block (buffer / ranks) for which
// AlgoAuto picks recursive halving and doubling over the ring for an
// all-reduce on a power of two of ranks. Both move 2(n-1)/n of the buffer
// per rank; halving needs 2·log2(n) message latencies instead of 2(n-1), but
// its first rounds carry half the buffer to a distant partner (across the
// spines of a Clos fabric), where the ring's neighbours pipeline small
// chunks. Measured where the two cross over: on the simulated 64-host fabric
// (`go test ./fabric/sim/scenarios -run TestAllReduceAlgorithms -v`) halving
// is ahead up to 4 MiB (64 KiB blocks: 366.1 against 474.9 µs) and behind
// from 8 MiB (686.0 against 646.1); on this
// 2-CPU host (`mrbench -np 4` and `-np 8`, in-process ranks over MetaRoCE)
// ahead at 32-64 KiB blocks, even at 128 KiB and behind from 256 KiB.
const AutoHalvingMaxBlockBytes = 64 << 10

// AutoHierarchicalMinBlockBytes is the smallest block (buffer / ranks) for
// which AlgoAuto picks the hierarchical ring all-reduce over a known
// grouping (Config.GroupSize). Measured on the simulated 64-host fabric
// (8 leaves of 8; `go test ./fabric/sim/scenarios -run
// TestAllReduceAlgorithms -v`), over MetaRoCE, halving against the
// hierarchical ring: 72.8 against 105.2 µs at 256 KiB (4 KiB blocks),
// 95.2/115.5 at 512 KiB, 139.6/137.4 at 1 MiB (16 KiB blocks),
// 366.1/281.7 at 4 MiB and 1,176.3/819.7 at 16 MiB, where the flat ring
// takes 988.2.
const AutoHierarchicalMinBlockBytes = 16 << 10

// Config describes one collective call on one rank (Build) or on all (BuildAll).
type Config struct {
	Collective Collective
	Algorithm  Algorithm
	NRanks     int
	Rank       int
	// Count is in elements, with NCCL's meaning per collective: the buffer size
	// for allreduce, broadcast, sendrecv and p2p; the per-rank output for
	// reducescatter (input n×Count); the per-rank input for allgather (output
	// n×Count); the elements per peer for alltoall (both buffers n×Count).
	Count int64
	DType reduce.DType
	Op    reduce.Op // reducing collectives only
	Root  int       // broadcast, p2p: the source rank
	Peer  int       // p2p: the destination rank
	// Channels is the number of parallel channels (≥ 1; 0 means 1). Each
	// message travels on one channel; chunks are spread over all of them.
	Channels int
	// ChunkBytes bounds the bytes of one pipelined message (0 means
	// DefaultChunkBytes); rounded down to whole elements, at least one.
	ChunkBytes int64
	// AllToAllInFlight is how many messages per direction a rank of the
	// pairwise all-to-all may have in flight across rounds: rounds overlap
	// while each has fewer piece lanes (channel × chunk) than this, up to
	// AllToAllInFlight / lanes rounds at once. 0 or 1 keeps the rounds in
	// lockstep, so that no receiver ever takes two senders at once.
	// AutoAllToAllInFlight gives the value the collectives use by default.
	AllToAllInFlight int
	// GroupSize is the number of consecutive ranks that share a leaf switch
	// (or a host), for AlgoHierarchical: rank r is in group r/GroupSize.
	// 0 means the grouping is unknown; otherwise it must divide NRanks.
	GroupSize int
	// InPlace makes the collective use BufRecv alone, with NCCL's in-place
	// layouts: allreduce, broadcast, sendrecv, p2p, alltoall read their input
	// from BufRecv; reducescatter reads n×Count elements from BufRecv and leaves
	// its result at element Rank×Count (the other blocks keep the caller's
	// data); allgather
	// finds its input at element Rank×Count of BufRecv.
	InPlace bool
}
