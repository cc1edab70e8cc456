package rccl

import "fmt"

// Error is a failed call into the library: which call, the ncclResult_t,
// the library's text for it and, when the library has ncclGetLastError, the
// detail it recorded (often the actual cause: a peer that went away, a
// missing network plugin).
type Error struct {
	Func   string
	Code   Result
	Text   string
	Detail string
}

func (e *Error) Error() string {
	s := fmt.Sprintf("rccl: %s failed: %s (ncclResult %d)", e.Func, e.Text, int(e.Code))
	if e.Detail != "" {
		s += ": " + e.Detail
	}
	return s
}

// Is matches a Result, so that errors.Is(err, rccl.RemoteError) works.
func (e *Error) Is(target error) bool {
	r, ok := target.(Result)
	return ok && r == e.Code
}

// argError reports arguments refused before reaching the library.
func argError(fn, format string, args ...any) error {
	return fmt.Errorf("rccl: %s: %s: %w", fn, fmt.Sprintf(format, args...), InvalidArgument)
}
