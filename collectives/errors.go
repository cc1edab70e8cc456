package collectives

import (
	"context"
	"errors"
	"fmt"
	"io"
	"syscall"
	"time"

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

// DeadlineError is the deadline of New's setup, wrapped by the error of a
// setup that this deadline ended: the rendezvous' on rank 0 and on the
// other ranks, the connections after it over either transport (dialing
// the ranks below, waiting for the ranks above), and the setup watch's
// waits for the ranks' reports and for rank 0's confirmation. errors.As
// finds it, and errors.Is(err, context.DeadlineExceeded) holds as well.
//
// Such an error names the deadline in the words of its DeadlineError's
// Error method, "the setup deadline of 1m0s (Config.Timeout)", which its
// text contains as they are. A program that sets Config.Timeout from a
// setting of its own (a command-line flag, say) names that setting in
// Config.TimeoutSetting, and the words name it instead: "the setup
// deadline of 1m0s (-T)".
//
// An error that another rank sent as text (rank 0's abort, naming the
// deadline that ended its own setup) wraps none: its words are that
// rank's, in that rank's TimeoutSetting.
type DeadlineError struct {
	// Timeout is the deadline's length from New's start: Config.Timeout,
	// or, where Caller is set, what was left then of the caller's
	// context's own.
	Timeout time.Duration
	// Caller is set where the caller's context's deadline came before
	// Config.Timeout's: no setting of this package sets it, and the
	// words name none.
	Caller bool
	// Field is the setting that sets Timeout, which the words name where
	// Caller is not set: Config.TimeoutSetting, or "Config.Timeout" where
	// that is empty.
	Field string
	// either is set where the deadline that ended a handshake is not
	// known (a link's connect run outside New): Field's, or the
	// caller's, whichever came first.
	either bool
}

// timeoutField is DeadlineError.Field where Config.TimeoutSetting is empty.
const timeoutField = "Config.Timeout"

// Error names the deadline by Field: Named(e.Field).
func (e *DeadlineError) Error() string { return e.Named(e.Field) }

// Named names the deadline as Error does, with setting in Field's place:
// Named("-T") is "the setup deadline of 1m0s (-T)" where Error is "the
// setup deadline of 1m0s (Config.Timeout)". The caller's deadline names no
// setting: "the caller's deadline (500ms after New began)" either way.
func (e *DeadlineError) Named(setting string) string {
	switch {
	case e.Caller:
		return fmt.Sprintf("the caller's deadline (%v after New began)", e.Timeout)
	case e.either:
		return fmt.Sprintf("the setup deadline (%s, %v, or the caller's own)", setting, e.Timeout)
	}
	return fmt.Sprintf("the setup deadline of %v (%s)", e.Timeout, setting)
}

// Unwrap returns context.DeadlineExceeded: the deadline ran out.
func (e *DeadlineError) Unwrap() error { return context.DeadlineExceeded }

// endedError is the error of a setup that its deadline ended: err, whose
// text names the deadline in dl's words, and dl, which errors.As finds.
type endedError struct {
	err error
	dl  *DeadlineError
}

func (e *endedError) Error() string   { return e.err.Error() }
func (e *endedError) Unwrap() []error { return []error{e.err, e.dl} }
