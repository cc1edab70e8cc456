package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/metaroce/metaroce/internal/interrupt"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// watchWriter is a writer for run's stdout or stderr that keeps what is
// written and calls then (once) when a line matches: a test acts on what
// mrbench printed, not on a clock.
type watchWriter struct {
	mu    sync.Mutex
	buf   bytes.Buffer
	match *regexp.Regexp
	then  func()
	fired bool
}

func (w *watchWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.buf.Write(p)
	if !w.fired && w.match.Match(w.buf.Bytes()) {
		w.fired = true
		w.then()
	}
	return len(p), nil
}

func (w *watchWriter) String() string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.buf.String()
}

// launcherVars are the variables BootstrapFromEnv reads.
var launcherVars = []string{
	"METAROCE_RANK", "METAROCE_NRANKS", "METAROCE_LOCAL_RANK", "METAROCE_LOCAL_SIZE", "METAROCE_ROOT", "METAROCE_JOB",
	"RANK", "WORLD_SIZE", "LOCAL_RANK", "LOCAL_WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT", "TORCHELASTIC_RUN_ID",
	"OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE", "OMPI_COMM_WORLD_LOCAL_RANK", "OMPI_COMM_WORLD_LOCAL_SIZE",
	"OMPI_MCA_ess_base_jobid", "PMIX_NAMESPACE",
	"SLURM_PROCID", "SLURM_NTASKS", "SLURM_LOCALID", "SLURM_NTASKS_PER_NODE", "SLURM_JOB_ID", "SLURM_STEP_ID",
	"SLURM_HET_JOB_ID", "SLURM_STEP_NUM_NODES", "SLURM_NNODES",
}

// clearLauncherEnv unsets every launcher variable for the test (restored
// after it), then sets env.
func clearLauncherEnv(t *testing.T, env map[string]string) {
	for _, k := range launcherVars {
		t.Setenv(k, "") // registers the restore
		os.Unsetenv(k)
	}
	for k, v := range env {
		t.Setenv(k, v)
	}
}

// TestStrayLauncherEnvironment: Slurm's variables in the environment of a
// plain run (an sbatch script without srun) make this process rank 0 of a
// job whose other rank never starts. Stderr names the variables and the
// rendezvous at once, warns that the explicit -np is ignored, and then
// says which rank the rendezvous waits for; the test interrupts the run on
// that line.
func TestStrayLauncherEnvironment(t *testing.T) {
	root := fmt.Sprintf("127.0.0.1:%d", freePort(t))
	clearLauncherEnv(t, map[string]string{"SLURM_PROCID": "0", "SLURM_NTASKS": "2", "METAROCE_ROOT": root})
	defer func(d time.Duration) { rendezvousProgressEvery = d }(rendezvousProgressEvery)
	rendezvousProgressEvery = time.Millisecond
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	errw := &watchWriter{match: regexp.MustCompile(`waiting for rank 1 `), then: cancel}
	var out bytes.Buffer
	code := run(ctx, []string{"-np", "4", "--transport", "tcp", "-b", "1K", "-e", "1K", "-n", "1", "--timeout", "60s"}, &out, errw)
	errs := errw.String()
	assert.Equal(t, exitCancelled, code, errs)
	assert.Contains(t, errs, "mrbench: launcher slurm: rank 0 of 2 (SLURM_PROCID=0, SLURM_NTASKS=2), rendezvous at "+root+" (from METAROCE_ROOT)\n")
	assert.Contains(t, errs, "mrbench: -np 4 ignored: the slurm environment makes this process rank 0 of a job of 2; to run 4 ranks in this process, unset SLURM_PROCID and SLURM_NTASKS\n")
	assert.Contains(t, errs, "mrbench: rank 0: waiting for rank 1 (1 of 2 joined the rendezvous at "+root+") after ")
	assert.Contains(t, errs, "SLURM_PROCID and SLURM_NTASKS do not belong to this run")
	assert.NotContains(t, errs, "context canceled")
}

