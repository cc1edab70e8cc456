package main

import (
	"testing"

	"github.com/metaroce/metaroce/netlab"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestNetlabRun runs a small sweep over a namespace fabric where netlab can
// build one (root, iproute2, nftables): two ranks, one per lab host, both
// transports, per-path counters. Elsewhere --netlab must fail with netlab's
// reason rather than run on loopback.
func TestNetlabRun(t *testing.T) {
	args := []string{"--netlab", "-b", "1K", "-e", "256K", "-f", "16", "-n", "2", "-w", "1", "-v", "--timeout", "20s"}
	if err := netlab.Available(); err != nil {
		code, out, errs := runMrbench(t, args...)
		assert.Equal(t, exitUsage, code)
		assert.Empty(t, out)
		assert.Contains(t, errs, "--netlab builds a namespace fabric")
		assert.Contains(t, errs, "netlab unavailable")
		return
	}
	code, out, errs := runMrbench(t, args...)
	require.Equal(t, 0, code, "stderr: %s\nstdout: %s", errs, out)
	tables, err := parseNCCLTests(out)
	require.NoError(t, err, out)
	require.Len(t, tables, 2, "MetaRoCE then TCP")
	for _, tab := range tables {
		assert.Equal(t, "OK", tab.Status)
		require.Len(t, tab.Rows, 3, "1 KiB, 16 KiB, 256 KiB")
		for _, r := range tab.Rows {
			assert.Zero(t, r.OutOfPlace.Wrong)
			assert.Zero(t, r.InPlace.Wrong)
		}
	}
	assert.Contains(t, out, "2 ranks on 1 host(s), launcher: netlab")
	assert.Contains(t, out, "# transport: metaroce: 1 plane(s) [198.18.0.2:")
	assert.Regexp(t, `# datapath: 1 plane\(s\), 4 path\(s\) per plane, .*max datagram \d+ B, p0 mtu \d+`, out)
	assert.Regexp(t, `# datapath: kernel TCP over p0 mtu \d+`, out)
	assert.Regexp(t, `(?m)^#   path plane 0 entropy +\d+`, out)
}

// TestNetlabUsage: requests --netlab can never satisfy exit 2 before any
// fabric is built.
func TestNetlabUsage(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--netlab", "-np", "4"}, "-np 4 is not possible"},
		{[]string{"--netlab", "--backend", "rccl"}, "host backend only"},
	} {
		code, _, errs := runMrbench(t, tc.args...)
		assert.Equal(t, exitUsage, code, "%v", tc.args)
		assert.Contains(t, errs, tc.want, "%v", tc.args)
	}
}
