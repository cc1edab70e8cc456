package core

import (
	"errors"
	"fmt"
	"sync"

	"github.com/metaroce/metaroce/net-plugin/internal/backend"
)

// Result mirrors ncclResult_t.
type Result int32

// ncclResult_t values (see include/metaroce/nccl_net.h).
const (
	Success         Result = 0
	SystemError     Result = 2
	InternalError   Result = 3
	InvalidArgument Result = 4
	InvalidUsage    Result = 5
	RemoteError     Result = 6
)

// Code maps an error to the ncclResult_t category NCCL documents for plugins:
// network and OS failures are system errors, misuse by NCCL is internal,
// user/configuration mistakes are invalid usage. This is the only place
// where that mapping is made.
func Code(err error) Result {
	switch {
	case err == nil:
		return Success
	case errors.Is(err, backend.ErrInvalidUsage):
		return InvalidUsage
	case errors.Is(err, backend.ErrInvalidArgument):
		return InvalidArgument
	case errors.Is(err, backend.ErrInternal), errors.Is(err, backend.ErrClosed):
		return InternalError
	case errors.Is(err, backend.ErrRemote):
		return RemoteError
	default:
		return SystemError
	}
}

// internalf builds an ErrInternal error: NCCL passed something the plugin
// never handed out or called in the wrong state.
func internalf(format string, args ...any) error {
	return fmt.Errorf(format+": %w", append(args, backend.ErrInternal)...)
}

// lastError keeps the text of the most recent failure so that a C caller
// can fetch it after a non-success return.
var lastError struct {
	sync.Mutex
	text string
}

// LastError returns the text of the most recent failure ("" if none).
func LastError() string {
	lastError.Lock()
	defer lastError.Unlock()
	return lastError.text
}

// Fail records err as the last error, logs it as a WARN naming op, and
// returns its ncclResult_t.
func Fail(op string, err error) Result {
	if err == nil {
		return Success
	}
	msg := fmt.Sprintf("NET/MetaRoCE : %s failed: %v", op, err)
	lastError.Lock()
	lastError.text = msg
	lastError.Unlock()
	Logf(LogWarn, SubsysNet, "%s", msg)
	return Code(err)
}

// Panicked turns a recovered panic in an exported function into an internal
// error, so that a bug never unwinds into NCCL's C stack.
func Panicked(op string, r any) Result {
	Fail(op, internalf("plugin bug: panic: %v", r))
	return InternalError
}

// ErrNilArgument reports a NULL pointer NCCL should never pass.
func ErrNilArgument(what string) error { return internalf("NULL %s", what) }

// ErrBadGroup reports a grouped receive outside 1..max buffers.
func ErrBadGroup(n, max int) error {
	return internalf("irecv of %d buffers (maxRecvs is %d)", n, max)
}

// ErrSendSize reports an isend of n bytes, more than backend.MaxMessage
// (maxP2pBytes): test() reports sizes as C ints, so the size of a larger
// message could not be reported. It is an invalid argument.
func ErrSendSize(n uint64) error {
	return fmt.Errorf("isend of %d bytes: at most %d (maxP2pBytes; test() reports sizes as int): %w", n, backend.MaxMessage, backend.ErrInvalidArgument)
}

// ErrNegativeSize reports a negative size passed to op (isend, irecv,
// regMr) through ABI v6..v8, whose sizes are C ints: an overflowed or
// corrupted size, refused as an invalid argument before it could be
// converted to an unsigned byte count.
func ErrNegativeSize(op string, size int64) error {
	return fmt.Errorf("%s: size %d is negative (ABI v6..v8 pass sizes as int; an overflowed size?): %w", op, size, backend.ErrInvalidArgument)
}

// ErrNoFlush is iflush's answer: the plugin reports ptrSupport = NCCL_PTR_HOST
// only, so NCCL never asks for a GPU flush.
func ErrNoFlush() error {
	return internalf("iflush called, but the plugin supports host memory only and needs no flush")
}
