package collectives

import (
	"fmt"
	"os"
	"path"
	"runtime"
	"slices"
	"strconv"
	"strings"
)

// HostCPUs is the number of CPUs this host's ranks share: the CPUs the
// host has online, whatever this process's own affinity (runtime.NumCPU
// counts only the CPUs it may run on), or fewer where the process's
// cgroup confines it to a cpuset, as a container started with
// --cpuset-cpus or a Slurm job's allocation does, or limits it to a CPU
// quota, as a Kubernetes CPU limit or docker --cpus does (cgroupQuotaCPUs:
// the quota's CPUs, rounded up): every rank of the container or job
// shares those. The least of the three counts; runtime.NumCPU where the
// kernel says none of them.
func HostCPUs() int { return hostCPUs(os.ReadFile) }

// hostCPUs is HostCPUs reading files with read.
func hostCPUs(read func(string) ([]byte, error)) int {
	n := cpuListFile(read, "/sys/devices/system/cpu/online")
	if n < 1 {
		n = runtime.NumCPU()
	}
	for _, c := range []int{cgroupCPUs(read), cgroupQuotaCPUs(read)} {
		if c > 0 && c < n {
			n = c
		}
	}
	return n
}

// cgroupCPUs counts the CPUs of this process's cgroup cpuset, or returns 0
// where it finds none. /proc/self/cgroup names the process's cgroup in
// each hierarchy: a cgroup v2 line ("0::/path") points into the unified
// hierarchy, mounted at /sys/fs/cgroup (or /sys/fs/cgroup/unified next to
// v1 hierarchies), whose cpuset.cpus.effective lists the CPUs; a v1 line
// whose controllers include cpuset ("3:cpuset:/path") into the cpuset
// hierarchy, mounted where /proc/self/mountinfo says (v1Mounts: alone at
// /sys/fs/cgroup/cpuset, or beside other controllers, as at
// /sys/fs/cgroup/cpuset,cpu), whose cpuset.effective_cpus does (or the
// nearest ancestor's: nearestCPUList). Inside a container with its own
// cgroup namespace the paths are the container's own ("/"), and its files
// its cpuset.
func cgroupCPUs(read func(string) ([]byte, error)) int {
	for _, g := range ownCgroups(read) {
		switch {
		case g.unified():
			for _, m := range unifiedMounts {
				if n := nearestCPUList(read, m, g.dir, "cpuset.cpus.effective"); n > 0 {
					return n
				}
			}
		case g.has("cpuset"):
			mounts := v1Mounts(read, "cpuset")
			if len(mounts) == 0 {
				// No mount table, or no cpuset mount in it: the
				// path where systemd and container runtimes mount
				// the cpuset hierarchy when it is alone.
				mounts = []cgroupMount{{root: "/", point: "/sys/fs/cgroup/cpuset"}}
			}
			for _, m := range mounts {
				if n := nearestCPUList(read, m.point, m.dir(g.dir), "cpuset.effective_cpus"); n > 0 {
					return n
				}
			}
		}
	}
	return 0
}

// cgroupMount is a mount of a cgroup v1 hierarchy: its mount point, and
// its root, the cgroup of the hierarchy that the mount point shows ("/",
// the whole hierarchy, or, in a container without a cgroup namespace, the
// container's own cgroup).
type cgroupMount struct{ root, point string }

// v1Mounts lists the mounts of the cgroup v1 hierarchy with controller
// ctrl that /proc/self/mountinfo shows: those of file system type
// "cgroup" whose super options (the last field) include ctrl, wherever
// they are mounted and whatever other controllers share the hierarchy.
// A line of mountinfo is "id parent major:minor root point options
// [optional fields...] - type source super-options" (proc(5)), its paths
// with space, tab, newline and backslash written as octal escapes. None
// where the file cannot be read or shows no such mount; lines that do not
// parse are skipped.
func v1Mounts(read func(string) ([]byte, error), ctrl string) []cgroupMount {
	b, err := read("/proc/self/mountinfo")
	if err != nil {
		return nil
	}
	var out []cgroupMount
	for _, line := range strings.Split(string(b), "\n") {
		f := strings.Fields(line)
		sep := slices.Index(f, "-") // ends the optional fields
		if sep < 6 || len(f) < sep+4 || f[sep+1] != "cgroup" {
			continue
		}
		if !slices.Contains(strings.Split(f[sep+3], ","), ctrl) {
			continue
		}
		out = append(out, cgroupMount{root: unescapeMountPath(f[3]), point: unescapeMountPath(f[4])})
	}
	return out
}

