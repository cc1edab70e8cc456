package wire

import (
	"errors"
	"fmt"
)

// Sentinel errors for malformed input. Parse functions wrap them in a
// *ParseError that names the packet type and the offending value, so callers
// can both count drops by reason (errors.Is) and log something useful.
var (
	// ErrShort means the datagram ended before a fixed field or a counted
	// list did.
	ErrShort = errors.New("packet too short")
	// ErrVersion means the version field is not Version.
	ErrVersion = errors.New("unsupported protocol version")
	// ErrOpcode means the opcode is unknown or not the one the parser expects.
	ErrOpcode = errors.New("unexpected opcode")
	// ErrLength means a length or offset field contradicts the datagram
	// (payload beyond the message, trailing bytes, oversize blob).
	ErrLength = errors.New("bad length")
	// ErrRange means a count or enumerated field is out of its documented range.
	ErrRange = errors.New("field out of range")
	// ErrReserved means a reserved field or flag is non-zero.
	ErrReserved = errors.New("reserved bits set")
)

// ParseError reports why a packet was rejected. Err is one of the sentinels
// above.
type ParseError struct {
	Op    Opcode // the opcode being parsed (OpInvalid if not known yet)
	Field string // the offending field
	Value uint64 // its value, where meaningful
	Err   error
}

func (e *ParseError) Error() string {
	return fmt.Sprintf("metaroce wire: %v: %s=%d: %v", e.Op, e.Field, e.Value, e.Err)
}

func (e *ParseError) Unwrap() error { return e.Err }

// perr builds a *ParseError. It is only called on the error path, so the
// allocation it makes does not count against the zero-allocation budget of
// well-formed input.
func perr(op Opcode, field string, v uint64, err error) error {
	return &ParseError{Op: op, Field: field, Value: v, Err: err}
}
