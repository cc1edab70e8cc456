package main

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/metaroce/metaroce/collectives"
)

// TestApplyCPUShare: an oversubscribed host turns spinning off, says so in
// the header and suggests pinning; a user's GOMAXPROCS is left alone; a host
// with a CPU per rank changes nothing.
func TestApplyCPUShare(t *testing.T) {
	l := &hostLauncher{o: &options{}, boot: &collectives.Bootstrap{NRanks: 4, LocalSize: 4, Source: "openmpi"}}
	l.applyCPUShare(2, true)
	require.True(t, l.noSpin)
	require.Equal(t, "; 4 ranks on this host share 2 CPUs: no event-loop spinning per rank (ranks pinned to cores run faster: mpirun --bind-to core:overload-allowed)", l.share)
	for source, hint := range map[string]string{"slurm": ": srun --cpu-bind=cores", "torchrun": "", "env": ""} {
		l := &hostLauncher{o: &options{}, boot: &collectives.Bootstrap{NRanks: 4, LocalSize: 4, Source: source}}
		l.applyCPUShare(2, true)
		require.True(t, strings.HasSuffix(l.share, "(ranks pinned to cores run faster"+hint+")"), "%s: %s", source, l.share)
	}
	cfg := l.config(transportMetaRoCE)
	require.Negative(t, cfg.UDP.Spin)
	require.Negative(t, cfg.UDP.WaitSpin)

	l = &hostLauncher{o: &options{}, boot: &collectives.Bootstrap{NRanks: 2, LocalSize: 2, Source: "openmpi"}}
	l.applyCPUShare(1, true)
	require.Equal(t, "; 2 ranks on this host share 1 CPU: no event-loop spinning per rank", l.share)

	l = &hostLauncher{o: &options{}, boot: &collectives.Bootstrap{NRanks: 4, LocalSize: 2}}
	l.applyCPUShare(64, true)
	require.False(t, l.noSpin)
	require.Empty(t, l.share)
	require.Zero(t, l.config(transportMetaRoCE).UDP.Spin)
}
