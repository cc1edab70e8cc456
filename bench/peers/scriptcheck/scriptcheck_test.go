package scriptcheck

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/metaroce/metaroce/internal/scripttest"
	"golang.org/x/sys/unix"
)

// script is the benchmark script, relative to this package's directory.
var script = filepath.Join("..", "run.sh")

// TestScriptSyntax parses run.sh with bash -n: a syntax error anywhere in
// the script fails here rather than minutes into a benchmark run.
func TestScriptSyntax(t *testing.T) {
	if _, err := exec.LookPath("bash"); err != nil {
		t.Skip("bash not found")
	}
	out, err := exec.Command("bash", "-n", script).CombinedOutput()
	require.NoError(t, err, "bash -n run.sh: %s", out)
}

// TestScriptRejectsBadArguments: bad flags exit 2 with a message, before
// anything is installed or built.
func TestScriptRejectsBadArguments(t *testing.T) {
	if _, err := exec.LookPath("bash"); err != nil {
		t.Skip("bash not found")
	}
	for _, args := range [][]string{
		{"--bogus"},
		{"--ranks", "1"},
		{"--iters", "x"},
		{"--peers", "nccl"},
		{"--min-bytes", "lots"},
	} {
		cmd := exec.Command("bash", append([]string{script}, args...)...)
		out, err := cmd.CombinedOutput()
		var ee *exec.ExitError
		require.ErrorAs(t, err, &ee, "%v: %s", args, out)
		require.Equal(t, 2, ee.ExitCode(), "%v: %s", args, out)
		require.Contains(t, string(out), "run.sh:", "%v", args)
	}
}

// TestMPIBenchCompiles compiles mpi_bench.c with warnings as errors where
// mpicc and the MPI headers exist.
func TestMPIBenchCompiles(t *testing.T) {
	if _, err := exec.LookPath("mpicc"); err != nil {
		t.Skip("mpicc not found (Debian: openmpi-bin libopenmpi-dev)")
	}
	bin := filepath.Join(t.TempDir(), "mpi_bench")
	out, err := exec.Command("mpicc", "-O2", "-Wall", "-Wextra", "-Werror", "-o", bin, filepath.Join("..", "mpi_bench.c")).CombinedOutput()
	require.NoError(t, err, "mpicc: %s", out)
}

// TestMPIBenchRunsOneCollective runs mpi_bench on one rank where mpirun
// exists: -c alltoall measures the all-to-all alone, in a process that ran
// no all-reduce before it, and an unknown collective is refused.
func TestMPIBenchRunsOneCollective(t *testing.T) {
	for _, tool := range []string{"mpicc", "mpirun"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Skipf("%s not found (Debian: openmpi-bin libopenmpi-dev)", tool)
		}
	}
	bin := filepath.Join(t.TempDir(), "mpi_bench")
	out, err := exec.Command("mpicc", "-O2", "-o", bin, filepath.Join("..", "mpi_bench.c")).CombinedOutput()
	require.NoError(t, err, "mpicc: %s", out)
	mpirun := func(args ...string) ([]byte, error) {
		flags := []string{"--oversubscribe", "-np", "1"}
		if os.Getuid() == 0 {
			flags = append(flags, "--allow-run-as-root")
		}
		return exec.Command("mpirun", append(append(flags, bin), args...)...).CombinedOutput()
	}
	out, err = mpirun("-c", "alltoall", "-n", "2", "-w", "1", "4K")
	require.NoError(t, err, "%s", out)
	var results []string
	for _, line := range strings.Split(string(out), "\n") {
		if strings.HasPrefix(line, "RESULT ") {
			results = append(results, strings.Join(strings.Fields(line)[:3], " "))
		}
	}
	require.Equal(t, []string{"RESULT alltoall 4096"}, results, "%s", out)

	out, err = mpirun("-c", "broadcast", "4K")
	require.Error(t, err, "%s", out)
	require.Contains(t, string(out), "mpi_bench: -c broadcast: want allreduce or alltoall")
}

// TestGlooBenchParses byte-compiles gloo_bench.py where python3 exists; it
// does not need torch.
func TestGlooBenchParses(t *testing.T) {
	py, err := exec.LookPath("python3")
	if err != nil {
		t.Skip("python3 not found")
	}
	code := "import ast,sys; ast.parse(open(sys.argv[1]).read(), sys.argv[1])"
	out, err := exec.Command(py, "-c", code, filepath.Join("..", "gloo_bench.py")).CombinedOutput()
	require.NoError(t, err, "python3: %s", out)
}

