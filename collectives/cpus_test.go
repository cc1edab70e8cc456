package collectives

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/metaroce/metaroce/transport"
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

// TestHostCPUs: the host's online CPUs, or the cpuset of the process's
// cgroup where it has fewer (cgroup v2, v2 next to v1 hierarchies, and
// v1), found through /proc/self/cgroup; files that are missing or do not
// parse leave the online count.
func TestHostCPUs(t *testing.T) {
	const online = "/sys/devices/system/cpu/online"
	for _, c := range []struct {
		name  string
		files map[string]string
		want  int
	}{
		{"no cgroup", map[string]string{online: "0-63"}, 64},
		{"v2 container", map[string]string{online: "0-63", "/proc/self/cgroup": "0::/\n",
			"/sys/fs/cgroup/cpuset.cpus.effective": "0-1\n"}, 2},
		{"v2 job cgroup", map[string]string{online: "0-63", "/proc/self/cgroup": "0::/slurm/job_7/step_0\n",
			"/sys/fs/cgroup/slurm/job_7/step_0/cpuset.cpus.effective": "4-7,12-15"}, 8},
		{"v2 beside v1", map[string]string{online: "0-63", "/proc/self/cgroup": "9:name=systemd:/\n0::/box\n",
			"/sys/fs/cgroup/unified/box/cpuset.cpus.effective": "3"}, 1},
		{"v1 cpuset", map[string]string{online: "0-63", "/proc/self/cgroup": "4:memory:/a\n3:cpuset,cpu:/docker/abc\n0::/\n",
			"/sys/fs/cgroup/cpuset/docker/abc/cpuset.effective_cpus": "0-3"}, 4},
		{"cpuset of every CPU", map[string]string{online: "0-1", "/proc/self/cgroup": "0::/\n",
			"/sys/fs/cgroup/cpuset.cpus.effective": "0-1"}, 2},
		// A v1 container's cpuset hierarchy is mounted at its own
		// cgroup, which /proc/self/cgroup names by its host path.
		{"v1 container", map[string]string{online: "0-63", "/proc/self/cgroup": "3:cpuset:/docker/abc\n0::/\n",
			"/sys/fs/cgroup/cpuset/cpuset.effective_cpus": "0-1"}, 2},
		// A v2 cgroup without the cpuset controller runs on the CPUs of
		// its nearest ancestor that has it.
		{"v2 cpuset on an ancestor", map[string]string{online: "0-63", "/proc/self/cgroup": "0::/user.slice/user-1000.slice/session-2.scope\n",
			"/sys/fs/cgroup/cpuset.cpus.effective": "0-63", "/sys/fs/cgroup/user.slice/cpuset.cpus.effective": "0-3"}, 4},
		{"cpuset file missing", map[string]string{online: "0-63", "/proc/self/cgroup": "0::/user.slice\n"}, 64},
		{"cpuset file garbage", map[string]string{online: "0-63", "/proc/self/cgroup": "0::/\n",
			"/sys/fs/cgroup/cpuset.cpus.effective": "all"}, 64},
		{"cgroup file garbage", map[string]string{online: "0-7", "/proc/self/cgroup": "nonsense"}, 8},
	} {
		t.Run(c.name, func(t *testing.T) {
			require.Equal(t, c.want, hostCPUs(fakeFiles(c.files)))
		})
	}
	require.Equal(t, runtime.NumCPU(), hostCPUs(func(string) ([]byte, error) { return nil, errors.New("no /sys") }))
	require.GreaterOrEqual(t, HostCPUs(), 1)
}

