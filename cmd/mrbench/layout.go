package main

import "github.com/metaroce/metaroce/collectives/sched"

// layout is the shape of one collective call for a sweep size: Count is the
// count argument with NCCL's meaning for the collective (see sched.Config),
// SendBytes and RecvBytes the per-rank buffer sizes, and Bytes the size
// nccl-tests reports (the larger of the two).
type layout struct {
	Count     int64
	SendBytes int64
	RecvBytes int64
}

// Bytes is the reported size: max(SendBytes, RecvBytes).
func (l layout) Bytes() int64 { return max(l.SendBytes, l.RecvBytes) }

// layoutFor maps a sweep size to a call, the way nccl-tests does: size is the
// whole buffer for all-reduce, broadcast and sendrecv, and the larger side of
// the call for the others, rounded down to whole elements per rank. A zero
// Count means the size is too small for this collective over n ranks.
func layoutFor(c sched.Collective, size int64, es, n int) layout {
	e, nn := int64(es), int64(n)
	switch c {
	case sched.ReduceScatter:
		cnt := size / e / nn
		return layout{Count: cnt, SendBytes: nn * cnt * e, RecvBytes: cnt * e}
	case sched.AllGather:
		cnt := size / e / nn
		return layout{Count: cnt, SendBytes: cnt * e, RecvBytes: nn * cnt * e}
	case sched.AllToAll:
		cnt := size / e / nn
		return layout{Count: cnt, SendBytes: nn * cnt * e, RecvBytes: nn * cnt * e}
	default:
		cnt := size / e
		return layout{Count: cnt, SendBytes: cnt * e, RecvBytes: cnt * e}
	}
}

// inPlaceViews returns the send and receive slices of an in-place call inside
// buf (at least l.Bytes() long), with NCCL's in-place layouts: reduce-scatter
// writes its block rank of the input, all-gather reads block rank of the
// output, and the others use one buffer for both.
func inPlaceViews(c sched.Collective, l layout, buf []byte, rank int) (send, recv []byte) {
	switch c {
	case sched.ReduceScatter:
		send = buf[:l.SendBytes]
		return send, send[int64(rank)*l.RecvBytes : int64(rank+1)*l.RecvBytes]
	case sched.AllGather:
		recv = buf[:l.RecvBytes]
		return recv[int64(rank)*l.SendBytes : int64(rank+1)*l.SendBytes], recv
	}
	b := buf[:l.Bytes()]
	return b, b
}