// freshDebian makes a directory to be the whole PATH of run.sh as on a fresh
// Debian 12 with no MPI: `id -u` says root, and apt-get, go and every other
// tool the script calls up to its table are stubs or links. apt-get notes
// its arguments in $APT_LOG and exits $UPDATE_RC or $INSTALL_RC.
func freshDebian(t *testing.T) (bash, bin string) {
	t.Helper()
	bash, err := exec.LookPath("bash")
	if err != nil {
		t.Skip("bash not found")
	}
	bin = scripttest.ToolDir(t, "awk", "cat", "date", "dirname", "head", "mktemp", "nproc", "rm", "seq", "tail")
	stub := func(name, body string) { scripttest.Stub(t, bin, name, body) }
	stub("id", `echo 0`)
	stub("go", `exit 0`) // the build of mrbench, which these runs never start
	stub("apt-get", `echo "$*" >>"$APT_LOG"
case "$1" in
update) exit "$UPDATE_RC" ;;
*) exit "$INSTALL_RC" ;;
esac`)
	return bash, bin
}

// TestScriptMissingPackagesNotInstalled: run as root without --install, the
// script changes no package. It names what is missing and the command that
// installs it, and reports the peers that need it as skipped.
func TestScriptMissingPackagesNotInstalled(t *testing.T) {
	bash, bin := freshDebian(t)
	aptLog := filepath.Join(t.TempDir(), "apt.log")
	cmd := exec.Command(bash, script, "--peers", "ompi gloo", "--ranks", "2", "--sizes", "1K", "--min-bytes", "0")
	cmd.Env = []string{"PATH=" + bin, "TMPDIR=" + t.TempDir(), "APT_LOG=" + aptLog, "UPDATE_RC=0", "INSTALL_RC=0"}
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	require.NoError(t, err, "stderr:\n%s", stderr.String())
	require.NoFileExists(t, aptLog, "apt-get ran without --install; stderr:\n%s", stderr.String())

	// The script also tries /usr/bin/python3, outside the stub PATH: torch
	// is missing only where that has none.
	missing := "openmpi-bin libopenmpi-dev gcc libc6-dev"
	if exec.Command("/usr/bin/python3", "-c", "import torch.distributed").Run() != nil {
		missing += " python3-torch"
		require.Contains(t, stderr.String(), "gloo skipped")
	}
	require.Contains(t, stderr.String(), "missing Debian packages "+missing+":")
	require.Contains(t, stderr.String(), "apt-get update && apt-get install -y --no-install-recommends "+missing+"\n")
	require.Contains(t, stderr.String(), "--install")
	require.Contains(t, stderr.String(), "Open MPI skipped")
	require.Contains(t, string(out), "busbw", "the table's header")
}

// TestScriptInstallFailureSkipsPeers: with --install, the script must
// refresh the package lists before installing, ask for gcc (mpicc wraps
// it), and, when the update or the install fails, say so and go on to
// report Open MPI as skipped instead of ending the run.
func TestScriptInstallFailureSkipsPeers(t *testing.T) {
	bash, bin := freshDebian(t)
	for _, c := range []struct{ update, install int }{{0, 100}, {100, 100}, {0, 0}} {
		t.Run(fmt.Sprintf("update=%d,install=%d", c.update, c.install), func(t *testing.T) {
			aptLog := filepath.Join(t.TempDir(), "apt.log")
			cmd := exec.Command(bash, script, "--install", "--peers", "ompi ompi-tcp", "--ranks", "2", "--sizes", "1K", "--min-bytes", "0")
			cmd.Env = []string{
				"PATH=" + bin, "TMPDIR=" + t.TempDir(), "APT_LOG=" + aptLog,
				fmt.Sprintf("UPDATE_RC=%d", c.update), fmt.Sprintf("INSTALL_RC=%d", c.install),
			}
			var stderr strings.Builder
			cmd.Stderr = &stderr
			out, err := cmd.Output()
			require.NoError(t, err, "run.sh ended the run; stderr:\n%s", stderr.String())
			logged, err := os.ReadFile(aptLog)
			require.NoError(t, err, "apt-get never ran; stderr:\n%s", stderr.String())
			calls := strings.Split(strings.TrimSpace(string(logged)), "\n")
			require.Len(t, calls, 2, "apt-get calls: %q", calls)
			require.Equal(t, "update", calls[0], "apt-get calls: %q", calls)
			require.True(t, strings.HasPrefix(calls[1], "install "), "apt-get calls: %q", calls)
			require.Contains(t, strings.Fields(calls[1]), "gcc", "apt-get calls: %q", calls)
			if c.update != 0 {
				require.Contains(t, stderr.String(), "apt-get update failed")
			}
			if c.install != 0 {
				require.Contains(t, stderr.String(), "apt-get install")
				require.Contains(t, stderr.String(), "failed")
			}
			require.Contains(t, stderr.String(), "Open MPI skipped")
			require.Contains(t, string(out), "busbw", "the table's header")
		})
	}
}

