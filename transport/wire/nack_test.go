package wire_test

import (
	"testing"

	"github.com/metaroce/metaroce/transport/wire"
)

// TestNackDelivered checks how a NACK FLOW_ABORTED names the receive groups
// the aborting side delivered (docs/spec.md §2.7): with AbortDelivered set,
// every group before msg (in serial arithmetic, across the 2^32 wrap) and
// group msg+1+i for each set bit i < AbortLandedBits; group msg itself never.
// Without the flag (an older peer's msg and value 0) and for any other
// reason, no group is delivered, so that such a peer keeps today's
// behaviour: every unacknowledged send fails.
func TestNackDelivered(t *testing.T) {
	const done = 43
	n := wire.Nack{Reason: wire.NackFlowAborted, Flow: 7, Msg: done,
		Value: wire.AbortDelivered | 1<<1 | 1<<(wire.AbortLandedBits-1)}
	for _, tc := range []struct {
		msg  uint32
		want bool
	}{
		{0, true},
		{done - 1, true},
		{done, false},     // the first incomplete group
		{done + 1, false}, // bit 0 clear
		{done + 2, true},  // bit 1
		{done + 3, false},
		{done + wire.AbortLandedBits, true}, // bit 62, the last one
		{done + wire.AbortLandedBits + 1, false},
		{done + 1<<30, false}, // serial arithmetic: ahead, not behind
	} {
		if got := n.Delivered(tc.msg); got != tc.want {
			t.Errorf("Msg %d, value %#x: Delivered(%d) = %v, want %v", n.Msg, n.Value, tc.msg, got, tc.want)
		}
	}

	wrap := wire.Nack{Reason: wire.NackFlowAborted, Msg: 2, Value: wire.AbortDelivered}
	for _, m := range []uint32{0xfffffff0, 0xffffffff, 0, 1} {
		if !wrap.Delivered(m) {
			t.Errorf("Msg 2: group %#x, before it across the wrap, not delivered", m)
		}
	}

	old := wire.Nack{Reason: wire.NackFlowAborted, Flow: 7} // an older peer: msg and value 0
	other := n
	other.Reason = wire.NackBadOffset
	for _, m := range []uint32{0, 1, 1 << 31, 0xffffffff} {
		if old.Delivered(m) {
			t.Errorf("NACK without AbortDelivered: Delivered(%#x) = true", m)
		}
		if other.Delivered(m) {
			t.Errorf("NACK BAD_OFFSET: Delivered(%#x) = true", m)
		}
	}
}