// TestLauncherEnvironmentErrorsAreUsage: a launcher variable that cannot
// be a rank or a rank count, a rendezvous address that no rank can reach
// and half of the MASTER_ADDR/MASTER_PORT pair are configuration errors,
// exit 2 like a bad flag, named with their values, before any rank waits
// for the rendezvous (the short --timeout bounds the wait where one would
// start).
func TestLauncherEnvironmentErrorsAreUsage(t *testing.T) {
	for _, tc := range []struct {
		env  map[string]string
		want string
	}{
		{map[string]string{"RANK": "x", "WORLD_SIZE": "4"}, `RANK="x" is not a rank number`},
		{map[string]string{"RANK": "0", "WORLD_SIZE": "0"}, `WORLD_SIZE="0": want a rank count`},
		{map[string]string{"SLURM_PROCID": "3", "SLURM_NTASKS": "2"}, `SLURM_PROCID="3" is outside 0..1`},
		{map[string]string{"METAROCE_RANK": "1"}, `METAROCE_RANK="1" is set but METAROCE_NRANKS is not`},
		{map[string]string{"OMPI_COMM_WORLD_SIZE": "4"}, `OMPI_COMM_WORLD_SIZE="4" is set but OMPI_COMM_WORLD_RANK is not`},
		{map[string]string{"SLURM_PROCID": "1", "SLURM_NTASKS": "2", "METAROCE_ROOT": "127.0.0.1:0"}, `METAROCE_ROOT="127.0.0.1:0": port 0`},
		{map[string]string{"SLURM_PROCID": "1", "SLURM_NTASKS": "2", "METAROCE_ROOT": "127.0.0.1"}, `METAROCE_ROOT="127.0.0.1"`},
		{map[string]string{"RANK": "1", "WORLD_SIZE": "2", "MASTER_ADDR": "127.0.0.1"}, `MASTER_ADDR="127.0.0.1" is set but MASTER_PORT is not`},
		{map[string]string{"RANK": "1", "WORLD_SIZE": "2", "MASTER_PORT": "29500"}, `MASTER_PORT="29500" is set but MASTER_ADDR is not`},
	} {
		t.Run(fmt.Sprint(tc.env), func(t *testing.T) {
			clearLauncherEnv(t, tc.env)
			code, out, errs := runMrbench(t, "--transport", "tcp", "-b", "1K", "-e", "1K", "--timeout", "3s")
			assert.Equal(t, exitUsage, code, errs)
			assert.Contains(t, errs, "mrbench: launcher environment: ")
			assert.Contains(t, errs, tc.want)
			assert.Empty(t, out)
		})
	}
}

// TestInterruptedRun: a run whose context is cancelled (main's context on
// SIGINT) mid-sweep says it was interrupted, on stderr, on the table's
// FAILED line and in --json, instead of the cancelled collective's "a peer
// may have died ... context canceled", and exits 130, as for SIGINT. The
// test cancels when the first row is printed.
func TestInterruptedRun(t *testing.T) {
	clearLauncherEnv(t, nil)
	p := filepath.Join(t.TempDir(), "r.json")
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	out := &watchWriter{match: regexp.MustCompile(`(?m)^ +\d+ +\d+ +float`), then: cancel}
	var errb bytes.Buffer
	code := run(ctx, []string{"-np", "2", "--transport", "tcp", "-b", "1K", "-e", "1M", "-f", "2", "-n", "1", "-w", "0",
		"--timeout", "60s", "--json", p}, out, &errb)
	errs := errb.String()
	assert.Equal(t, exitCancelled, code, errs)
	assert.Equal(t, "mrbench: interrupted\n", errs)
	assert.Contains(t, out.String(), "# FAILED: interrupted\n")
	b, err := os.ReadFile(p)
	require.NoError(t, err)
	var rep struct {
		Tables []struct {
			Status, Error string
			Rows          []any
		}
	}
	require.NoError(t, json.Unmarshal(b, &rep))
	require.Len(t, rep.Tables, 1)
	assert.Equal(t, "failed", rep.Tables[0].Status)
	assert.Equal(t, "interrupted", rep.Tables[0].Error)
	assert.NotEmpty(t, rep.Tables[0].Rows, "the rows before the interruption are kept")
}

// exitCancelled is the status of a run whose context was cancelled without
// a signal as its cause (a test's cancel), which stands for Ctrl-C: SIGINT's.
const exitCancelled = 128 + int(syscall.SIGINT)

// TestSignalExitStatus: a run that a signal interrupts mid-sweep exits 128
// plus the signal's number (130 for SIGINT, 143 for SIGTERM, 129 for
// SIGHUP), as a shell reports a command the signal ended and as mrconform
// and mrsoak do, so that a script tells a kill from a Ctrl-C. It exited
// 130 for each of them. The test ends the context with the cause main's
// context gets (interrupt.Signal) when the first row is printed.
func TestSignalExitStatus(t *testing.T) {
	clearLauncherEnv(t, nil)
	for sig, want := range map[syscall.Signal]int{syscall.SIGINT: 130, syscall.SIGTERM: 143, syscall.SIGHUP: 129} {
		t.Run(sig.String(), func(t *testing.T) {
			ctx, cancel := context.WithCancelCause(context.Background())
			defer cancel(nil)
			out := &watchWriter{match: regexp.MustCompile(`(?m)^ +\d+ +\d+ +float`), then: func() { cancel(interrupt.Signal{Sig: sig}) }}
			var errb bytes.Buffer
			code := run(ctx, []string{"-np", "2", "--transport", "tcp", "-b", "1K", "-e", "1M", "-f", "2", "-n", "1", "-w", "0",
				"--timeout", "60s"}, out, &errb)
			assert.Equal(t, want, code, errb.String())
			assert.Equal(t, "mrbench: interrupted\n", errb.String())
		})
	}
}