// TestScriptSignalStopsBenchmark runs run.sh with a stub mrbench that only
// sleeps and, once the stub runs, sends the script SIGINT the way a
// terminal's Ctrl-C does (to its whole process group) or SIGTERM the way
// kill does (to the script alone). Either must end the script promptly with
// 130 or 143, and take the benchmark with it: timeout runs the benchmark in
// a process group of its own, which neither signal reaches by itself, so
// the script used to carry on with the next cell after a Ctrl-C, and to
// exit on SIGTERM leaving the benchmark running.
func TestScriptSignalStopsBenchmark(t *testing.T) {
	bash, err := exec.LookPath("bash")
	if err != nil {
		t.Skip("bash not found")
	}
	bin := scripttest.ToolDir(t, "awk", "cat", "chmod", "date", "dirname", "head", "mktemp", "nproc", "rm", "sed", "seq", "sleep", "tail", "timeout")
	stub := func(name, body string) { scripttest.Stub(t, bin, name, body) }
	stub("id", `echo 1000`) // not root: nothing is installed
	// The build writes an mrbench that notes its pid and sleeps.
	stub("go", `while [ $# -gt 0 ]; do [ "$1" = -o ] && out=$2; shift; done
printf '#!/bin/sh\necho $$ >>"$PIDS"\nexec sleep 300\n' >"$out"
chmod +x "$out"`)

	scripttest.ForEachSignal(t, func(t *testing.T, c scripttest.Signal) {
		pids := filepath.Join(t.TempDir(), "pids")
		// Without the host probe, whose stub would sleep as well: the
		// signal must reach the benchmark.
		cmd := exec.Command(bash, script, "--peers", "metaroce", "--ranks", "2", "--sizes", "1K", "--min-bytes", "0", "--no-probe")
		cmd.Env = []string{"PATH=" + bin, "TMPDIR=" + t.TempDir(), "PIDS=" + pids}
		cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
		f, stderr := scripttest.OutputFile(t)
		cmd.Stderr = f
		require.NoError(t, cmd.Start())
		code := scripttest.Interrupt(t, cmd, pids, 1, c.Group, c.Sig, stderr)
		require.Equal(t, c.Code, code, "stderr:\n%s", stderr())
		require.Contains(t, stderr(), "interrupted by "+unix.SignalName(c.Sig))
	})
}

