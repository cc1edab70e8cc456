package main

import (
	"bytes"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestUsage(t *testing.T) {
	for _, args := range [][]string{nil, {"--self", "--addr", "127.0.0.1:1"}, {"--addr", "nonsense"}, {"--bogus"}} {
		var out, errb bytes.Buffer
		require.Equal(t, 2, run(args, &out, &errb), "%v", args)
		require.NotEmpty(t, errb.String(), "%v", args)
	}
}

// TestAddrOnly runs against an address where nothing answers: the handshake
// cases fail (exit 1) and the cases that need control are skipped.
func TestAddrOnly(t *testing.T) {
	var out, errb bytes.Buffer
	code := run([]string{"--addr", "127.0.0.1:9", "--timeout", "30s"}, &out, &errb)
	require.Equal(t, 1, code)
	require.Contains(t, out.String(), "not ok 1 - handshake")
	require.Contains(t, out.String(), "# SKIP")
}
