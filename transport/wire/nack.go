package wire

import (
	"encoding/binary"
	"fmt"
)

// NackLen is the size of a NACK packet (docs/spec.md §2.7).
const NackLen = HeaderLen + 20

// NackReason says why a NACK was sent.
type NackReason uint8

const (
	// NackNotReady: DATA arrived for a message whose receive is not posted
	// (a sender that ran ahead of RECV_READY). Value: the DATA's offset.
	NackNotReady NackReason = 1
	// NackTooLarge: the message is longer than the posted capacity. Sent by
	// the sender when it matches a RECV_READY entry whose capacity is smaller
	// than its message, so both sides fail that message. Value: message length.
	NackTooLarge NackReason = 2
	// NackUnknownConn: a packet named a connection id this endpoint does not
	// have. Unsequenced; DstConn is 0, Token echoes the offending packet's
	// token and Value holds the unknown connection id.
	NackUnknownConn NackReason = 3
	// NackBadOffset: DATA would have landed outside the posted buffer.
	// Value: the offending offset.
	NackBadOffset NackReason = 4
	// NackTagMismatch: the sender's tag matches no entry of the oldest
	// receive group. Value: the tag.
	NackTagMismatch NackReason = 5
	// NackFlowAborted: the sender of the NACK aborted the flow; the
	// receiver fails its side of the flow and releases it. Index is 0.
	// With AbortDelivered set in Value, Msg and Value say which receive
	// groups of the flow the aborting side delivered (Nack.Delivered);
	// without it (an older peer sends Msg and Value 0) they say nothing,
	// and Msg is 0.
	NackFlowAborted NackReason = 6
)

// AbortDelivered, set in the value of a NACK FLOW_ABORTED, says that the
// NACK carries which of the aborting side's receive groups of the flow were
// delivered (docs/spec.md §2.7, §3.4): every group before msg (the count of
// groups it completed in order) and group msg+1+i for each bit i, 0 ≤ i <
// AbortLandedBits, set in the value (groups that had landed whole behind
// group msg, which had not). The peer completes its sends matched to those
// groups instead of failing them. The flag is needed because an older peer
// sends msg and value 0, which would otherwise read as "groups before 0".
const AbortDelivered uint64 = 1 << 63

// AbortLandedBits is how many groups beyond msg a NACK FLOW_ABORTED's
// value can name as landed: its bits 0 to 62.
const AbortLandedBits = 63

// Delivered reports whether n, a NACK FLOW_ABORTED, says that the aborting
// side delivered receive group msg of the flow (AbortDelivered). It is
// false for any other NACK and for one without the flag. Group numbers
// compare in serial arithmetic, as everywhere else.
func (n *Nack) Delivered(msg uint32) bool {
	if n.Reason != NackFlowAborted || n.Value&AbortDelivered == 0 {
		return false
	}
	k := int32(msg - n.Msg)
	if k < 0 {
		return true
	}
	return k >= 1 && k <= AbortLandedBits && n.Value&(1<<(k-1)) != 0
}

func (r NackReason) String() string {
	switch r {
	case NackNotReady:
		return "receiver not ready"
	case NackTooLarge:
		return "message too large"
	case NackUnknownConn:
		return "unknown connection"
	case NackBadOffset:
		return "offset outside posted buffer"
	case NackTagMismatch:
		return "tag matches no posted buffer"
	case NackFlowAborted:
		return "flow aborted"
	}
	return fmt.Sprintf("nack reason %d", uint8(r))
}

// Nack is a negative acknowledgement (docs/spec.md §2.7). Except for
// NackUnknownConn it is sequenced and reliable.
//
//	offset size field
//	24     1    reason
//	25     1    entry index
//	26     2    reserved (0)
//	28     4    flow id
//	32     4    message sequence number
//	36     8    value (meaning depends on the reason)
//	44     56   piggybacked acknowledgement, only with FlagPiggyAck and a
//	            reason other than NackUnknownConn (§2.11)
type Nack struct {
	Header
	Piggyback
	Reason NackReason
	Index  uint8
	Flow   uint32
	Msg    uint32
	Value  uint64
}

// ParseNack parses a NACK packet.
func ParseNack(n *Nack, b []byte) (int, error) {
	if err := expect(&n.Header, OpNack, b); err != nil {
		return 0, err
	}
	want := NackLen
	if n.Flags&FlagPiggyAck != 0 {
		want += PiggyLen
	}
	if len(b) < want {
		return 0, perr(OpNack, "length", uint64(len(b)), ErrShort)
	}
	if len(b) > want {
		return 0, perr(OpNack, "length", uint64(len(b)), ErrLength)
	}
	n.Reason = NackReason(b[24])
	if n.Reason < NackNotReady || n.Reason > NackFlowAborted {
		return 0, perr(OpNack, "reason", uint64(b[24]), ErrRange)
	}
	n.Index = b[25]
	if n.Index >= MaxRecvEntries {
		return 0, perr(OpNack, "index", uint64(n.Index), ErrRange)
	}
	if b[26]|b[27] != 0 {
		return 0, perr(OpNack, "reserved", 0, ErrReserved)
	}
	n.Flow = binary.BigEndian.Uint32(b[28:])
	n.Msg = binary.BigEndian.Uint32(b[32:])
	n.Value = binary.BigEndian.Uint64(b[36:])
	if n.Reason == NackUnknownConn {
		// Unsequenced: it acknowledges nothing and carries nothing.
		if err := noPiggy(&n.Header); err != nil {
			return 0, err
		}
	}
	if _, err := n.parsePiggy(&n.Header, b, NackLen); err != nil {
		return 0, err
	}
	return want, nil
}

// Append appends the packet.
func (n *Nack) Append(b []byte) []byte {
	n.Op = OpNack
	n.Flags = n.piggyFlags(n.Flags)
	b = n.Header.Append(b)
	b = append(b, byte(n.Reason), n.Index, 0, 0)
	b = binary.BigEndian.AppendUint32(b, n.Flow)
	b = binary.BigEndian.AppendUint32(b, n.Msg)
	b = binary.BigEndian.AppendUint64(b, n.Value)
	return n.appendPiggy(b)
}

// Length is the encoded size of n.
func (n *Nack) Length() int { return NackLen + n.piggyLen() }
