package wire

import "encoding/binary"

// HeaderLen is the size of the common header in bytes (docs/spec.md §2.1).
const HeaderLen = 24

// Flags are the common-header flag bits (docs/spec.md §2.1).
type Flags uint16

const (
	// FlagAckReq asks the receiver to acknowledge this path at once instead
	// of waiting for its ACK coalescing threshold. Set on the last packet of a
	// burst, on probes and on retransmissions.
	FlagAckReq Flags = 1 << 0
	// FlagRetransmit marks a packet whose content was sent before under
	// another PSN. Informational: receivers must not rely on it.
	FlagRetransmit Flags = 1 << 1
	// FlagAuth says an AuthTagLen-byte authentication tag trails the packet
	// (reserved in version 1, docs/spec.md §5.2).
	FlagAuth Flags = 1 << 2
	// FlagReply marks a CLOSE that answers a CLOSE.
	FlagReply Flags = 1 << 3
	// FlagPiggyAck says a piggybacked acknowledgement (PiggyLen bytes:
	// rate hint and one ACK record) follows the fixed part of this
	// sequenced packet (docs/spec.md §2.11). Only DATA, RECV_READY,
	// sequenced NACK and PROBE may carry it; their parsers refuse it
	// elsewhere.
	FlagPiggyAck Flags = 1 << 4
	// FlagIdle marks an ACK that answers a RECV_READY into whose receive
	// nothing of the ACK's sender went, with nothing of the sender's
	// waiting to be sent on that flow: the peer that posted the receive
	// need not count the ACK's sender among those about to send to it
	// (docs/spec.md §3.5). Senders set it on no other packet.
	FlagIdle Flags = 1 << 5

	flagsKnown = FlagAckReq | FlagRetransmit | FlagAuth | FlagReply | FlagPiggyAck | FlagIdle
)

// AuthTagLen is the length of the reserved per-packet authentication tag.
const AuthTagLen = 16

// Header is the common header that starts every MetaRoCE packet
// (docs/spec.md §2.1).
//
//	offset size field
//	0      1    version (= 1)
//	1      1    opcode
//	2      2    flags
//	4      4    destination connection id (chosen by the receiver)
//	8      8    connection token (the receiver's secret, echoed by the sender)
//	16     2    path id (the sender's path)
//	18     2    reserved (0)
//	20     4    path sequence number (0 for unsequenced opcodes)
type Header struct {
	Op      Opcode
	Flags   Flags
	DstConn uint32
	Token   uint64
	Path    uint16
	PSN     PSN
}

// ParseHeader parses the common header of b into h and returns the number of
// bytes consumed (HeaderLen). It validates version, opcode and flags, so a
// body parser may trust h.
func ParseHeader(h *Header, b []byte) (int, error) {
	if len(b) < HeaderLen {
		return 0, perr(OpInvalid, "length", uint64(len(b)), ErrShort)
	}
	if b[0] != Version {
		return 0, perr(OpInvalid, "version", uint64(b[0]), ErrVersion)
	}
	op := Opcode(b[1])
	if !op.Known() {
		return 0, perr(op, "opcode", uint64(b[1]), ErrOpcode)
	}
	fl := Flags(binary.BigEndian.Uint16(b[2:]))
	if fl&^flagsKnown != 0 {
		return 0, perr(op, "flags", uint64(fl), ErrReserved)
	}
	if r := binary.BigEndian.Uint16(b[18:]); r != 0 {
		return 0, perr(op, "reserved", uint64(r), ErrReserved)
	}
	h.Op = op
	h.Flags = fl
	h.DstConn = binary.BigEndian.Uint32(b[4:])
	h.Token = binary.BigEndian.Uint64(b[8:])
	h.Path = binary.BigEndian.Uint16(b[16:])
	h.PSN = PSN(binary.BigEndian.Uint32(b[20:]))
	return HeaderLen, nil
}

// Append appends the encoded header to b.
func (h *Header) Append(b []byte) []byte {
	b = append(b, Version, byte(h.Op))
	b = binary.BigEndian.AppendUint16(b, uint16(h.Flags))
	b = binary.BigEndian.AppendUint32(b, h.DstConn)
	b = binary.BigEndian.AppendUint64(b, h.Token)
	b = binary.BigEndian.AppendUint16(b, h.Path)
	b = binary.BigEndian.AppendUint16(b, 0)
	return binary.BigEndian.AppendUint32(b, uint32(h.PSN))
}

// PeekOpcode returns the opcode of a datagram without validating anything
// else, or OpInvalid when b is too short.
func PeekOpcode(b []byte) Opcode {
	if len(b) < 2 {
		return OpInvalid
	}
	return Opcode(b[1])
}

// PeekDstConn returns the destination connection id of a datagram without
// validating anything else, or 0 (no connection) when b is too short.
func PeekDstConn(b []byte) uint32 {
	if len(b) < 8 {
		return 0
	}
	return binary.BigEndian.Uint32(b[4:])
}

// expect checks that b holds a header of opcode op and parses it.
func expect(h *Header, op Opcode, b []byte) error {
	if _, err := ParseHeader(h, b); err != nil {
		return err
	}
	if h.Op != op {
		return perr(op, "opcode", uint64(h.Op), ErrOpcode)
	}
	return nil
}
