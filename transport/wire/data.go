package wire

import "encoding/binary"

// DataHeaderLen is the size of a DATA packet before its payload
// (docs/spec.md §2.4).
const DataHeaderLen = HeaderLen + 32

// MaxMessageLen is the largest message a DATA packet can describe: 2^48
// bytes, far above any buffer a collective posts, small enough that
// offset+length arithmetic never overflows.
const MaxMessageLen = 1 << 48

// Data is a two-sided Send packet (docs/spec.md §2.4). It carries everything
// the receiver needs to place Payload into the posted buffer on its own, in
// any order relative to other packets of the message: the flow, the message
// (receive-group sequence Msg and entry Index), the byte Offset and the total
// MsgLen.
//
//	offset size field
//	24     4    flow id
//	28     4    message sequence number on the flow (receive group)
//	32     1    entry index inside the receive group (0..MaxRecvEntries-1)
//	33     3    reserved (0)
//	36     4    sender timestamp, nanoseconds modulo 2^32 (echoed in ACK)
//	40     8    byte offset of Payload in the message
//	48     8    message length in bytes
//	56     56   piggybacked acknowledgement, only with FlagPiggyAck (§2.11)
//	56|112 …    payload (the rest of the datagram)
type Data struct {
	Header
	Piggyback
	Flow      uint32
	Msg       uint32
	Index     uint8
	Timestamp uint32
	Offset    uint64
	MsgLen    uint64
	// Payload is a view into the parsed datagram (not copied).
	Payload []byte
}

// ParseData parses a DATA packet. It checks that the payload lies inside the
// message (Offset+len(Payload) ≤ MsgLen ≤ MaxMessageLen) and that Index is in
// range, so a placement engine only has to check the posted capacity.
func ParseData(d *Data, b []byte) (int, error) {
	if err := expect(&d.Header, OpData, b); err != nil {
		return 0, err
	}
	if len(b) < DataHeaderLen {
		return 0, perr(OpData, "length", uint64(len(b)), ErrShort)
	}
	d.Flow = binary.BigEndian.Uint32(b[24:])
	d.Msg = binary.BigEndian.Uint32(b[28:])
	d.Index = b[32]
	if b[33]|b[34]|b[35] != 0 {
		return 0, perr(OpData, "reserved", 0, ErrReserved)
	}
	if d.Index >= MaxRecvEntries {
		return 0, perr(OpData, "index", uint64(d.Index), ErrRange)
	}
	d.Timestamp = binary.BigEndian.Uint32(b[36:])
	d.Offset = binary.BigEndian.Uint64(b[40:])
	d.MsgLen = binary.BigEndian.Uint64(b[48:])
	if d.MsgLen > MaxMessageLen {
		return 0, perr(OpData, "msglen", d.MsgLen, ErrRange)
	}
	off, err := d.parsePiggy(&d.Header, b, DataHeaderLen)
	if err != nil {
		return 0, err
	}
	n := uint64(len(b) - off)
	if d.Offset > d.MsgLen || n > d.MsgLen-d.Offset {
		return 0, perr(OpData, "offset", d.Offset, ErrLength)
	}
	d.Payload = b[off:]
	return len(b), nil
}

// AppendHeader appends everything but the payload, the piggybacked
// acknowledgement included; the driver appends the payload bytes itself
// (docs/spec.md §2.4: the core never touches payload). Like Append, it
// forces the header's opcode to OpData, so a Data built without setting Op
// still encodes a DATA packet, and sets FlagPiggyAck from HasPiggy.
func (d *Data) AppendHeader(b []byte) []byte {
	d.Op = OpData
	d.Flags = d.piggyFlags(d.Flags)
	b = d.Header.Append(b)
	b = binary.BigEndian.AppendUint32(b, d.Flow)
	b = binary.BigEndian.AppendUint32(b, d.Msg)
	b = append(b, d.Index, 0, 0, 0)
	b = binary.BigEndian.AppendUint32(b, d.Timestamp)
	b = binary.BigEndian.AppendUint64(b, d.Offset)
	b = binary.BigEndian.AppendUint64(b, d.MsgLen)
	return d.appendPiggy(b)
}

// Append appends the whole packet, payload included. The header's opcode is
// forced to OpData.
func (d *Data) Append(b []byte) []byte {
	return append(d.AppendHeader(b), d.Payload...)
}

// Length is the encoded size of d.
func (d *Data) Length() int { return d.HeaderLength() + len(d.Payload) }

// HeaderLength is the encoded size of d without its payload: DataHeaderLen,
// plus PiggyLen when it carries a piggybacked acknowledgement.
func (d *Data) HeaderLength() int { return DataHeaderLen + d.piggyLen() }