// TestCgroupV1CpusetMount: a cgroup v1 cpuset is found where
// /proc/self/mountinfo says its hierarchy is mounted (a "cgroup" mount
// whose super options include cpuset): beside other controllers
// (/sys/fs/cgroup/cpuset,cpu, as systemd names a co-mounted hierarchy),
// elsewhere than /sys/fs/cgroup, at a path with an escaped space, and
// with the container's own cgroup as the mount's root. Before, only
// /sys/fs/cgroup/cpuset was read, and such a cpuset was missed. A mount
// table without a cpuset mount, or none, leaves that path; other cgroup
// mounts, and lines that do not parse, are skipped.
func TestCgroupV1CpusetMount(t *testing.T) {
	const (
		online = "/sys/devices/system/cpu/online"
		ext4   = "22 1 259:2 / / rw,relatime shared:1 - ext4 /dev/nvme0n1p2 rw\n"
		v2     = "25 22 0:23 / /sys/fs/cgroup/unified rw,nosuid shared:5 - cgroup2 cgroup2 rw,nsdelegate\n"
		memory = "31 24 0:28 / /sys/fs/cgroup/memory rw,nosuid shared:13 - cgroup cgroup rw,memory\n"
	)
	for _, c := range []struct {
		name  string
		files map[string]string
		want  int
	}{
		{"co-mounted with cpu", map[string]string{online: "0-63", "/proc/self/cgroup": "4:memory:/job_7\n3:cpuset,cpu:/job_7\n0::/\n",
			"/proc/self/mountinfo":                                  ext4 + v2 + memory + "30 24 0:27 / /sys/fs/cgroup/cpuset,cpu rw,nosuid,nodev shared:12 - cgroup cgroup rw,cpuset,cpu\n",
			"/sys/fs/cgroup/cpuset,cpu/job_7/cpuset.effective_cpus": "0-3"}, 4},
		{"mounted elsewhere", map[string]string{online: "0-63", "/proc/self/cgroup": "2:cpuset:/batch/9\n",
			"/proc/self/mountinfo":                         ext4 + "40 22 0:30 / /cgroup/cpuset rw,relatime - cgroup none rw,cpuset\n",
			"/cgroup/cpuset/batch/9/cpuset.effective_cpus": "8-9"}, 2},
		{"escaped mount point", map[string]string{online: "0-63", "/proc/self/cgroup": "2:cpuset:/a\n",
			"/proc/self/mountinfo":               "40 22 0:30 / /mnt/cg\\040v1 rw master:3 shared:7 - cgroup cg rw,cpuset\n",
			"/mnt/cg v1/a/cpuset.effective_cpus": "5"}, 1},
		{"container's cgroup as the mount's root", map[string]string{online: "0-63", "/proc/self/cgroup": "3:cpuset,cpu:/docker/abc/task\n",
			"/proc/self/mountinfo":                                            "50 40 0:27 /docker/abc /sys/fs/cgroup/cpuset,cpu ro,nosuid - cgroup cgroup rw,cpuset,cpu\n",
			"/sys/fs/cgroup/cpuset,cpu/task/cpuset.effective_cpus":            "0-5",
			"/sys/fs/cgroup/cpuset,cpu/docker/abc/task/cpuset.effective_cpus": "0-62"}, 6},
		{"no cpuset mount", map[string]string{online: "0-63", "/proc/self/cgroup": "3:cpuset:/x\n",
			"/proc/self/mountinfo":                          ext4 + memory + "garbage line\n- cgroup cgroup rw,cpuset\n",
			"/sys/fs/cgroup/cpuset/x/cpuset.effective_cpus": "0-6"}, 7},
		{"cpuset in another file system's options", map[string]string{online: "0-63", "/proc/self/cgroup": "3:cpuset:/x\n",
			"/proc/self/mountinfo":          "60 22 0:40 / /fake rw - tmpfs tmpfs rw,cpuset\n",
			"/fake/x/cpuset.effective_cpus": "0", "/sys/fs/cgroup/cpuset/x/cpuset.effective_cpus": "0-1"}, 2},
		{"no mount table", map[string]string{online: "0-63", "/proc/self/cgroup": "3:cpuset:/x\n",
			"/sys/fs/cgroup/cpuset/x/cpuset.effective_cpus": "0-2"}, 3},
	} {
		t.Run(c.name, func(t *testing.T) {
			require.Equal(t, c.want, hostCPUs(fakeFiles(c.files)))
		})
	}
}

