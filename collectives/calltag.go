package collectives

import (
	"encoding/binary"
	"hash/fnv"

	"github.com/metaroce/metaroce/collectives/sched"
)

// callTag is the tag every message of a call carries: a 32-bit hash of what
// the ranks must agree on for their calls to pair (the collective, the
// count, the data type, and the reduction, root and peer where the
// collective has them), the same on every rank of a matching call. A
// message whose tag is not the receiver's belongs to another call: MetaRoCE
// fails both transfers with transport.ErrTagMismatch (docs/spec.md §3.4),
// and the TCP link's reader ends its stream with ErrMismatch. Without it,
// ranks that disagreed on the reduction, or on a broadcast's root (over
// TCP, where a send completes without a matching receive, the strays then
// landing in the next call), returned success with wrong data. Whether a
// call is in place is left out: ranks may differ on it, as under NCCL. A
// hash can collide, so a disagreement goes unseen once in 2^32.
func callTag(cfg sched.Config) uint32 {
	var b [32]byte
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
	h := fnv.New32a()
	h.Write(b[:])
	return h.Sum32()
}
