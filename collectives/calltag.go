package collectives

import (
	"encoding/binary"
	"fmt"
	"hash/fnv"

	"github.com/metaroce/metaroce/collectives/sched"
)

// callTag is the tag every message of a call carries: a 32-bit hash of what
// the ranks must agree on for their calls to pair, the same on every rank
// of a matching call. That is the collective, the count, the data type,
// and the reduction, root and peer where the collective has them; and the
// call's schedule (callSchedule): the algorithm its plan runs, its
// channels and chunk size, and its group size where the algorithm uses
// one. A message whose tag is not the receiver's belongs to another call:
// MetaRoCE fails both transfers with transport.ErrTagMismatch (docs/spec.md
// §3.4), and the TCP link's reader ends its stream with ErrMismatch.
// Without it, ranks that disagreed on the reduction, or on a broadcast's
// root (over TCP, where a send completes without a matching receive, the
// strays then landing in the next call), returned success with wrong data;
// and ranks that passed Run different per-call schedules (sched.Config's
// Algorithm, Channels, ChunkBytes, GroupSize) failed only where a message's
// length happened to differ, with an error about the count and type, and
// otherwise waited out the call's timeout or returned success by chance.
// Whether a call is in place is left out: ranks may differ on it, as under
// NCCL. A hash can collide, so a disagreement goes unseen once in 2^32.
// Tags are compared only where a message meets a receive: ranks whose
// plans never send on a stream the other posts a receive on (a ring
// against recursive halving on four ranks, where each waits for a partner
// that sends elsewhere) still wait for the call's timeout.
//
// cfg is the call as Run completes it (Channels, ChunkBytes and GroupSize
// filled in from the communicator where zero), with Algorithm the one its
// plan runs (sched.Plan.Algorithm: never AlgoAuto, which resolves by the
// count and the group size, so that a rank that names the algorithm AlgoAuto
// picks pairs with one that leaves it to AlgoAuto).
func callTag(cfg sched.Config) uint32 {
	var b [48]byte
	b[0] = byte(cfg.Collective)
	b[1] = byte(cfg.DType)
	binary.LittleEndian.PutUint64(b[2:], uint64(cfg.Count))
	if cfg.Collective.Reduces() {
		b[10] = byte(cfg.Op) + 1
	}
	switch cfg.Collective {
	case sched.Broadcast:
		binary.LittleEndian.PutUint64(b[11:], uint64(cfg.Root))
	case sched.P2P:
		binary.LittleEndian.PutUint64(b[11:], uint64(cfg.Root))
		binary.LittleEndian.PutUint64(b[19:], uint64(cfg.Peer))
	}
	s := scheduleOf(cfg)
	b[27] = byte(s.alg)
	binary.LittleEndian.PutUint32(b[28:], uint32(s.channels))
	binary.LittleEndian.PutUint64(b[32:], uint64(s.chunkElems))
	binary.LittleEndian.PutUint64(b[40:], uint64(s.groupSize))
	h := fnv.New32a()
	h.Write(b[:])
	return h.Sum32()
}

// callSchedule is the part of a call's tag that decides which messages
// its plan sends, beyond the call's arguments: every rank's must be the
// same. AllToAllInFlight is not part of it: it only paces how many rounds
// of an all-to-all a rank has posted at once, and ranks that differ on it
// post the same messages, in the same order on every stream, and pair.
type callSchedule struct {
	alg      sched.Algorithm
	channels int
	// chunkElems is ChunkBytes in whole elements, at least one, as
	// sched.Build cuts messages by it: chunk sizes that round to the same
	// elements make the same plan.
	chunkElems int64
	// groupSize is Config.GroupSize where the algorithm is
	// AlgoHierarchical, the one that uses it, and 0 otherwise (AlgoAuto's
	// use of it shows in alg).
	groupSize int
	// esize is the size of an element in bytes, for String.
	esize int
}

// scheduleOf returns the schedule of cfg, a call as callTag takes it.
func scheduleOf(cfg sched.Config) callSchedule {
	s := callSchedule{alg: cfg.Algorithm, channels: max(cfg.Channels, 1), esize: max(cfg.DType.Size(), 1)}
	chunk := cfg.ChunkBytes
	if chunk == 0 {
		chunk = sched.DefaultChunkBytes
	}
	s.chunkElems = max(chunk/int64(s.esize), 1)
	if s.alg == sched.AlgoHierarchical {
		s.groupSize = cfg.GroupSize
	}
	return s
}

// String is the schedule in words, for errors: "algorithm ring, 2
// channels, 131072-byte chunks".
func (s callSchedule) String() string {
	chans := "channels"
	if s.channels == 1 {
		chans = "channel"
	}
	t := fmt.Sprintf("algorithm %v, %d %s, %d-byte chunks", s.alg, s.channels, chans, s.chunkElems*int64(s.esize))
	if s.groupSize > 0 {
		t += fmt.Sprintf(", groups of %d ranks", s.groupSize)
	}
	return t
}
