package collectives

import (
	"errors"
	"fmt"
	"io"
	"syscall"

	"github.com/metaroce/metaroce/transport"
)

// ErrInvalidArgument is wrapped by the error of a call refused for its
// arguments before anything was sent: buffers that do not fit the
// collective or each other, an invalid data type or reduction, a root or
// peer outside the ranks, more channels than the communicator has. The
// refusal is this rank's alone and leaves the communicator usable; the
// other ranks, which may have made the call, wait for this one.
var ErrInvalidArgument = errors.New("invalid argument")

// argError is a refusal of a call's arguments: its message as written, and
// ErrInvalidArgument for errors.Is.
type argError struct{ err error }

func (e argError) Error() string   { return e.err.Error() }
func (e argError) Unwrap() []error { return []error{e.err, ErrInvalidArgument} }

// invalidf builds an argError.
func invalidf(format string, args ...any) error {
	return argError{fmt.Errorf(format, args...)}
}

// notStarted is the refusal of a call whose context was already done
// (Comm.run).
type notStarted struct{ err error }

func (e notStarted) Error() string { return e.err.Error() }
func (e notStarted) Unwrap() error { return e.err }

// refusal is the error of a call refused before it sent anything, for its
// arguments (argError) or its done context (notStarted): the call's own,
// which a cut-in's ErrBroken must not pass on to the later calls
// (Comm.Run).
type refusal interface {
	error
	refused()
}

func (argError) refused()   {}
func (notStarted) refused() {}

// ErrPeerLost is wrapped by the error of a call whose transfer with
// another rank failed because the connection to that rank failed or was
// closed by it: the rank exited, gave the call up (its own error says
// why), or stopped answering (over MetaRoCE transport.ErrPeerDead, after
// the core's idle timeout). It is the same over both transports; the
// transport's own error is wrapped too.
var ErrPeerLost = errors.New("connection to a rank lost")

// PeerError is the error of a call that failed on a transfer with rank
// Peer (errors.As finds it; Peer is the rank the transfer was with, which
// after ErrPeerLost may have left because of a third rank's failure).
type PeerError struct {
	Peer int
	err  error
	lost bool
}

func (e *PeerError) Error() string { return e.err.Error() }

// Unwrap returns the transfer's error and, where the connection was lost,
// ErrPeerLost.
func (e *PeerError) Unwrap() []error {
	if e.lost {
		return []error{e.err, ErrPeerLost}
	}
	return []error{e.err}
}

// connectionLost reports whether err, a transfer's failure, is the loss of
// its connection rather than a disagreement on the call: the peer closed
// it or died (MetaRoCE), or the socket ended or was reset (TCP).
func connectionLost(err error) bool {
	return errors.Is(err, transport.ErrPeerClosed) || errors.Is(err, transport.ErrPeerDead) ||
		errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) ||
		errors.Is(err, syscall.ECONNRESET) || errors.Is(err, syscall.EPIPE)
}