// TestHelpFlagOrder pins the order of mrbench -h: the sections of
// helpSections, each flag once, and no flag left to the "Other" section.
func TestHelpFlagOrder(t *testing.T) {
	var out bytes.Buffer
	_, err := parseOptions([]string{"-h"}, &out)
	require.ErrorIs(t, err, errHelp)
	var sections, flags []string
	for _, l := range strings.Split(out.String(), "\n") {
		switch {
		case strings.HasPrefix(l, "  -"):
			first := strings.Fields(l)[0]
			flags = append(flags, strings.TrimRight(first, ","))
		case strings.HasSuffix(l, ":") && !strings.HasPrefix(l, " "):
			sections = append(sections, strings.TrimSuffix(l, ":"))
		}
	}
	assert.Equal(t, []string{"Flags (aliases share a line)", "Sizes", "Collective and data", "Iterations, timing and checking",
		"Ranks and transport", "Output", "nccl-tests compatibility (accepted, no effect)"}, sections)
	assert.Equal(t, []string{
		"-b", "-e", "-i", "-f",
		"--op", "-d", "-o", "-r",
		"-n", "-w", "-c", "-a", "-z", "-T",
		"--np", "--transport", "--backend", "--channels", "--chunk", "--a2a-inflight", "--paths", "--group-size", "--loss", "--seed", "--netlab",
		"--json", "--csv", "--plot", "-v",
		"-t", "-g", "-m", "-N", "-p", "-G", "-C", "-R",
	}, flags)
	assert.NotContains(t, out.String(), "\n"+otherFlags+":\n")
}

// TestSimFlagsBeforeScenario: the simulator's flags may come before the
// scenario's name as well as after it.
func TestSimFlagsBeforeScenario(t *testing.T) {
	code, _, errs := runMrbench(t, "sim", "--smoke", "nosuch")
	assert.Equal(t, exitUsage, code)
	assert.Contains(t, errs, "unknown scenario", "the name after the flags is read as the scenario")
	code, _, errs = runMrbench(t, "sim", "--smoke")
	assert.Equal(t, exitUsage, code)
	assert.Contains(t, errs, "name a scenario")
	code, _, errs = runMrbench(t, "sim", "-seed", "2", "nosuch", "--smoke", "extra")
	assert.Equal(t, exitUsage, code)
	assert.Contains(t, errs, `unexpected argument "extra"`)
	code, out, errs := runMrbench(t, "sim", "--seed", "3", "--smoke", "loss")
	require.Equal(t, exitOK, code, errs)
	assert.Contains(t, out, "scenario loss  seed 3")
}

