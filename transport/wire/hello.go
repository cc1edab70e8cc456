package wire

import "encoding/binary"

// MaxAddrBlob bounds the driver address blob a handshake may carry.
const MaxAddrBlob = 512

const helloFixedLen = 24

// Capability bits negotiated in the handshake (docs/spec.md §2.8).
type Caps uint32

const (
	// CapAuth: the sender can authenticate packets (reserved, §5.2).
	CapAuth Caps = 1 << 0
	// CapWrite: the sender can take one-sided Writes (reserved, §5.1).
	CapWrite Caps = 1 << 1
	// CapFwdDelay: the sender reads the forward delay of the ACK records
	// it receives (docs/spec.md §2.5, §3.5); its peer fills that field
	// only when this bit was announced.
	CapFwdDelay Caps = 1 << 2
)

// Hello is the handshake request (Op = OpHello) and its reply (Op =
// OpHelloAck); both share one layout (docs/spec.md §2.8). In a HELLO the
// header's DstConn and Token are 0; in a HELLO_ACK they are the initiator's
// SrcConn and Token, which proves the reply answers this request.
//
//	offset size field
//	24     4    source connection id: where the peer must send
//	28     8    source token: the peer must echo it in every packet
//	36     4    capability bits
//	40     1    planes the sender has (1..16)
//	41     1    paths per plane the sender will use (1..64)
//	42     2    largest datagram the sender accepts, bytes (≥ 576)
//	44     2    address blob length (≤ 512)
//	46     2    reserved (0)
//	48     …    address blob: the driver's per-plane addresses, opaque to the core
type Hello struct {
	Header
	SrcConn  uint32
	SrcTok   uint64
	Caps     Caps
	Planes   uint8
	Paths    uint8
	MaxDgram uint16
	// Addr is a view into the parsed datagram (not copied).
	Addr []byte
}

// Limits of the handshake fields.
const (
	MaxPlanes        = 16
	MaxPathsPerPlane = 64
	MinDatagram      = 576
)

// ParseHello parses a HELLO or HELLO_ACK.
func ParseHello(h *Hello, b []byte) (int, error) {
	if _, err := ParseHeader(&h.Header, b); err != nil {
		return 0, err
	}
	if h.Op != OpHello && h.Op != OpHelloAck {
		return 0, perr(OpHello, "opcode", uint64(h.Op), ErrOpcode)
	}
	if err := noPiggy(&h.Header); err != nil {
		return 0, err
	}
	if len(b) < HeaderLen+helloFixedLen {
		return 0, perr(h.Op, "length", uint64(len(b)), ErrShort)
	}
	h.SrcConn = binary.BigEndian.Uint32(b[24:])
	h.SrcTok = binary.BigEndian.Uint64(b[28:])
	h.Caps = Caps(binary.BigEndian.Uint32(b[36:]))
	h.Planes = b[40]
	if h.Planes == 0 || h.Planes > MaxPlanes {
		return 0, perr(h.Op, "planes", uint64(h.Planes), ErrRange)
	}
	h.Paths = b[41]
	if h.Paths == 0 || h.Paths > MaxPathsPerPlane {
		return 0, perr(h.Op, "paths", uint64(h.Paths), ErrRange)
	}
	h.MaxDgram = binary.BigEndian.Uint16(b[42:])
	if h.MaxDgram < MinDatagram {
		return 0, perr(h.Op, "maxdgram", uint64(h.MaxDgram), ErrRange)
	}
	n := int(binary.BigEndian.Uint16(b[44:]))
	if n > MaxAddrBlob {
		return 0, perr(h.Op, "addrlen", uint64(n), ErrRange)
	}
	if binary.BigEndian.Uint16(b[46:]) != 0 {
		return 0, perr(h.Op, "reserved", 0, ErrReserved)
	}
	want := HeaderLen + helloFixedLen + n
	if len(b) < want {
		return 0, perr(h.Op, "length", uint64(len(b)), ErrShort)
	}
	if len(b) > want {
		return 0, perr(h.Op, "length", uint64(len(b)), ErrLength)
	}
	h.Addr = b[HeaderLen+helloFixedLen : want]
	return want, nil
}

// Append appends the packet; h.Op must be OpHello or OpHelloAck and Addr at
// most MaxAddrBlob bytes (longer blobs are truncated, which ParseHello of the
// result will still accept).
func (h *Hello) Append(b []byte) []byte {
	if h.Op != OpHelloAck {
		h.Op = OpHello
	}
	addr := h.Addr
	if len(addr) > MaxAddrBlob {
		addr = addr[:MaxAddrBlob]
	}
	b = h.Header.Append(b)
	b = binary.BigEndian.AppendUint32(b, h.SrcConn)
	b = binary.BigEndian.AppendUint64(b, h.SrcTok)
	b = binary.BigEndian.AppendUint32(b, uint32(h.Caps))
	b = append(b, h.Planes, h.Paths)
	b = binary.BigEndian.AppendUint16(b, h.MaxDgram)
	b = binary.BigEndian.AppendUint16(b, uint16(len(addr)))
	b = binary.BigEndian.AppendUint16(b, 0)
	return append(b, addr...)
}

// Length is the encoded size of h.
func (h *Hello) Length() int {
	return HeaderLen + helloFixedLen + min(len(h.Addr), MaxAddrBlob)
}