// TestHostCPUsQuota: a CFS CPU quota (a Kubernetes CPU limit, docker
// --cpus) counts as its CPUs, rounded up, where it allows fewer than the
// host has online or the cpuset holds: cgroup v2's cpu.max and cgroup v1's
// cpu.cfs_quota_us over cpu.cfs_period_us, of the process's cgroup or of
// any ancestor (each bounds its subtree), or, where the hierarchy is
// mounted at the container's own cgroup, at the mount's root. No quota
// ("max", -1) or files that do not parse leave the other counts.
func TestHostCPUsQuota(t *testing.T) {
	const (
		online = "/sys/devices/system/cpu/online"
		pod    = "/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod1.slice"
		ctr    = pod + "/cri-containerd-abc.scope"
	)
	for _, c := range []struct {
		name  string
		files map[string]string
		want  int
	}{
		{"v2 container", map[string]string{online: "0-63", "/proc/self/cgroup": "0::/\n",
			"/sys/fs/cgroup/cpu.max": "200000 100000\n"}, 2},
		{"v2 rounds up", map[string]string{online: "0-63", "/proc/self/cgroup": "0::/\n",
			"/sys/fs/cgroup/cpu.max": "250000 100000\n"}, 3},
		{"v2 below one CPU", map[string]string{online: "0-63", "/proc/self/cgroup": "0::/\n",
			"/sys/fs/cgroup/cpu.max": "50000 100000\n"}, 1},
		{"v2 no quota", map[string]string{online: "0-63", "/proc/self/cgroup": "0::/\n",
			"/sys/fs/cgroup/cpu.max": "max 100000\n"}, 64},
		{"v2 quota above online", map[string]string{online: "0-63", "/proc/self/cgroup": "0::/\n",
			"/sys/fs/cgroup/cpu.max": "12800000 100000\n"}, 64},
		// Without a cgroup namespace the pod's and the container's
		// cgroups are both seen: the tighter one counts.
		{"v2 pod", map[string]string{online: "0-63", "/proc/self/cgroup": "0::" + ctr + "\n",
			"/sys/fs/cgroup" + pod + "/cpu.max": "400000 100000", "/sys/fs/cgroup" + ctr + "/cpu.max": "200000 100000"}, 2},
		{"v2 ancestor's quota", map[string]string{online: "0-63", "/proc/self/cgroup": "0::/batch.slice/job.scope\n",
			"/sys/fs/cgroup/batch.slice/cpu.max": "300000 100000", "/sys/fs/cgroup/batch.slice/job.scope/cpu.max": "max 100000"}, 3},
		{"v2 quota within a cpuset", map[string]string{online: "0-63", "/proc/self/cgroup": "0::/\n",
			"/sys/fs/cgroup/cpuset.cpus.effective": "0-3", "/sys/fs/cgroup/cpu.max": "200000 100000"}, 2},
		{"v2 cpuset within a quota", map[string]string{online: "0-63", "/proc/self/cgroup": "0::/\n",
			"/sys/fs/cgroup/cpuset.cpus.effective": "0-1", "/sys/fs/cgroup/cpu.max": "400000 100000"}, 2},
		{"v1", map[string]string{online: "0-63", "/proc/self/cgroup": "5:cpuset:/docker/abc\n4:cpu,cpuacct:/docker/abc\n0::/\n",
			"/sys/fs/cgroup/cpu,cpuacct/docker/abc/cpu.cfs_quota_us": "200000\n", "/sys/fs/cgroup/cpu,cpuacct/docker/abc/cpu.cfs_period_us": "100000\n"}, 2},
		{"v1 mounted as cpu", map[string]string{online: "0-63", "/proc/self/cgroup": "4:cpuacct,cpu:/docker/abc\n",
			"/sys/fs/cgroup/cpu/docker/abc/cpu.cfs_quota_us": "350000", "/sys/fs/cgroup/cpu/docker/abc/cpu.cfs_period_us": "100000"}, 4},
		// A v1 container's hierarchy is mounted at its own cgroup,
		// which /proc/self/cgroup names by its host path.
		{"v1 container", map[string]string{online: "0-63", "/proc/self/cgroup": "4:cpu,cpuacct:/docker/abc\n0::/\n",
			"/sys/fs/cgroup/cpu,cpuacct/cpu.cfs_quota_us": "150000", "/sys/fs/cgroup/cpu,cpuacct/cpu.cfs_period_us": "100000"}, 2},
		{"v1 no quota", map[string]string{online: "0-63", "/proc/self/cgroup": "4:cpu,cpuacct:/\n",
			"/sys/fs/cgroup/cpu,cpuacct/cpu.cfs_quota_us": "-1", "/sys/fs/cgroup/cpu,cpuacct/cpu.cfs_period_us": "100000"}, 64},
		{"v1 beside v2", map[string]string{online: "0-63", "/proc/self/cgroup": "4:cpu,cpuacct:/box\n0::/box\n",
			"/sys/fs/cgroup/cpu,cpuacct/box/cpu.cfs_quota_us": "100000", "/sys/fs/cgroup/cpu,cpuacct/box/cpu.cfs_period_us": "100000"}, 1},
		{"v1 period missing", map[string]string{online: "0-63", "/proc/self/cgroup": "4:cpu,cpuacct:/\n",
			"/sys/fs/cgroup/cpu,cpuacct/cpu.cfs_quota_us": "200000"}, 64},
		{"cpu.max garbage", map[string]string{online: "0-63", "/proc/self/cgroup": "0::/\n",
			"/sys/fs/cgroup/cpu.max": "lots"}, 64},
		{"cpu.max period zero", map[string]string{online: "0-63", "/proc/self/cgroup": "0::/\n",
			"/sys/fs/cgroup/cpu.max": "200000 0"}, 64},
	} {
		t.Run(c.name, func(t *testing.T) {
			require.Equal(t, c.want, hostCPUs(fakeFiles(c.files)))
		})
	}
}

