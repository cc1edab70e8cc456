package wire

import "encoding/binary"

// CloseLen is the size of a CLOSE packet (docs/spec.md §2.10).
const CloseLen = HeaderLen + 8

// CloseReason says why a connection is closed.
type CloseReason uint32

const (
	CloseNormal      CloseReason = 0 // the application closed it
	CloseError       CloseReason = 1 // a protocol violation
	CloseIdleTimeout CloseReason = 2 // the peer stopped answering
	CloseShutdown    CloseReason = 3 // the endpoint is shutting down
)

func (r CloseReason) String() string {
	switch r {
	case CloseNormal:
		return "closed"
	case CloseError:
		return "protocol error"
	case CloseIdleTimeout:
		return "idle timeout"
	case CloseShutdown:
		return "endpoint shutdown"
	}
	return "unknown reason"
}

// Close ends a connection (docs/spec.md §2.10). Unsequenced; it is repeated
// until the peer answers with a CLOSE carrying FlagReply, or the close timer
// expires.
//
//	offset size field
//	24     4    reason
//	28     4    reserved (0)
type Close struct {
	Header
	Reason CloseReason
}

// ParseClose parses a CLOSE packet.
func ParseClose(c *Close, b []byte) (int, error) {
	if err := expect(&c.Header, OpClose, b); err != nil {
		return 0, err
	}
	if err := noPiggy(&c.Header); err != nil {
		return 0, err
	}
	if len(b) < CloseLen {
		return 0, perr(OpClose, "length", uint64(len(b)), ErrShort)
	}
	if len(b) > CloseLen {
		return 0, perr(OpClose, "length", uint64(len(b)), ErrLength)
	}
	c.Reason = CloseReason(binary.BigEndian.Uint32(b[24:]))
	if c.Reason > CloseShutdown {
		return 0, perr(OpClose, "reason", uint64(c.Reason), ErrRange)
	}
	if binary.BigEndian.Uint32(b[28:]) != 0 {
		return 0, perr(OpClose, "reserved", 0, ErrReserved)
	}
	return CloseLen, nil
}

// Append appends the packet.
func (c *Close) Append(b []byte) []byte {
	c.Op = OpClose
	b = c.Header.Append(b)
	b = binary.BigEndian.AppendUint32(b, uint32(c.Reason))
	return binary.BigEndian.AppendUint32(b, 0)
}

// Length is the encoded size of c.
func (c *Close) Length() int { return CloseLen }
