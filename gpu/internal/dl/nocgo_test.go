//go:build !cgo

package dl

import (
	"errors"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestOpenWithoutCgo: a build without cgo names the cause, not a list of
// paths that were never tried and a library to install.
func TestOpenWithoutCgo(t *testing.T) {
	spec := Spec{What: "Widget", Env: "METAROCE_TEST_WIDGET_LIB", Install: "libwidget",
		Search: func() []Place { return []Place{{Files: []string{"libc.so.6"}}} }}
	t.Setenv(spec.Env, "")
	for _, path := range []string{"", "libc.so.6"} {
		l, err := Open(spec, path)
		require.Nil(t, l)
		require.EqualError(t, err, "cannot load the Widget library: "+ErrNoCgo.Error())
		require.True(t, errors.Is(err, ErrNoCgo))
		var le *LoadError
		require.True(t, errors.As(err, &le))
		require.Empty(t, le.Tried)
		require.Equal(t, path != "", le.Explicit, "a named path stays explicit, so that discovery notes it")
	}
	require.Contains(t, ErrNoCgo.Error(), "CGO_ENABLED=1")
}
