package gpu

import (
	"reflect"
	"strings"
	"testing"
)

// The module's test dependencies stop at the standard library here, so these
// few helpers stand in for an assertion library.

func mustNoErr(t *testing.T, err error, what ...any) {
	t.Helper()
	if err != nil {
		t.Fatalf("%v: unexpected error: %v", what, err)
	}
}

func mustErrContains(t *testing.T, err error, subs ...string) {
	t.Helper()
	if err == nil {
		t.Fatalf("expected an error containing %q, got nil", subs)
	}
	for _, s := range subs {
		if !strings.Contains(err.Error(), s) {
			t.Errorf("error %q does not contain %q", err, s)
		}
	}
}

func mustEqual(t *testing.T, want, got any, what ...any) {
	t.Helper()
	if !reflect.DeepEqual(want, got) {
		t.Fatalf("%v:\nwant %#v\n got %#v", what, want, got)
	}
}