// TestScriptTableKeepsSteadyMeasurements: with host probe readings, the
// medians keep the measurements whose probes before and after both read
// at least 60% of the readings' 90th percentile, and say how many; a
// measurement taken while the host was slow is left out. mrbench and the
// probe are stubs that print the figures of a list, one per run.
func TestScriptTableKeepsSteadyMeasurements(t *testing.T) {
	bash, err := exec.LookPath("bash")
	if err != nil {
		t.Skip("bash not found")
	}
	bin := scripttest.ToolDir(t, "awk", "cat", "chmod", "date", "dirname", "head", "mktemp", "nproc", "rm", "sed", "seq", "tail", "timeout")
	stub := func(name, body string) { scripttest.Stub(t, bin, name, body) }
	stub("id", `echo 1000`)
	// Each built program prints the next line of its list: mrbench an
	// nccl-tests row whose out-of-place busbw is that figure, hostprobe
	// a reading.
	stub("go", `while [ $# -gt 0 ]; do [ "$1" = -o ] && out=$2; shift; done
case "$out" in
*/mrbench) printf '#!/bin/sh\nn=$(($(cat "$LISTS/mr.n" 2>/dev/null || echo 0) + 1)); echo $n >"$LISTS/mr.n"\nbw=$(sed -n "${n}p" "$LISTS/mr")\n[ "$bw" != FAIL ] || { echo BOOM >&2; exit 1; }\necho "        1024   256 float sum -1 10.0 0.1 $bw 0 10.0 0.1 $bw 0"\n' >"$out" ;;
*) printf '#!/bin/sh\nn=$(($(cat "$LISTS/probe.n" 2>/dev/null || echo 0) + 1)); echo $n >"$LISTS/probe.n"\necho "PROBE gbps=$(sed -n "${n}p" "$LISTS/probe") cpus=0,1 seconds=0.200"\n' >"$out" ;;
esac
chmod +x "$out"`)
	lists := t.TempDir()
	// Three rounds of one peer, two collectives each. The probe runs
	// once before the first and after every run: it reads half the
	// others after round 2's all-reduce, and 90% after its all-to-all,
	// so that both of round 2's runs are left out.
	// run starts the script afresh: both lists from their first line,
	// the mrbench list as given.
	run := func(mr, probe string, args ...string) (out, stderr string) {
		t.Helper()
		for _, f := range []string{"mr.n", "probe.n"} {
			os.Remove(filepath.Join(lists, f))
		}
		require.NoError(t, os.WriteFile(filepath.Join(lists, "mr"), []byte(mr), 0o644))
		require.NoError(t, os.WriteFile(filepath.Join(lists, "probe"), []byte(probe), 0o644))
		cmd := exec.Command(bash, append([]string{script, "--peers", "metaroce", "--ranks", "2", "--sizes", "1K", "--min-bytes", "0"}, args...)...)
		cmd.Env = []string{"PATH=" + bin, "TMPDIR=" + t.TempDir(), "LISTS=" + lists}
		var e strings.Builder
		cmd.Stderr = &e
		o, err := cmd.Output()
		require.NoError(t, err, "stderr:\n%s", e.String())
		return string(o), e.String()
	}
	const rounds = "1.0\n1.0\n9.0\n9.0\n3.0\n3.0\n"
	out, _ := run(rounds, "5.0\n5.0\n5.0\n2.5\n4.5\n5.0\n5.0\n", "--rounds", "3")
	require.Contains(t, out, "host probe (bench/hostprobe): 2.50 to 5.00 GB/s, 90th percentile 5.00; 4 of 6 measurements", "stdout:\n%s", out)
	require.Regexp(t, `metaroce +2 allreduce +1 KiB +2\.00 `, out, "the median of rounds 1 and 3")
	require.Regexp(t, `metaroce +2 alltoall +1 KiB +2\.00 `, out)

	// A probe that fails during the run (its list runs out after two
	// readings) turns the filter off: every round counts.
	out, stderr := run(rounds, "5.0\n5.0\n", "--rounds", "3")
	require.Contains(t, stderr, "host probe failed")
	require.NotContains(t, out, "host probe (bench/hostprobe)")
	require.Regexp(t, `metaroce +2 allreduce +1 KiB +3\.00 `, out, "the median of all three")

	// A benchmark that fails is noted with its own words, not the
	// probe's that ran after it.
	_, stderr = run("FAIL\n1.0\n", "5.0\n5.0\n5.0\n")
	require.Contains(t, stderr, "metaroce 2 ranks allreduce 1024: failed: BOOM")

	// Without the probe every round counts.
	out, _ = run(rounds, "", "--rounds", "3", "--no-probe")
	require.NotContains(t, out, "host probe")
	require.Regexp(t, `metaroce +2 allreduce +1 KiB +3\.00 `, out, "the median of all three")
}

