package collectives

import (
	"fmt"
	"os"
	"runtime"
	"strconv"
	"strings"
)

// HostCPUs is the number of CPUs the host has online, whatever this
// process's affinity (runtime.NumCPU counts only the CPUs it may run on);
// runtime.NumCPU where the kernel does not say.
func HostCPUs() int {
	b, err := os.ReadFile("/sys/devices/system/cpu/online")
	if err != nil {
		return runtime.NumCPU()
	}
	n, err := countCPUList(strings.TrimSpace(string(b)))
	if err != nil || n < 1 {
		return runtime.NumCPU()
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
// log ("" when nothing). host is the host's online CPUs, allowed the CPUs
// this process may run on.
//
//   - A launcher's ranks that may run on every CPU stop spinning: a
//     spinning rank would take the CPU that the rank with work needs, and
//     the kernel cannot tell them apart.
//   - A launcher's ranks pinned to fewer CPUs (each to one, say) still
//     share them, since they outnumber the host's CPUs: they keep spinning
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
		return fmt.Sprintf("%d ranks share this host's %s: event-loop spinning off", b.LocalSize, cpuCount(host))
	}
	if b.LocalSize <= max(host, 1) {
		return ""
	}
	if allowed < host {
		if cfg.UDP.YieldCPU {
			return ""
		}
		cfg.UDP.YieldCPU = true
		return fmt.Sprintf("%d ranks share this host's %s, this one pinned to %d: spinning yields the CPU to the other ranks", b.LocalSize, cpuCount(host), allowed)
	}
	cfg.UDP.Spin, cfg.UDP.WaitSpin = -1, -1
	return fmt.Sprintf("%d ranks share this host's %s: event-loop spinning off", b.LocalSize, cpuCount(host))
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
