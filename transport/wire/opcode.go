package wire

import "fmt"

// Version is the protocol version this package speaks (docs/spec.md §2.1).
const Version = 1

// DefaultPort is the default UDP destination port of a MetaRoCE endpoint
// (docs/spec.md §1). It is distinct from RoCEv2's 4791 so the two can share a
// host.
const DefaultPort = 4793

// Opcode identifies a packet type (docs/spec.md §2.2).
type Opcode uint8

// Opcodes. Values not listed are rejected by ParseHeader.
const (
	OpInvalid   Opcode = 0
	OpHello     Opcode = 1  // handshake request
	OpHelloAck  Opcode = 2  // handshake reply
	OpData      Opcode = 3  // two-sided Send payload (sequenced)
	OpAck       Opcode = 4  // per-path cumulative PSN + SACK bitmap
	OpRecvReady Opcode = 5  // posted receive announcement (sequenced)
	OpNack      Opcode = 6  // negative acknowledgement (sequenced)
	OpProbe     Opcode = 7  // path probe (sequenced, no body)
	OpClose     Opcode = 8  // connection close
	OpWrite     Opcode = 16 // reserved: one-sided Write (docs/spec.md §5.1)
)

var opNames = [...]string{
	OpInvalid: "INVALID", OpHello: "HELLO", OpHelloAck: "HELLO_ACK", OpData: "DATA",
	OpAck: "ACK", OpRecvReady: "RECV_READY", OpNack: "NACK", OpProbe: "PROBE",
	OpClose: "CLOSE", OpWrite: "WRITE",
}

func (o Opcode) String() string {
	if int(o) < len(opNames) && opNames[o] != "" {
		return opNames[o]
	}
	return fmt.Sprintf("OP(%d)", uint8(o))
}

// Known reports whether o is an opcode of version 1 (including reserved ones
// that parse but are not implemented).
func (o Opcode) Known() bool {
	return int(o) < len(opNames) && opNames[o] != "" && o != OpInvalid
}

// Sequenced reports whether packets of this opcode consume a PSN on their path
// and are covered by ACKs (docs/spec.md §3.1). Unsequenced packets carry PSN 0.
func (o Opcode) Sequenced() bool {
	switch o {
	case OpData, OpRecvReady, OpNack, OpProbe, OpWrite:
		return true
	}
	return false
}