// TestCgroupV1QuotaMount: a cgroup v1 CPU quota is found where
// /proc/self/mountinfo says the cpu controller's hierarchy is mounted (a
// "cgroup" mount whose super options include cpu): elsewhere than
// /sys/fs/cgroup, at a path with an escaped space, beside cpuset, and
// with the container's own cgroup as the mount's root. Before, only
// /sys/fs/cgroup/<controllers> and /sys/fs/cgroup/cpu were read, and such
// a quota was missed, or one of the host's cgroups read in its place. The
// option is matched whole: mounts of cpuset or cpuacct alone are other
// hierarchies. A mount table without a cpu mount, or none, leaves the
// fixed paths; other file systems' mounts are skipped.
func TestCgroupV1QuotaMount(t *testing.T) {
	const (
		online = "/sys/devices/system/cpu/online"
		ext4   = "22 1 259:2 / / rw,relatime shared:1 - ext4 /dev/nvme0n1p2 rw\n"
		memory = "31 24 0:28 / /sys/fs/cgroup/memory rw,nosuid shared:13 - cgroup cgroup rw,memory\n"
		period = "100000" // µs: 100 ms
	)
	// quota adds to files the v1 quota of the cgroup at dir: q µs of
	// CPU time in every period.
	quota := func(files map[string]string, dir, q string) map[string]string {
		files[dir+"/cpu.cfs_quota_us"], files[dir+"/cpu.cfs_period_us"] = q+"\n", period+"\n"
		return files
	}
	for _, c := range []struct {
		name  string
		files map[string]string
		want  int
	}{
		{"mounted elsewhere", quota(map[string]string{online: "0-63", "/proc/self/cgroup": "4:cpu,cpuacct:/batch/9\n0::/\n",
			"/proc/self/mountinfo": ext4 + memory + "40 22 0:30 / /cgroup/cpu rw,relatime - cgroup none rw,cpu,cpuacct\n"},
			"/cgroup/cpu/batch/9", "200000"), 2},
		{"escaped mount point", quota(map[string]string{online: "0-63", "/proc/self/cgroup": "4:cpu:/a\n",
			"/proc/self/mountinfo": "40 22 0:30 / /mnt/cg\\040cpu rw master:3 shared:7 - cgroup cg rw,cpu\n"},
			"/mnt/cg cpu/a", "300000"), 3},
		{"co-mounted with cpuset", quota(map[string]string{online: "0-63", "/proc/self/cgroup": "4:memory:/job_7\n3:cpuset,cpu:/job_7\n0::/\n",
			"/proc/self/mountinfo": ext4 + memory + "30 24 0:27 / /sys/fs/cgroup/cpuset,cpu rw,nosuid,nodev shared:12 - cgroup cgroup rw,cpuset,cpu\n"},
			"/sys/fs/cgroup/cpuset,cpu/job_7", "150000"), 2},
		// Without a cgroup namespace, the container's hierarchy is
		// mounted at its own cgroup, and the host path of its task
		// cgroup, which /proc/self/cgroup names, is another cgroup
		// there (or none).
		{"container's cgroup as the mount's root", quota(quota(map[string]string{online: "0-63", "/proc/self/cgroup": "4:cpu,cpuacct:/docker/abc/task\n",
			"/proc/self/mountinfo": "50 40 0:27 /docker/abc /sys/fs/cgroup/cpu,cpuacct ro,nosuid - cgroup cgroup rw,cpu,cpuacct\n"},
			"/sys/fs/cgroup/cpu,cpuacct/task", "150000"),
			"/sys/fs/cgroup/cpu,cpuacct/docker/abc/task", "600000"), 2},
		// cpuset and cpuacct, each mounted alone, are not the cpu
		// controller's hierarchy: their files are not its quota.
		{"cpuset and cpuacct alone", quota(quota(quota(map[string]string{online: "0-63", "/proc/self/cgroup": "5:cpuset:/a\n4:cpu:/a\n3:cpuacct:/a\n",
			"/proc/self/mountinfo": "30 24 0:27 / /m/cpuset rw - cgroup cgroup rw,cpuset\n" +
				"31 24 0:28 / /m/cpuacct rw - cgroup cgroup rw,cpuacct\n" +
				"32 24 0:29 / /m/cpu rw - cgroup cgroup rw,cpu\n"},
			"/m/cpuset/a", "100000"), "/m/cpuacct/a", "100000"), "/m/cpu/a", "500000"), 5},
		{"no cpu mount", quota(map[string]string{online: "0-63", "/proc/self/cgroup": "4:cpu,cpuacct:/x\n",
			"/proc/self/mountinfo": ext4 + memory + "garbage line\n- cgroup cgroup rw,cpu\n"},
			"/sys/fs/cgroup/cpu,cpuacct/x", "700000"), 7},
		{"cpu in another file system's options", quota(quota(map[string]string{online: "0-63", "/proc/self/cgroup": "4:cpu:/x\n",
			"/proc/self/mountinfo": "60 22 0:40 / /fake rw - tmpfs tmpfs rw,cpu\n"},
			"/fake/x", "100000"), "/sys/fs/cgroup/cpu/x", "400000"), 4},
		{"no mount table", quota(map[string]string{online: "0-63", "/proc/self/cgroup": "4:cpuacct,cpu:/x\n"},
			"/sys/fs/cgroup/cpu/x", "250000"), 3},
	} {
		t.Run(c.name, func(t *testing.T) {
			require.Equal(t, c.want, hostCPUs(fakeFiles(c.files)))
		})
	}
}

