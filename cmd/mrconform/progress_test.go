package main

import (
	"bytes"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/metaroce/metaroce/conformance"
)

// TestCaseLine: on a terminal each case's line overwrites the last and
// clear erases it once; elsewhere there is no line and no hook.
func TestCaseLine(t *testing.T) {
	require.Nil(t, newCaseLine(&bytes.Buffer{}, false, 3), "not a terminal")
	var none *caseLine
	require.Nil(t, none.hook())
	none.clear()

	var w bytes.Buffer
	l := newCaseLine(&w, true, 18)
	l.clear()
	require.Empty(t, w.String(), "nothing to clear before a case")
	hook := l.hook()
	hook(0, &conformance.Case{ID: "handshake", Spec: "§2.2"})
	hook(2, &conformance.Case{ID: "loss", Spec: "§3.2"})
	require.Equal(t, "\r\033[Kmrconform: case 1/18: handshake (§2.2)\r\033[Kmrconform: case 3/18: loss (§3.2)", w.String())
	w.Reset()
	l.clear()
	l.clear()
	require.Equal(t, "\r\033[K", w.String(), "cleared once")
}
