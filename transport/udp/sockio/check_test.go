package sockio

import (
	"cmp"
	"errors"
	"fmt"
	"reflect"
	"testing"
)

// checks is a minimal fail-fast assertion set for this package's tests, shaped
// like the common require API so that test bodies read the same.
type checks struct{}

var require checks

func failf(t testing.TB, msg []any, format string, args ...any) {
	t.Helper()
	s := fmt.Sprintf(format, args...)
	if len(msg) > 0 {
		if f, ok := msg[0].(string); ok {
			s += ": " + fmt.Sprintf(f, msg[1:]...)
		}
	}
	t.Fatal(s)
}

func (checks) NoError(t testing.TB, err error, msg ...any) {
	t.Helper()
	if err != nil {
		failf(t, msg, "unexpected error: %v", err)
	}
}

func (checks) Error(t testing.TB, err error, msg ...any) {
	t.Helper()
	if err == nil {
		failf(t, msg, "expected an error")
	}
}

func (checks) ErrorIs(t testing.TB, err, target error, msg ...any) {
	t.Helper()
	if !errors.Is(err, target) {
		failf(t, msg, "error %v is not %v", err, target)
	}
}

func (checks) Equal(t testing.TB, want, got any, msg ...any) {
	t.Helper()
	if !reflect.DeepEqual(want, got) {
		failf(t, msg, "got %v, want %v", got, want)
	}
}

func (checks) True(t testing.TB, v bool, msg ...any) {
	t.Helper()
	if !v {
		failf(t, msg, "expected true")
	}
}

func (checks) False(t testing.TB, v bool, msg ...any) {
	t.Helper()
	if v {
		failf(t, msg, "expected false")
	}
}

func (checks) Zero(t testing.TB, v any, msg ...any) {
	t.Helper()
	if v != nil && !reflect.ValueOf(v).IsZero() {
		failf(t, msg, "got %v, want zero", v)
	}
}

func (checks) Len(t testing.TB, v any, n int, msg ...any) {
	t.Helper()
	if l := reflect.ValueOf(v).Len(); l != n {
		failf(t, msg, "length %d, want %d", l, n)
	}
}

func (c checks) Less(t testing.TB, a, b int, msg ...any) {
	t.Helper()
	if cmp.Compare(a, b) >= 0 {
		failf(t, msg, "%d is not less than %d", a, b)
	}
}

func (c checks) GreaterOrEqual(t testing.TB, a, b int, msg ...any) {
	t.Helper()
	if a < b {
		failf(t, msg, "%d is less than %d", a, b)
	}
}

func (c checks) InDelta(t testing.TB, want, got, delta float64, msg ...any) {
	t.Helper()
	if got < want-delta || got > want+delta {
		failf(t, msg, "got %v, want %v ± %v", got, want, delta)
	}
}
