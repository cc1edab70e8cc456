package rocev2

import (
	"encoding/binary"
	"errors"
	"fmt"
)

// Opcode identifies a packet type.
type Opcode uint8

// Opcodes.
const (
	OpConnReq Opcode = 1 // connection request (out-of-band QP exchange in real RoCE)
	OpConnRep Opcode = 2 // connection reply
	OpData    Opcode = 3 // Send payload
	OpAck     Opcode = 4 // cumulative ACK: every PSN ≤ PSN received
	OpNak     Opcode = 5 // sequence-error NAK: resend from PSN
	OpRnr     Opcode = 6 // receiver not ready: resend from PSN after a delay
	OpCNP     Opcode = 7 // congestion notification for the QP
	// OpCTS is a receive's announcement to the sender (Config.Rendezvous):
	// a sequenced RDMA WRITE of one send-FIFO element, as NCCL's IB
	// transport posts for every receive before the sender may write into
	// it. It travels on the connection's CTS QP (index QPsPerConn). It
	// has the DATA layout; Flow and Msg name the receive announced, and
	// its payload is CTSLen bytes.
	OpCTS Opcode = 8
)

// CTSLen is the payload of a CTS: one element of NCCL's send FIFO
// (struct ncclIbSendFifo, 64 bytes: address, size, remote keys, request
// count, tag, index, padding).
const CTSLen = 64

// FlagAckReq asks the receiver to acknowledge at once.
const FlagAckReq = 1

// Header lengths in bytes.
const (
	// HeaderLen is the common header: opcode, flags, QP index, destination
	// connection, PSN.
	HeaderLen = 12
	// DataHeaderLen adds flow, message, offset, message length and tag.
	DataHeaderLen = HeaderLen + 28
	// ConnLen is a ConnReq/ConnRep: common header, source connection, QP count.
	ConnLen = HeaderLen + 8
)

// ErrMalformed is wrapped by every parse error.
var ErrMalformed = errors.New("rocev2: malformed packet")

// Header is a parsed packet.
//
//	offset size field
//	0      1    opcode
//	1      1    flags
//	2      2    QP index within the connection
//	4      4    destination connection id (0 in ConnReq)
//	8      4    PSN (24 bits used)
//	DATA:  12 flow, 16 message, 20 offset (8), 28 message length (8), 36 tag
//	CTS:   as DATA, offset 0 and message length CTSLen
//	CONN:  12 source connection id, 16 QP count
type Header struct {
	Op      Opcode
	Flags   uint8
	QP      uint16
	DstConn uint32
	PSN     uint32
	// DATA and CTS
	Flow   uint32
	Msg    uint32
	Offset uint64
	MsgLen uint64
	Tag    uint32
	// CONN
	SrcConn uint32
	QPs     uint32
}

// psnMask keeps PSNs to 24 bits as in the BTH.
const psnMask = 1<<24 - 1

// Parse parses b (header plus, for DATA, payload) into h and returns the
// payload length.
func Parse(h *Header, b []byte) (int, error) {
	if len(b) < HeaderLen {
		return 0, fmt.Errorf("%w: %d bytes", ErrMalformed, len(b))
	}
	*h = Header{Op: Opcode(b[0]), Flags: b[1], QP: binary.BigEndian.Uint16(b[2:]),
		DstConn: binary.BigEndian.Uint32(b[4:]), PSN: binary.BigEndian.Uint32(b[8:])}
	if h.PSN > psnMask {
		return 0, fmt.Errorf("%w: PSN %#x beyond 24 bits", ErrMalformed, h.PSN)
	}
	switch h.Op {
	case OpData, OpCTS:
		if len(b) < DataHeaderLen {
			return 0, fmt.Errorf("%w: %v of %d bytes", ErrMalformed, h.Op, len(b))
		}
		h.Flow = binary.BigEndian.Uint32(b[12:])
		h.Msg = binary.BigEndian.Uint32(b[16:])
		h.Offset = binary.BigEndian.Uint64(b[20:])
		h.MsgLen = binary.BigEndian.Uint64(b[28:])
		h.Tag = binary.BigEndian.Uint32(b[36:])
		n := uint64(len(b) - DataHeaderLen)
		if h.MsgLen > 1<<48 || h.Offset > h.MsgLen || n > h.MsgLen-h.Offset {
			return 0, fmt.Errorf("%w: payload %d at %d of %d", ErrMalformed, n, h.Offset, h.MsgLen)
		}
		if h.Op == OpCTS && (h.MsgLen != CTSLen || n != CTSLen) {
			return 0, fmt.Errorf("%w: CTS of %d payload bytes", ErrMalformed, n)
		}
		return int(n), nil
	case OpConnReq, OpConnRep:
		if len(b) != ConnLen {
			return 0, fmt.Errorf("%w: CONN of %d bytes", ErrMalformed, len(b))
		}
		h.SrcConn = binary.BigEndian.Uint32(b[12:])
		h.QPs = binary.BigEndian.Uint32(b[16:])
		if h.QPs == 0 || h.QPs > MaxQPs {
			return 0, fmt.Errorf("%w: %d QPs", ErrMalformed, h.QPs)
		}
		return 0, nil
	case OpAck, OpNak, OpRnr, OpCNP:
		if len(b) != HeaderLen {
			return 0, fmt.Errorf("%w: %v of %d bytes", ErrMalformed, h.Op, len(b))
		}
		return 0, nil
	}
	return 0, fmt.Errorf("%w: opcode %d", ErrMalformed, b[0])
}

// Len is the encoded header length of h.
func (h *Header) Len() int {
	switch h.Op {
	case OpData, OpCTS:
		return DataHeaderLen
	case OpConnReq, OpConnRep:
		return ConnLen
	}
	return HeaderLen
}

// Put encodes h into b, which must hold h.Len() bytes, and returns the
// length written.
func (h *Header) Put(b []byte) int {
	n := h.Len()
	_ = b[n-1]
	b[0], b[1] = byte(h.Op), h.Flags
	binary.BigEndian.PutUint16(b[2:], h.QP)
	binary.BigEndian.PutUint32(b[4:], h.DstConn)
	binary.BigEndian.PutUint32(b[8:], h.PSN&psnMask)
	switch h.Op {
	case OpData, OpCTS:
		binary.BigEndian.PutUint32(b[12:], h.Flow)
		binary.BigEndian.PutUint32(b[16:], h.Msg)
		binary.BigEndian.PutUint64(b[20:], h.Offset)
		binary.BigEndian.PutUint64(b[28:], h.MsgLen)
		binary.BigEndian.PutUint32(b[36:], h.Tag)
	case OpConnReq, OpConnRep:
		binary.BigEndian.PutUint32(b[12:], h.SrcConn)
		binary.BigEndian.PutUint32(b[16:], h.QPs)
	}
	return n
}

func (o Opcode) String() string {
	switch o {
	case OpConnReq:
		return "CONN_REQ"
	case OpConnRep:
		return "CONN_REP"
	case OpData:
		return "DATA"
	case OpAck:
		return "ACK"
	case OpNak:
		return "NAK"
	case OpRnr:
		return "RNR"
	case OpCNP:
		return "CNP"
	case OpCTS:
		return "CTS"
	}
	return fmt.Sprintf("OP(%d)", uint8(o))
}