// unescapeMountPath undoes mountinfo's escapes of a path: a backslash and
// three octal digits stand for that byte (\040 a space).
func unescapeMountPath(s string) string {
	if !strings.Contains(s, `\`) {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '\\' && i+4 <= len(s) {
			if c, err := strconv.ParseUint(s[i+1:i+4], 8, 8); err == nil {
				b.WriteByte(byte(c))
				i += 3
				continue
			}
		}
		b.WriteByte(s[i])
	}
	return b.String()
}

// dir returns cgroup, a cgroup of the mount's hierarchy as
// /proc/self/cgroup names it, as a directory under the mount point: its
// path below the mount's root where it lies there, else the path itself,
// whose walk up to "/" (nearestCPUList) reaches what the mount shows.
func (m cgroupMount) dir(cgroup string) string {
	cgroup = path.Clean("/" + cgroup)
	root := path.Clean("/" + m.root)
	switch {
	case root == "/":
		return cgroup
	case cgroup == root:
		return "/"
	}
	if rest, ok := strings.CutPrefix(cgroup, root+"/"); ok {
		return "/" + rest
	}
	return cgroup
}

// unifiedMounts are where the cgroup v2 hierarchy is mounted: alone, or
// beside the v1 hierarchies.
var unifiedMounts = []string{"/sys/fs/cgroup", "/sys/fs/cgroup/unified"}

// cgroupLine is one line of /proc/self/cgroup: the hierarchy's id, its
// comma-separated controllers ("" for the unified v2 hierarchy) and this
// process's cgroup in it.
type cgroupLine struct{ id, ctrls, dir string }

// unified reports whether the line is the cgroup v2 hierarchy's ("0::/path").
func (g cgroupLine) unified() bool { return g.id == "0" && g.ctrls == "" }

// has reports whether the v1 hierarchy of the line has controller c.
func (g cgroupLine) has(c string) bool { return slices.Contains(strings.Split(g.ctrls, ","), c) }

// ownCgroups reads /proc/self/cgroup, one entry per well-formed line; none
// where it cannot be read.
func ownCgroups(read func(string) ([]byte, error)) []cgroupLine {
	b, err := read("/proc/self/cgroup")
	if err != nil {
		return nil
	}
	var out []cgroupLine
	for _, line := range strings.Split(strings.TrimSpace(string(b)), "\n") {
		id, rest, ok := strings.Cut(line, ":")
		ctrls, dir, ok2 := strings.Cut(rest, ":")
		if ok && ok2 {
			out = append(out, cgroupLine{id, ctrls, dir})
		}
	}
	return out
}

// nearestCPUList counts the CPUs of file in the cgroup dir of the
// hierarchy mounted at mount, or else in its nearest ancestor that has it:
// a v2 cgroup without the cpuset controller runs on the CPUs of the
// nearest ancestor with it, and a container whose hierarchy is mounted at
// its own cgroup (cgroup v1 without a cgroup namespace) sees its cpuset at
// the mount's root, not at the host path /proc/self/cgroup names. 0 when
// none has it.
func nearestCPUList(read func(string) ([]byte, error), mount, dir, file string) int {
	for dir = path.Clean("/" + dir); ; dir = path.Dir(dir) {
		if n := cpuListFile(read, path.Join(mount, dir, file)); n > 0 {
			return n
		}
		if dir == "/" {
			return 0
		}
	}
}

// cgroupQuotaCPUs returns the CPUs' worth of time that the CFS quota of
// this process's cgroup allows, or 0 where it finds none. A pod with a CPU
// limit of 2 on a node of 64 CPUs may run on all 64, but only for 2 CPUs'
// time in each period: 4 ranks spinning there are throttled as on 2 CPUs.
// The quota counts as quota/period CPUs rounded up, at least 1: a limit of
// 2.5 keeps 3 ranks running for most of each period. /proc/self/cgroup
// names the process's cgroup in each hierarchy, as for the cpuset
// (cgroupCPUs): under cgroup v2 the cgroup's cpu.max gives "quota period",
// or "max period" for none; under v1, the hierarchy whose controllers
// include cpu, mounted where /proc/self/mountinfo says (v1Mounts: at
// /sys/fs/cgroup/cpu,cpuacct, /sys/fs/cgroup/cpuset,cpu, or anywhere
// else), gives cpu.cfs_quota_us, -1 for none, over cpu.cfs_period_us.
// Every cgroup's quota bounds its whole subtree, so the tightest one on
// the way from the process's cgroup to the root counts (tightestQuota);
// that walk also finds a container's quota at the root of a hierarchy
// mounted at its own cgroup where no mount table says so.
func cgroupQuotaCPUs(read func(string) ([]byte, error)) int {
	n := 0
	for _, g := range ownCgroups(read) {
		var mounts []cgroupMount
		var quota func(read func(string) ([]byte, error), dir string) int
		switch {
		case g.unified():
			for _, m := range unifiedMounts {
				mounts = append(mounts, cgroupMount{root: "/", point: m})
			}
			quota = cpuMaxCPUs
		case g.has("cpu"):
			// Only the cpu controller has the quota: a mount of
			// cpuset or cpuacct alone is another hierarchy, which
			// v1Mounts, matching whole options, leaves out.
			mounts, quota = v1Mounts(read, "cpu"), cfsQuotaCPUs
			if len(mounts) == 0 {
				// No mount table, or no cpu mount in it: the
				// paths where systemd and container runtimes
				// mount the hierarchy, named by its controllers
				// (cpu,cpuacct) or by cpu alone.
				mounts = []cgroupMount{{root: "/", point: "/sys/fs/cgroup/" + g.ctrls}, {root: "/", point: "/sys/fs/cgroup/cpu"}}
			}
		}
		for _, m := range mounts {
			if q := tightestQuota(read, m.point, m.dir(g.dir), quota); q > 0 && (n == 0 || q < n) {
				n = q
			}
		}
	}
	return n
}

// tightestQuota returns the least of the CPUs that quota reads in the
// cgroup dir of the hierarchy mounted at mount and in each of its
// ancestors, or 0 where none has a quota.
func tightestQuota(read func(string) ([]byte, error), mount, dir string, quota func(func(string) ([]byte, error), string) int) int {
	n := 0
	for dir = path.Clean("/" + dir); ; dir = path.Dir(dir) {
		if q := quota(read, path.Join(mount, dir)); q > 0 && (n == 0 || q < n) {
			n = q
		}
		if dir == "/" {
			return n
		}
	}
}

// cpuMaxCPUs reads the cgroup v2 quota of the cgroup at dir, cpu.max
// (quota and period in microseconds: "200000 100000" is 200 ms of CPU
// time every 100 ms), as CPUs
// (quotaCPUs), or returns 0 where it has none ("max 100000") or the file
// cannot be read or parsed.
func cpuMaxCPUs(read func(string) ([]byte, error), dir string) int {
	b, err := read(path.Join(dir, "cpu.max"))
	if err != nil {
		return 0
	}
	f := strings.Fields(string(b))
	if len(f) != 2 {
		return 0
	}
	q, err1 := strconv.ParseInt(f[0], 10, 64)
	p, err2 := strconv.ParseInt(f[1], 10, 64)
	if err1 != nil || err2 != nil {
		return 0
	}
	return quotaCPUs(q, p)
}

// cfsQuotaCPUs reads the cgroup v1 quota of the cgroup at dir,
// cpu.cfs_quota_us over cpu.cfs_period_us (both in microseconds), as
// CPUs (quotaCPUs), or returns 0 where it has none (-1) or either file
// cannot be read or parsed.
func cfsQuotaCPUs(read func(string) ([]byte, error), dir string) int {
	num := func(file string) int64 {
		b, err := read(path.Join(dir, file))
		if err != nil {
			return 0
		}
		n, err := strconv.ParseInt(strings.TrimSpace(string(b)), 10, 64)
		if err != nil {
			return 0
		}
		return n
	}
	q := num("cpu.cfs_quota_us")
	if q <= 0 {
		return 0
	}
	return quotaCPUs(q, num("cpu.cfs_period_us"))
}

// quotaCPUs is the CPUs that a quota of CPU time per period keeps busy,
// rounded up, or 0 when either is not positive (no quota).
func quotaCPUs(quota, period int64) int {
	if quota <= 0 || period <= 0 {
		return 0
	}
	n := quota / period
	if quota%period != 0 {
		n++
	}
	return int(n)
}

// cpuListFile counts the CPUs of the kernel CPU list in file, or returns
// 0 when it cannot be read or parsed.
func cpuListFile(read func(string) ([]byte, error), file string) int {
	b, err := read(file)
	if err != nil {
		return 0
	}
	n, err := countCPUList(strings.TrimSpace(string(b)))
	if err != nil {
		return 0
	}
	return n
}

// countCPUList counts the CPUs of a kernel CPU list such as "0-3,8,10-11".
func countCPUList(s string) (int, error) {
	n := 0
	for _, part := range strings.Split(s, ",") {
		lo, hi, isRange := strings.Cut(part, "-")
		a, err := strconv.Atoi(lo)
		if err != nil {
			return 0, fmt.Errorf("cpu list %q: %w", s, err)
		}
		b := a
		if isRange {
			if b, err = strconv.Atoi(hi); err != nil {
				return 0, fmt.Errorf("cpu list %q: %w", s, err)
			}
		}
		if b < a {
			return 0, fmt.Errorf("cpu list %q: range %s runs backwards", s, part)
		}
		n += b - a + 1
	}
	return n, nil
}

// fitSpin fits the MetaRoCE event loops' polling (udp.Config.Spin and
// WaitSpin) to a host whose CPUs the launcher says this host's ranks
// outnumber (see Bootstrap.CPUShare), and returns what it changed for the
// log ("" when nothing). host is the CPUs this host's ranks share
// (HostCPUs: its online CPUs, or its container's or job's cpuset or CPU
// quota), allowed the CPUs this process may run on.
//
//   - A launcher's ranks that may run on every CPU stop spinning: a
//     spinning rank would take the CPU that the rank with work needs, and
//     the kernel cannot tell them apart.
//   - A launcher's ranks confined to fewer CPUs (pinned each to one by
//     the launcher, say, or run under taskset) still share them, since
//     they outnumber the host's CPUs: they keep spinning
//     but give the CPU to the other processes after every empty poll
//     (udp.Config.YieldCPU), as Open MPI's ranks do when oversubscribed.
//     Pinned, a rank stays on one CPU and its buffers in that CPU's cache,
//     which spinning with the yield makes the faster of the two.
//   - Ranks of one process (LaunchLocal) share one Go scheduler, which
//     hands the CPU to the rank with work better than the kernel does
//     among processes: they keep spinning up to inProcessSpinPerCPU ranks
//     per CPU the process may run on (a taskset or cpuset counts), and
//     stop beyond that.
//
// It leaves a Spin or WaitSpin that the user set alone, and a YieldCPU the
// user turned on.
func fitSpin(cfg *Config, b Bootstrap, host, allowed int) string {
	if cfg.Transport != TransportMetaRoCE || cfg.UDP.Spin != 0 || cfg.UDP.WaitSpin != 0 {
		return ""
	}
	if b.Source == sourceLocal {
		cpus := max(min(allowed, host), 1)
		if b.LocalSize <= inProcessSpinPerCPU*cpus {
			return ""
		}
		cfg.UDP.Spin, cfg.UDP.WaitSpin = -1, -1
		if allowed < host {
			return fmt.Sprintf("%d ranks share this process's %s: event-loop spinning off", b.LocalSize, cpuCount(allowed))
		}
		return fmt.Sprintf("%d ranks share the %s available to this process: event-loop spinning off", b.LocalSize, cpuCount(host))
	}
	if b.LocalSize <= max(host, 1) {
		return ""
	}
	if allowed < host {
		if cfg.UDP.YieldCPU {
			return ""
		}
		cfg.UDP.YieldCPU = true
		return fmt.Sprintf("%d ranks on this host share %s, this one confined to %s: spinning yields the CPU to the other ranks", b.LocalSize, cpuCount(host), cpuCount(allowed))
	}
	cfg.UDP.Spin, cfg.UDP.WaitSpin = -1, -1
	return fmt.Sprintf("%d ranks on this host share %s: event-loop spinning off", b.LocalSize, cpuCount(host))
}

// cpuCount says "1 CPU" or "n CPUs".
func cpuCount(n int) string {
	if n == 1 {
		return "1 CPU"
	}
	return fmt.Sprintf("%d CPUs", n)
}

// inProcessSpinPerCPU is how many in-process ranks per CPU keep their
// event loops spinning. Measured on 2 CPUs with `mrbench -np N --transport
// metaroce -b 1M -e 16M -f 16`, spinning against not, alternated: 4 ranks
// 1.20–1.26 against 1.07–1.15 GB/s at 1 MiB (16 MiB within noise), 8 ranks
// 0.19–0.25 against 0.32–0.43 at 1 MiB and 0.52–0.53 against 0.55–0.58 at
// 16 MiB; beyond that, spinning ranks starve the rest (128 ranks took
// 2.8–3.2 s against 1.8–2.1 s to set up and run one call).
const inProcessSpinPerCPU = 2