// TestFitSpin: spinning goes off where the launcher's ranks outnumber the
// host's CPUs and the process may run on all of them, and yields the CPU
// to the other processes where the launcher pinned it to fewer; only on
// MetaRoCE and where the user left Spin and WaitSpin at their defaults.
func TestFitSpin(t *testing.T) {
	const (
		unchanged = iota
		noSpin
		yieldCPU
	)
	for _, c := range []struct {
		name, source   string
		local          int
		host, allowed  int
		transport      string
		spin, waitSpin int
		yield          bool
		want           int
		says           string
	}{
		{name: "oversubscribed", local: 4, host: 2, allowed: 2, transport: TransportMetaRoCE, want: noSpin,
			says: "4 ranks on this host share 2 CPUs: event-loop spinning off"},
		{name: "a CPU per rank", local: 2, host: 2, allowed: 2, transport: TransportMetaRoCE},
		{name: "no launcher size", local: 0, host: 2, allowed: 2, transport: TransportMetaRoCE},
		{name: "pinned, a CPU each", local: 2, host: 2, allowed: 1, transport: TransportMetaRoCE},
		{name: "pinned, sharing", local: 4, host: 2, allowed: 1, transport: TransportMetaRoCE, want: yieldCPU,
			says: "4 ranks on this host share 2 CPUs, this one confined to 1 CPU: spinning yields the CPU to the other ranks"},
		{name: "confined to several", local: 8, host: 4, allowed: 2, transport: TransportMetaRoCE, want: yieldCPU,
			says: "8 ranks on this host share 4 CPUs, this one confined to 2 CPUs: spinning yields the CPU to the other ranks"},
		{name: "pinned, user yield", local: 4, host: 2, allowed: 1, transport: TransportMetaRoCE, yield: true},
		{name: "tcp", local: 4, host: 2, allowed: 2, transport: TransportTCP},
		{name: "tcp, pinned", local: 4, host: 2, allowed: 1, transport: TransportTCP},
		{name: "user spin", local: 4, host: 2, allowed: 2, transport: TransportMetaRoCE, spin: 1000},
		{name: "user spin, pinned", local: 4, host: 2, allowed: 1, transport: TransportMetaRoCE, spin: 1000},
		{name: "user wait spin", local: 4, host: 2, allowed: 2, transport: TransportMetaRoCE, waitSpin: -1},
		// In-process ranks share one Go scheduler: they spin up to
		// inProcessSpinPerCPU ranks per CPU, and never yield the CPU.
		{name: "in process, 2 per CPU", source: sourceLocal, local: 4, host: 2, allowed: 2, transport: TransportMetaRoCE},
		{name: "in process, more", source: sourceLocal, local: 5, host: 2, allowed: 2, transport: TransportMetaRoCE, want: noSpin,
			says: "5 ranks share the 2 CPUs available to this process: event-loop spinning off"},
		{name: "in process under a cpuset", source: sourceLocal, local: 5, host: 64, allowed: 2, transport: TransportMetaRoCE, want: noSpin,
			says: "5 ranks share this process's 2 CPUs: event-loop spinning off"},
		{name: "in process, pinned, within", source: sourceLocal, local: 4, host: 64, allowed: 2, transport: TransportMetaRoCE},
		{name: "in process, pinned to one", source: sourceLocal, local: 3, host: 2, allowed: 1, transport: TransportMetaRoCE, want: noSpin,
			says: "3 ranks share this process's 1 CPU: event-loop spinning off"},
	} {
		t.Run(c.name, func(t *testing.T) {
			cfg := Config{Transport: c.transport}
			cfg.UDP.Spin, cfg.UDP.WaitSpin = time.Duration(c.spin), time.Duration(c.waitSpin)
			cfg.UDP.YieldCPU = c.yield
			before := cfg.UDP
			says := fitSpin(&cfg, Bootstrap{NRanks: 8, LocalSize: c.local, Source: c.source}, c.host, c.allowed)
			require.Equal(t, c.says, says)
			switch c.want {
			case noSpin:
				require.Negative(t, cfg.UDP.Spin)
				require.Negative(t, cfg.UDP.WaitSpin)
				require.Equal(t, before.YieldCPU, cfg.UDP.YieldCPU)
			case yieldCPU:
				require.True(t, cfg.UDP.YieldCPU)
				require.Equal(t, before.Spin, cfg.UDP.Spin)
				require.Equal(t, before.WaitSpin, cfg.UDP.WaitSpin)
			default:
				require.Empty(t, says)
				require.Equal(t, before, cfg.UDP)
			}
		})
	}
}

