package term

import (
	"bytes"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestLine: each Show replaces the line, Clear erases it once and only
// when something is drawn, Close silences later Shows, and a nil line (not
// a terminal) does nothing.
func TestLine(t *testing.T) {
	require.Nil(t, NewLine(&bytes.Buffer{}, false))
	var none *Line
	none.Show("x")
	none.Clear()
	none.Close()

	var w bytes.Buffer
	l := NewLine(&w, true)
	l.Clear()
	require.Empty(t, w.String(), "nothing drawn, nothing to erase")
	l.Show("a")
	l.Show("b")
	require.Equal(t, "\r\033[Ka\r\033[Kb", w.String())
	w.Reset()
	l.Clear()
	l.Clear()
	require.Equal(t, "\r\033[K", w.String(), "erased once")
	w.Reset()
	l.Show("c")
	l.Close()
	l.Show("d")
	l.Clear()
	require.Equal(t, "\r\033[Kc\r\033[K", w.String(), "nothing after Close")
}