// TestScriptTableFromRaw: --table prints the table of a --raw file again
// (with its probe readings, or with --no-probe over every measurement)
// and runs nothing: go is not even on the PATH. An unreadable file is a
// usage error.
func TestScriptTableFromRaw(t *testing.T) {
	bash, err := exec.LookPath("bash")
	if err != nil {
		t.Skip("bash not found")
	}
	bin := scripttest.ToolDir(t, "awk", "cat", "date", "dirname", "mktemp", "nproc", "rm")
	raw := filepath.Join(t.TempDir(), "raw")
	require.NoError(t, os.WriteFile(raw, []byte(`metaroce 2 alltoall 1048576 4.0 5.0 5.0
ompi-tcp 2 alltoall 1048576 2.0 5.0 5.1
metaroce 2 alltoall 1048576 1.0 5.1 1.5
ompi-tcp 2 alltoall 1048576 1.0 1.5 1.6
metaroce 2 alltoall 1048576 6.0 5.0 5.0
ompi-tcp 2 alltoall 1048576 4.0 5.0 5.0
`), 0o644))
	run := func(args ...string) (string, string, error) {
		cmd := exec.Command(bash, append([]string{script}, args...)...)
		cmd.Env = []string{"PATH=" + bin, "TMPDIR=" + t.TempDir()}
		var stderr strings.Builder
		cmd.Stderr = &stderr
		out, err := cmd.Output()
		return string(out), stderr.String(), err
	}
	out, errs, err := run("--table", raw)
	require.NoError(t, err, errs)
	require.Contains(t, out, "4 of 6 measurements")
	require.Regexp(t, `metaroce +2 alltoall +1 MiB +5\.00 +1\.00\n`, out, "rounds 1 and 3")
	require.Regexp(t, `ompi-tcp +2 alltoall +1 MiB +3\.00 +1\.67\n`, out)
	out, errs, err = run("--table", raw, "--no-probe")
	require.NoError(t, err, errs)
	require.Regexp(t, `metaroce +2 alltoall +1 MiB +4\.00 +1\.00\n`, out, "all three rounds")
	// A run whose probe failed midway has readings up to then only: the
	// reprint takes every measurement, as the run did.
	partial := filepath.Join(t.TempDir(), "partial")
	require.NoError(t, os.WriteFile(partial, []byte("metaroce 2 alltoall 1048576 1.0 5.0 5.0\nmetaroce 2 alltoall 1048576 9.0 5.0 -\nmetaroce 2 alltoall 1048576 3.0 - -\n"), 0o644))
	out, errs, err = run("--table", partial)
	require.NoError(t, err, errs)
	require.NotContains(t, out, "host probe")
	require.Regexp(t, `metaroce +2 alltoall +1 MiB +3\.00 +1\.00\n`, out)
	_, errs, err = run("--table", filepath.Join(t.TempDir(), "missing"))
	var ee *exec.ExitError
	require.ErrorAs(t, err, &ee)
	require.Equal(t, 2, ee.ExitCode())
	require.Contains(t, errs, "cannot read it")
}

// TestScriptAlternatesPeerOrder: every other round runs the peers in
// reverse order, so that no peer always runs first in its round. mrbench
// is a stub that notes the transport of each run.
func TestScriptAlternatesPeerOrder(t *testing.T) {
	bash, err := exec.LookPath("bash")
	if err != nil {
		t.Skip("bash not found")
	}
	bin := scripttest.ToolDir(t, "awk", "cat", "chmod", "date", "dirname", "head", "mktemp", "nproc", "rm", "seq", "tail", "timeout")
	stub := func(name, body string) { scripttest.Stub(t, bin, name, body) }
	stub("id", `echo 1000`)
	stub("go", `while [ $# -gt 0 ]; do [ "$1" = -o ] && out=$2; shift; done
printf '#!/bin/sh\nwhile [ $# -gt 0 ]; do [ "$1" = --transport ] && echo "$2" >>"$LOG"; shift; done\necho "        1024   256 float sum -1 10.0 0.1 1.0 0 10.0 0.1 1.0 0"\n' >"$out"
chmod +x "$out"`)
	log := filepath.Join(t.TempDir(), "order")
	cmd := exec.Command(bash, script, "--peers", "metaroce mrbench-tcp", "--ranks", "2", "--sizes", "1K", "--min-bytes", "0", "--rounds", "3", "--no-probe")
	cmd.Env = []string{"PATH=" + bin, "TMPDIR=" + t.TempDir(), "LOG=" + log}
	var stderr strings.Builder
	cmd.Stderr = &stderr
	_, err = cmd.Output()
	require.NoError(t, err, "stderr:\n%s", stderr.String())
	got, err := os.ReadFile(log)
	require.NoError(t, err)
	// Each run is two collectives, all-reduce then all-to-all.
	want := strings.Repeat("metaroce\n", 2) + strings.Repeat("tcp\n", 4) + strings.Repeat("metaroce\n", 4) + strings.Repeat("tcp\n", 2)
	require.Equal(t, want, string(got))
}