// TestStarvedRanksAreNotCalledDead: the dead-peer and deadline errors of
// in-process ranks that outnumber the CPUs say that no rank died, and keep
// their cause; other errors, and ranks with a
// CPU each, are left alone.
func TestStarvedRanksAreNotCalledDead(t *testing.T) {
	dead := fmt.Errorf("rank 3: %w", transport.ErrPeerDead)
	late := fmt.Errorf("allgather: %w", context.DeadlineExceeded)
	other := errors.New("bad buffer")
	for _, c := range []struct {
		err     error
		n, cpus int
		hint    bool
	}{
		{dead, 8, 2, true},
		{late, 8, 2, true},
		{dead, 2, 2, false},
		{other, 8, 2, false},
		{nil, 8, 2, false},
	} {
		got := starved(c.err, c.n, c.cpus)
		if c.err == nil {
			require.NoError(t, got)
			continue
		}
		require.ErrorIs(t, got, c.err)
		if c.hint {
			require.ErrorContains(t, got, fmt.Sprintf("all %d ranks run in this process, on %d CPUs: none died; a rank that stopped answering was starved of CPU, or did not make the call", c.n, c.cpus))
		} else {
			require.Equal(t, c.err.Error(), got.Error())
		}
	}
}

// TestLocalRanksBeyondSpinLimitSayWhy: in-process ranks beyond
// inProcessSpinPerCPU per CPU run without spinning, and their Describe
// says so.
func TestLocalRanksBeyondSpinLimitSayWhy(t *testing.T) {
	host := HostCPUs()
	if host > 4 || runtime.NumCPU() < host {
		t.Skipf("needs at most 4 CPUs, all usable (have %d of %d): the test launches %d ranks per CPU", runtime.NumCPU(), host, inProcessSpinPerCPU)
	}
	n := inProcessSpinPerCPU*host + 1
	var mu sync.Mutex
	var lines []string
	err := LaunchLocal(context.Background(), n, Config{Transport: TransportMetaRoCE, Timeout: 30 * time.Second}, func(c *Comm) error {
		mu.Lock()
		lines = append(lines, c.Describe())
		mu.Unlock()
		return c.Barrier(context.Background())
	})
	require.NoError(t, err)
	require.Len(t, lines, n)
	for _, l := range lines {
		require.Contains(t, l, fmt.Sprintf("; %d ranks share the %d CPUs available to this process: event-loop spinning off", n, host))
	}
}

// fakeFiles reads files from the map, path to contents, as hostCPUs'
// reader does from the file system; a path not in it does not exist.
func fakeFiles(files map[string]string) func(string) ([]byte, error) {
	return func(name string) ([]byte, error) {
		if v, ok := files[name]; ok {
			return []byte(v), nil
		}
		return nil, errors.New("no such file")
	}
}
