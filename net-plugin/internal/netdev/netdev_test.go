package netdev

import (
	"fmt"
	"net"
	"net/netip"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
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

// TestFilterErrorQuotesTheValueSet: a spec that names no interface is
// refused with the value the user set, not with what is left of it once
// the '^' and '=' markers are taken off (which reads as an empty setting).
func TestFilterErrorQuotesTheValueSet(t *testing.T) {
	for _, spec := range []string{"^", "=", "^=", "^,", " , "} {
		_, err := ParseFilter(spec)
		require.ErrorContains(t, err, fmt.Sprintf("METAROCE_IFNAMES=%q", strings.TrimSpace(spec)), "spec %q", spec)
	}
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

func TestAutoSkipsVirtual(t *testing.T) {
	for name, want := range map[string]bool{
		"eth0": false, "ens1f0np0": false, "enp65s0": false, "ib0": false, "bond0": false,
		"docker0": true, "veth1a2b": true, "br-9f": true, "virbr0": true, "cni0": true,
		"flannel.1": true, "cali123": true, "cilium_host": true, "kube-ipvs0": true,
		"vxlan.calico": true, "tunl0": true, "weave": true, "tailscale0": true, "wg0": true,
	} {
		if virtual(name) != want {
			t.Errorf("virtual(%q) = %v, want %v", name, !want, want)
		}
	}
}

// TestUsableFlags: an interface is a plane only when it is up and has a
// carrier (up without one, a veth whose peer is down, drops all); named by
// its exact name, up is enough, so that every host of a job gets as many
// planes, and the datapath fails over from the dark one. A prefix or an
// exclusion list does not name one.
func TestUsableFlags(t *testing.T) {
	for _, tc := range []struct {
		flags          net.Flags
		auto, explicit bool
	}{
		{net.FlagUp | net.FlagRunning | net.FlagBroadcast, true, true},
		{net.FlagUp | net.FlagRunning | net.FlagLoopback, true, true},
		{net.FlagUp | net.FlagBroadcast, false, true},
		{net.FlagRunning, false, false},
		{0, false, false},
	} {
		assert.Equal(t, tc.auto, usable(tc.flags, false), "automatic, %v", tc.flags)
		assert.Equal(t, tc.explicit, usable(tc.flags, true), "by exact name, %v", tc.flags)
	}
	for spec, want := range map[string]bool{"": false, "=eth0,eth1": true, "eth": false, "^docker,lo": false, "^=eth2": false} {
		f, err := ParseFilter(spec)
		require.NoError(t, err)
		assert.Equal(t, want, f.keepsDark(), "METAROCE_IFNAMES=%q", spec)
	}
}

func TestPickAddr(t *testing.T) {
	ipn := func(s string) net.Addr {
		p := netip.MustParsePrefix(s)
		return &net.IPNet{IP: p.Addr().AsSlice(), Mask: net.CIDRMask(p.Bits(), p.Addr().BitLen())}
	}
	tests := []struct {
		addrs     []net.Addr
		linkLocal bool
		want      string
	}{
		{[]net.Addr{ipn("169.254.3.1/16"), ipn("10.1.2.3/24")}, false, "10.1.2.3"},
		{[]net.Addr{ipn("169.254.3.1/16")}, false, ""},
		{[]net.Addr{ipn("169.254.3.1/16")}, true, "169.254.3.1"},
		{[]net.Addr{ipn("fe80::1/64"), ipn("2001:db8::5/64")}, false, "2001:db8::5"},
		{[]net.Addr{ipn("2001:db8::5/64"), ipn("192.168.1.9/24")}, false, "192.168.1.9"},
	}
	for _, tc := range tests {
		got, ok := pickAddr(tc.addrs, tc.linkLocal)
		if tc.want == "" {
			if ok {
				t.Errorf("%v: picked %v, want none", tc.addrs, got)
			}
			continue
		}
		if !ok || got.String() != tc.want {
			t.Errorf("%v (link-local %v): %v %v, want %s", tc.addrs, tc.linkLocal, got, ok, tc.want)
		}
	}
}

// TestSelectNoMatchNamesValueAndInterfaces: a filter that matches no usable
// interface fails with ErrNoMatch (the user's to fix), quoting the value set
// and listing the interfaces there are.
func TestSelectNoMatchNamesValueAndInterfaces(t *testing.T) {
	f, err := ParseFilter("=nosuch0")
	require.NoError(t, err)
	_, err = Select(f)
	require.ErrorIs(t, err, ErrNoMatch)
	require.ErrorContains(t, err, `METAROCE_IFNAMES="=nosuch0"`)
	require.ErrorContains(t, err, "lo", "loopback is running with an address")
}