// TestHelpOnStdoutErrorsOneLine: -h, asked for, prints on stdout and exits
// 0, for mrbench and its simulator alike; a bad flag or value prints one
// line on stderr that names the flag as typed, what it takes, and where
// the flags are listed, not the whole usage, and exits 2.
func TestHelpOnStdoutErrorsOneLine(t *testing.T) {
	for _, args := range [][]string{{"-h"}, {"--help"}, {"sim", "-h"}, {"sim", "loss", "-h"}} {
		code, out, errs := runMrbench(t, args...)
		assert.Equal(t, exitOK, code, args)
		assert.Contains(t, out, "Usage: mrbench", args)
		assert.Empty(t, errs, args)
	}
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--bogus"}, "mrbench: unknown flag --bogus (mrbench -h lists the flags)"},
		{[]string{"-bogus=1"}, "mrbench: unknown flag -bogus (mrbench -h lists the flags)"},
		{[]string{"-b", "10X"}, `mrbench: invalid value "10X" for flag -b: `},
		{[]string{"sim", "--bogus", "loss"}, "mrbench sim: unknown flag --bogus (mrbench sim -h lists the flags)"},
		{[]string{"sim", "loss", "--seed", "x"}, `mrbench sim: invalid value "x" for flag --seed: `},
		// What a flag takes, where the flag package says "parse error".
		{[]string{"-n", "1.5"}, `mrbench: invalid value "1.5" for flag -n: want a whole number (mrbench -h lists the flags)`},
		{[]string{"--seed", "-1"}, `mrbench: invalid value "-1" for flag --seed: want a whole number, 0 or more (mrbench -h lists the flags)`},
		{[]string{"--loss", "1%"}, `mrbench: invalid value "1%" for flag --loss: want a number (mrbench -h lists the flags)`},
		{[]string{"--netlab=maybe"}, `mrbench: invalid value "maybe" for flag --netlab: want true or false (or the flag alone, for true) (mrbench -h lists the flags)`},
		{[]string{"--np", "two for flag -x: y"}, `mrbench: invalid value "two for flag -x: y" for flag --np: want a whole number (mrbench -h lists the flags)`},
		{[]string{"-n", "99999999999999999999"}, `mrbench: invalid value "99999999999999999999" for flag -n: value out of range (mrbench -h lists the flags)`},
		{[]string{"-np", "2", "--timeout"}, "mrbench: flag --timeout needs a value (mrbench -h lists the flags)"},
		{[]string{"sim", "loss", "--smoke=x"}, `mrbench sim: invalid value "x" for flag --smoke: want true or false`},
		{[]string{"sim", "loss", "--mtu", "1.5K"}, `mrbench sim: invalid value "1.5K" for flag --mtu: want a whole number (mrbench sim -h lists the flags)`},
	} {
		code, out, errs := runMrbench(t, tc.args...)
		assert.Equal(t, exitUsage, code, tc.args)
		assert.Empty(t, out, tc.args)
		assert.Equal(t, 1, strings.Count(strings.TrimSpace(errs), "\n")+1, "one line: %q", errs)
		assert.Contains(t, errs, tc.want, tc.args)
	}
}

// TestLocalRunNamesUnreadVariables: ranks run in this process say which
// rendezvous or half-launcher variables they do not read, and run; a
// METAROCE_SECRET the MetaRoCE table would refuse is a usage error before
// anything runs, not a failure after the TCP table.
func TestLocalRunNamesUnreadVariables(t *testing.T) {
	clearLauncherEnv(t, map[string]string{"METAROCE_ROOT": "foo", "RANK": "0"})
	code, out, errs := runMrbench(t, "-np", "2", "--transport", "tcp", "-b", "1K", "-e", "1K", "-n", "1", "-w", "0")
	assert.Equal(t, exitOK, code, errs)
	assert.Contains(t, errs, `mrbench: METAROCE_ROOT="foo", RANK="0" not read: no launcher sets this process's rank and rank count`)
	assert.Contains(t, out, "# Avg bus bandwidth")

	clearLauncherEnv(t, nil)
	t.Setenv("METAROCE_SECRET", "short")
	code, out, errs = runMrbench(t, "-b", "1K", "-e", "1K", "-n", "1", "-w", "0")
	assert.Equal(t, exitUsage, code, errs)
	assert.Empty(t, out)
	assert.Contains(t, errs, "METAROCE_SECRET has 5 bytes, want at least 16")
	code, _, errs = runMrbench(t, "--transport", "tcp", "-b", "1K", "-e", "1K", "-n", "1", "-w", "0")
	assert.Equal(t, exitOK, code, "the TCP baseline reads no secret: %s", errs)
}

// TestSetupDeadlineNamesFlag: a setup that the deadline ends (rank 1 of a
// launched job never joins) names that deadline by the flag that sets it,
// -T, on stdout's FAILED line, on stderr and in --json, where it said
// "(Config.Timeout)", the library's field, which no mrbench user sets; the
// advice to give a longer one then says how.
func TestSetupDeadlineNamesFlag(t *testing.T) {
	root := fmt.Sprintf("127.0.0.1:%d", freePort(t))
	clearLauncherEnv(t, map[string]string{"METAROCE_RANK": "0", "METAROCE_NRANKS": "2", "METAROCE_ROOT": root})
	p := filepath.Join(t.TempDir(), "r.json")
	code, out, errs := runMrbench(t, "--transport", "tcp", "-b", "1K", "-e", "1K", "-n", "1", "-T", "200ms", "--json", p)
	require.Equal(t, exitFail, code, errs)
	const named = "never joined the rendezvous at %s before the setup deadline of 200ms (-T) ran out"
	assert.Contains(t, errs, fmt.Sprintf(named, root))
	assert.Contains(t, out, "FAILED: ")
	assert.Contains(t, out, fmt.Sprintf(named, root))
	b, err := os.ReadFile(p)
	require.NoError(t, err)
	assert.Contains(t, string(b), fmt.Sprintf(named, root))
	for what, text := range map[string]string{"stderr": errs, "stdout": out, "--json": string(b)} {
		assert.NotContains(t, text, "Config.Timeout", what)
	}
}
