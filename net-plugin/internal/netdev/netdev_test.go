package netdev

import (
	"testing"

	"github.com/stretchr/testify/require"
)

func TestFilter(t *testing.T) {
	for _, tc := range []struct {
		spec  string
		name  string
		match bool
	}{
		{"eth", "eth0", true},
		{"eth", "ens1", false},
		{"=eth", "eth0", false},
		{"=eth0", "eth0", true},
		{"^lo,docker", "lo", false},
		{"^lo,docker", "eth1", true},
		{"^=lo", "lo0", true},
		{"ib,eth", "ib0", true},
	} {
		f, err := ParseFilter(tc.spec)
		require.NoError(t, err)
		require.Equal(t, tc.match, f.Match(tc.name), "%s vs %s", tc.spec, tc.name)
	}
	for _, bad := range []string{",", "^", "a b", "x/y"} {
		_, err := ParseFilter(bad)
		require.Error(t, err, "spec %q", bad)
	}
	f, err := ParseFilter("  ")
	require.NoError(t, err)
	require.True(t, f.Auto())
}

func TestSelectLoopback(t *testing.T) {
	f, err := ParseFilter("=lo")
	require.NoError(t, err)
	ifs, err := Select(f)
	require.NoError(t, err)
	require.Len(t, ifs, 1)
	require.Equal(t, "lo", ifs[0].Name)
	require.True(t, ifs[0].Loopback)
	require.Equal(t, "127.0.0.1", ifs[0].Addr.String())

	f, err = ParseFilter("=no-such-interface")
	require.NoError(t, err)
	_, err = Select(f)
	require.ErrorContains(t, err, "METAROCE_IFNAMES")
}
