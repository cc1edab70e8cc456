package term

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestNotTerminals: writers that are not terminals read as such, so that
// progress lines never reach them.
func TestNotTerminals(t *testing.T) {
	require.False(t, IsTerminal(&bytes.Buffer{}), "an in-memory writer")
	f, err := os.Create(filepath.Join(t.TempDir(), "log"))
	require.NoError(t, err)
	defer f.Close()
	require.False(t, IsTerminal(f), "a regular file")
	r, w, err := os.Pipe()
	require.NoError(t, err)
	defer r.Close()
	defer w.Close()
	require.False(t, IsTerminal(w), "a pipe")
}
