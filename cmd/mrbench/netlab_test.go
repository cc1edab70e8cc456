package main

import (
	"context"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
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

// TestLaunchedAcrossLabHosts: two ranks launched by hand (METAROCE_RANK,
// METAROCE_NRANKS, METAROCE_ROOT), each a process in its own lab host,
// find each other over the fabric: each binds the address its host
// reaches the rendezvous from, not loopback, where the peer would have
// dialled its own host. Skips where netlab cannot build a fabric.
func TestLaunchedAcrossLabHosts(t *testing.T) {
	if err := netlab.Available(); err != nil {
		t.Skip(err)
	}
	lab, err := netlab.New(netlab.Config{Planes: 1, Links: 2})
	require.NoError(t, err)
	defer lab.Close()
	root := netip.AddrPortFrom(lab.Host(1).Addr(0), 29517).String()
	out := runLabRanks(t, lab, "METAROCE_ROOT="+root)
	assert.Contains(t, out, "# transport: metaroce: 1 plane(s) ["+lab.Host(1).Addr(0).String()+":")
	assert.Regexp(t, `# datapath: 1 plane\(s\), 4 path\(s\) per plane`, out)
	assert.Contains(t, out, "# Out of bounds values : 0 OK")
}

// TestLaunchedAcrossLabHostsByName: as TestLaunchedAcrossLabHosts, with
// the rendezvous named by rank 0's host name, which rank 0's host maps to
// 127.0.1.1 (as Debian's /etc/hosts does) and the other host to rank 0's
// address, and a launcher that says the job spans hosts (one local rank
// of two). Rank 0 listens on every interface and binds the address of its
// default route; before, it listened on 127.0.1.1 and rank 1 was refused
// until the deadline.
func TestLaunchedAcrossLabHostsByName(t *testing.T) {
	if err := netlab.Available(); err != nil {
		t.Skip(err)
	}
	lab, err := netlab.New(netlab.Config{Planes: 1, Links: 2})
	require.NoError(t, err)
	defer lab.Close()
	const name = "mrrank0"
	// ip netns exec mounts /etc/netns/NS/hosts over /etc/hosts.
	if _, err := os.Stat("/etc/netns"); os.IsNotExist(err) {
		t.Cleanup(func() { _ = os.Remove("/etc/netns") }) // only if left empty
	}
	for h, addr := range map[int]string{1: "127.0.1.1", 2: lab.Host(1).Addr(0).String()} {
		dir := filepath.Join("/etc/netns", lab.Host(h).Namespace())
		require.NoError(t, os.MkdirAll(dir, 0o755))
		t.Cleanup(func() { _ = os.RemoveAll(dir) })
		require.NoError(t, os.WriteFile(filepath.Join(dir, "hosts"), []byte("127.0.0.1 localhost\n"+addr+" "+name+"\n"), 0o644))
	}
	route := lab.Command(1, "ip", "route", "add", "default", "dev", lab.Host(1).Interface(0))
	out, err := route.CombinedOutput()
	require.NoError(t, err, "%s", out)
	got := runLabRanks(t, lab, "METAROCE_ROOT="+name+":29517", "METAROCE_LOCAL_SIZE=1")
	assert.Contains(t, got, "# transport: metaroce: 1 plane(s) ["+lab.Host(1).Addr(0).String()+":")
	assert.Contains(t, got, "# Out of bounds values : 0 OK")
}

// runLabRanks runs this test binary as mrbench in lab hosts 1 and 2, as
// ranks 0 and 1 of a job launched by hand with env besides METAROCE_RANK
// and METAROCE_NRANKS, requires both to succeed within a minute, and
// returns rank 0's output.
func runLabRanks(t *testing.T, lab *netlab.Lab, env ...string) string {
	t.Helper()
	self, err := os.Executable()
	require.NoError(t, err)
	args := []string{"-b", "64K", "-e", "64K", "-n", "2", "-w", "1", "-T", "30s"}
	command := func(ctx context.Context, r int) *exec.Cmd {
		c := lab.Command(r+1, self)
		return exec.CommandContext(ctx, c.Path, c.Args[1:]...)
	}
	outs, errs, codes := runRanks(t, command, [2][]string{args, args}, env...)
	for r := range 2 {
		require.Equal(t, 0, codes[r], "rank %d stderr: %s", r, errs[r].String())
	}
	return outs[0].String()
}
