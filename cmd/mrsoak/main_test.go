package main

import (
	"bytes"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestUsageErrors(t *testing.T) {
	for _, args := range [][]string{{"-ranks", "1"}, {"-ops", "1"}, {"-bogus"}} {
		var out, errb bytes.Buffer
		require.Equal(t, 2, run(args, &out, &errb), "%v", args)
		require.NotEmpty(t, errb.String())
	}
}

func TestShortRun(t *testing.T) {
	if testing.Short() {
		t.Skip("runs the soak for a second")
	}
	var out, errb bytes.Buffer
	code := run([]string{"-duration", "1s", "-ops", "4", "-maxcount", "4096", "-json"}, &out, &errb)
	require.Equal(t, 0, code, "stdout %s\nstderr %s", out.String(), errb.String())
	require.Contains(t, out.String(), `"Corrupted": 0`)
}
