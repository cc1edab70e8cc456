package main

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/metaroce/metaroce/collectives"
)

func TestCountCPUList(t *testing.T) {
	for _, c := range []struct {
		in   string
		want int
		err  bool
	}{
		{in: "0", want: 1},
		{in: "0-1", want: 2},
		{in: "0-3,8,10-11", want: 7},
		{in: "", err: true},
		{in: "3-1", err: true},
		{in: "0-x", err: true},
	} {
		n, err := countCPUList(c.in)
		if c.err {
			require.Error(t, err, "%q", c.in)
			continue
		}
		require.NoError(t, err, "%q", c.in)
		require.Equal(t, c.want, n, "%q", c.in)
	}
}

// TestApplyCPUShare: an oversubscribed host turns spinning off and says so in
// the header; a user's GOMAXPROCS is left alone; a host with a CPU per rank
// changes nothing.
func TestApplyCPUShare(t *testing.T) {
	l := &hostLauncher{o: &options{}, boot: &collectives.Bootstrap{NRanks: 4, LocalSize: 4}}
	l.applyCPUShare(2, true)
	require.True(t, l.noSpin)
	require.Equal(t, "; 4 ranks share this host's 2 CPUs: no event-loop spinning per rank", l.share)
	cfg := l.config(transportMetaRoCE)
	require.Negative(t, cfg.UDP.Spin)
	require.Negative(t, cfg.UDP.WaitSpin)

	l = &hostLauncher{o: &options{}, boot: &collectives.Bootstrap{NRanks: 4, LocalSize: 2}}
	l.applyCPUShare(64, true)
	require.False(t, l.noSpin)
	require.Empty(t, l.share)
	require.Zero(t, l.config(transportMetaRoCE).UDP.Spin)
}
