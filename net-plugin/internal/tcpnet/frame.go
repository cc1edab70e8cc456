package tcpnet

import (
	"encoding/binary"
	"fmt"

	"github.com/metaroce/metaroce/net-plugin/internal/backend"
)

// frameMagic opens every message header on a data socket.
const frameMagic = 0x4d52 // "MR"

// frameLen is the size of a message header in bytes:
// magic(2) flags(2) tag(4) size(8), big-endian.
const frameLen = 16

// MaxMessage is the largest message in bytes a header may announce: the 1 TiB
// bound NCCL accepts for maxP2pBytes.
const MaxMessage = 1 << 40

// frameHeader precedes every message on a data socket.
type frameHeader struct {
	// Tag is the sender's tag (NCCL passes its rank).
	Tag int32
	// Size is the payload length in bytes that follows the header.
	Size uint64
}

// Length returns the encoded size in bytes.
func (f *frameHeader) Length() int { return frameLen }

// Append encodes f after b.
func (f *frameHeader) Append(b []byte) ([]byte, error) {
	if f.Size > MaxMessage {
		return b, fmt.Errorf("tcpnet: message of %d bytes exceeds the %d-byte limit: %w", f.Size, uint64(MaxMessage), backend.ErrInvalidUsage)
	}
	b = binary.BigEndian.AppendUint16(b, frameMagic)
	b = binary.BigEndian.AppendUint16(b, 0)
	b = binary.BigEndian.AppendUint32(b, uint32(f.Tag))
	return binary.BigEndian.AppendUint64(b, f.Size), nil
}

// parseFrameHeader decodes one header; a bad magic, unknown flags or an
// oversized length mean the stream is out of step and must be dropped.
func parseFrameHeader(into *frameHeader, b []byte) (int, error) {
	if len(b) < frameLen {
		return 0, fmt.Errorf("tcpnet: short message header (%d bytes)", len(b))
	}
	if m := binary.BigEndian.Uint16(b); m != frameMagic {
		return 0, fmt.Errorf("tcpnet: message header has bad magic %#04x (stream out of step)", m)
	}
	if fl := binary.BigEndian.Uint16(b[2:]); fl != 0 {
		return 0, fmt.Errorf("tcpnet: message header has unknown flags %#04x", fl)
	}
	size := binary.BigEndian.Uint64(b[8:])
	if size > MaxMessage {
		return 0, fmt.Errorf("tcpnet: message header announces %d bytes, over the %d-byte limit", size, uint64(MaxMessage))
	}
	*into = frameHeader{Tag: int32(binary.BigEndian.Uint32(b[4:])), Size: size}
	return frameLen, nil
}
