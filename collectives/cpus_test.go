package collectives

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"
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

// TestFitSpin: spinning goes off only where the launcher's ranks outnumber
// the host's CPUs, the process is not pinned to fewer, the transport is
// MetaRoCE and the user left Spin and WaitSpin at their defaults.
func TestFitSpin(t *testing.T) {
	for _, c := range []struct {
		name           string
		local          int
		host, allowed  int
		transport      string
		spin, waitSpin int
		want           bool
	}{
		{name: "oversubscribed", local: 4, host: 2, allowed: 2, transport: TransportMetaRoCE, want: true},
		{name: "a CPU per rank", local: 2, host: 2, allowed: 2, transport: TransportMetaRoCE},
		{name: "no launcher size", local: 0, host: 2, allowed: 2, transport: TransportMetaRoCE},
		{name: "pinned", local: 4, host: 2, allowed: 1, transport: TransportMetaRoCE},
		{name: "tcp", local: 4, host: 2, allowed: 2, transport: TransportTCP},
		{name: "user spin", local: 4, host: 2, allowed: 2, transport: TransportMetaRoCE, spin: 1000},
		{name: "user wait spin", local: 4, host: 2, allowed: 2, transport: TransportMetaRoCE, waitSpin: -1},
	} {
		t.Run(c.name, func(t *testing.T) {
			cfg := Config{Transport: c.transport}
			cfg.UDP.Spin, cfg.UDP.WaitSpin = time.Duration(c.spin), time.Duration(c.waitSpin)
			before := cfg.UDP
			got := fitSpin(&cfg, Bootstrap{NRanks: 8, LocalSize: c.local}, c.host, c.allowed)
			require.Equal(t, c.want, got)
			if c.want {
				require.Negative(t, cfg.UDP.Spin)
				require.Negative(t, cfg.UDP.WaitSpin)
			} else {
				require.Equal(t, before.Spin, cfg.UDP.Spin)
				require.Equal(t, before.WaitSpin, cfg.UDP.WaitSpin)
			}
		})
	}
}
