package main

import (
	"bytes"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestUsageErrors(t *testing.T) {
	for _, args := range [][]string{{"-ranks", "1"}, {"-ops", "1"}, {"-bogus"}, {"-plugin-every", "1"}, {"-rounds", "-1"}} {
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

// TestNetlabRun asks for the namespace fabric: as root with nftables it
// runs there, elsewhere it says why and soaks with driver-level faults;
// either way the short run is healthy.
func TestNetlabRun(t *testing.T) {
	if testing.Short() {
		t.Skip("runs the soak for a few rounds")
	}
	var out, errb bytes.Buffer
	code := run([]string{"--netlab", "-rounds", "3", "-ops", "4", "-maxcount", "4096"}, &out, &errb)
	require.Equal(t, 0, code, "stdout %s\nstderr %s", out.String(), errb.String())
	require.Contains(t, out.String(), "healthy true")
	if !strings.Contains(out.String(), "soak (netlab faults)") {
		require.Contains(t, errb.String(), "netlab mode not possible")
	}
}
