package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/metaroce/metaroce/internal/interrupt"
	"github.com/metaroce/metaroce/netlab"
	"github.com/metaroce/metaroce/soak"
	"github.com/stretchr/testify/require"
)

// mainArgsEnv, when set in the environment of this test binary, makes it
// run mrsoak's main with these arguments (one a line) instead of the
// tests, so that a test can signal a real mrsoak process.
const mainArgsEnv = "MRSOAK_TEST_MAIN_ARGS"

func TestMain(m *testing.M) {
	if a, ok := os.LookupEnv(mainArgsEnv); ok {
		os.Args = append([]string{"mrsoak"}, strings.Split(a, "\n")...)
		main()
		return // main exits
	}
	os.Exit(m.Run())
}

// TestUsageErrors: every bad flag value exits 2 and is named, flag and
// value, in the error; several bad values are each named. A bad -ranks,
// -ops, -maxcount, -plugin-every or -rounds used to get one sentence
// listing every limit and naming neither.
func TestUsageErrors(t *testing.T) {
	for _, c := range []struct {
		args []string
		want []string
	}{
		{[]string{"-ranks", "1"}, []string{"-ranks 1: want 2..64"}},
		{[]string{"-ranks", "65"}, []string{"-ranks 65: want 2..64"}},
		{[]string{"-ops", "1"}, []string{"-ops 1: want at least 2"}},
		{[]string{"-maxcount", "0"}, []string{"-maxcount 0: want a positive"}},
		{[]string{"-plugin-every", "1"}, []string{"-plugin-every 1: want at least 2"}},
		{[]string{"-rounds", "-1"}, []string{"-rounds -1: want 0"}},
		{[]string{"-duration", "0s"}, []string{"-duration 0s: want a positive duration"}},
		{[]string{"-duration", "-1s"}, []string{"-duration -1s: want a positive duration"}},
		{[]string{"-ranks", "x"}, []string{`invalid value "x" for flag -ranks`}},
		{[]string{"-bogus"}, []string{"-bogus"}},
		{[]string{"extra"}, []string{`unexpected arguments ["extra"]`}},
		{[]string{"-ops", "0", "-rounds", "-3"}, []string{"-ops 0:", "-rounds -3:"}},
	} {
		var out, errb bytes.Buffer
		require.Equal(t, exitUsage, run(context.Background(), c.args, &out, &errb), "%v", c.args)
		for _, w := range c.want {
			require.Contains(t, errb.String(), w, "%v", c.args)
		}
		require.Empty(t, out.String(), "%v", c.args)
	}
}

// TestJSONKeys: -json writes the documented snake_case keys, with the
// elapsed time in seconds, and no Go field names or nanoseconds. A run too
// short for one round still writes the whole report.
func TestJSONKeys(t *testing.T) {
	var out, errb bytes.Buffer
	require.Equal(t, exitFail, run(context.Background(), []string{"-duration", "1ns", "-json"}, &out, &errb), errb.String())
	var m map[string]any
	require.NoError(t, json.Unmarshal(out.Bytes(), &m), out.String())
	for _, k := range []string{"mode", "elapsed_s", "rounds", "fault_rounds", "kill_rounds", "ops", "bytes",
		"packets_sent", "retransmits", "lost", "timeouts", "path_changes", "ecn_marks", "ce_recv",
		"faults", "mid_round_faults", "surfaced", "missed_kills", "unexpected", "corrupted",
		"plugin_rounds", "plugin_messages", "plugin_kills", "plugin_surfaced", "plugin_missed_kills", "plugin_failures",
		"goroutines_before", "goroutines_after", "fds_before", "fds_after", "first_errors", "notes",
		"interrupted", "error", "healthy", "problems"} {
		require.Contains(t, m, k)
		delete(m, k)
	}
	require.Empty(t, m, "keys the documentation does not list")
	require.NotContains(t, out.String(), "Elapsed")
	require.Contains(t, out.String(), `"healthy": false`)
}

func TestHelpExitsZero(t *testing.T) {
	for _, h := range []string{"-h", "--help"} {
		var out, errb bytes.Buffer
		require.Equal(t, exitOK, run(context.Background(), []string{h}, &out, &errb), h)
		require.Contains(t, out.String(), "Exit status:", h)
		require.Empty(t, errb.String(), h)
	}
}

// TestNothingCheckedFails: a duration too short for one round checks
// nothing, and that is no success.
func TestNothingCheckedFails(t *testing.T) {
	var out, errb bytes.Buffer
	require.Equal(t, exitFail, run(context.Background(), []string{"-duration", "1ns"}, &out, &errb))
	require.Contains(t, out.String(), "healthy false (nothing was checked")
}

// TestReportKeptOnError: a run that a round's error ends (a fault that
// could not be injected, in netlab mode) still prints the report of the
// rounds before it, as text or JSON, with the error, and fails. Only the
// error was printed: a corruption found in the hour before was lost.
func TestReportKeptOnError(t *testing.T) {
	defer func(f func(context.Context, soak.Options) (*soak.Report, error)) { soakRun = f }(soakRun)
	injecting := errors.New("soak: round 7 (clean): injecting faults: nft: no such table")
	soakRun = func(context.Context, soak.Options) (*soak.Report, error) {
		return &soak.Report{Mode: "netlab", Rounds: 7, Ops: 100, Corrupted: 2, FirstErrors: []string{"round 3: rank 1: boom"},
			Error: injecting.Error()}, injecting
	}
	var out, errb bytes.Buffer
	require.Equal(t, exitFail, run(context.Background(), nil, &out, &errb))
	require.Contains(t, out.String(), "7 rounds")
	require.Contains(t, out.String(), "corrupted results 2")
	require.Contains(t, out.String(), "error: round 3: rank 1: boom")
	require.Contains(t, out.String(), "ended by an error: "+injecting.Error())
	require.Contains(t, errb.String(), "mrsoak: "+injecting.Error())

	out.Reset()
	errb.Reset()
	require.Equal(t, exitFail, run(context.Background(), []string{"-json"}, &out, &errb))
	var m map[string]any
	require.NoError(t, json.Unmarshal(out.Bytes(), &m), out.String())
	require.Equal(t, float64(2), m["corrupted"])
	require.Equal(t, false, m["healthy"])
	require.Equal(t, injecting.Error(), m["error"])
}

// TestFindingsWinOverInterrupt: a run that a signal ended after its rounds
// found corruption (or another finding of a judged round) exits 1, as it
// would without the signal, whether the run returned the report alone or
// with an error; one whose rounds found nothing exits with the interrupted
// status. The status was 130 in every case, which hid the corruption from
// a script that reads only the status.
func TestFindingsWinOverInterrupt(t *testing.T) {
	defer func(f func(context.Context, soak.Options) (*soak.Report, error)) { soakRun = f }(soakRun)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()                    // the signal came
	const exitInterrupted = 130 // SIGINT's, for a context ended without a signal as its cause
	for _, c := range []struct {
		name string
		rep  soak.Report
		err  error
		want int
		says string
	}{
		{"corrupted", soak.Report{Rounds: 3, Ops: 50, Corrupted: 2}, nil, exitFail, "corrupted results 2"},
		{"corrupted, ended by an error", soak.Report{Rounds: 3, Ops: 50, Corrupted: 1}, errors.New("round 4: injecting faults: boom"), exitFail, "corrupted results 1"},
		{"unexpected", soak.Report{Rounds: 3, Ops: 50, Unexpected: 1}, nil, exitFail, "unexpected errors 1"},
		{"missed kill", soak.Report{Rounds: 3, Ops: 50, MissedKills: 1}, nil, exitFail, "missed kills 1"},
		{"plugin failure", soak.Report{PluginRounds: 1, PluginFailures: 1}, nil, exitFail, "plugin failures 1"},
		{"clean", soak.Report{Rounds: 3, Ops: 50}, nil, exitInterrupted, "interrupted"},
		{"clean, ended by an error", soak.Report{Rounds: 3, Ops: 50}, errors.New("round 4: interrupted"), exitInterrupted, "round 4"},
	} {
		t.Run(c.name, func(t *testing.T) {
			soakRun = func(context.Context, soak.Options) (*soak.Report, error) {
				rep := c.rep
				rep.Mode, rep.Interrupted = "driver", true
				if c.err != nil {
					rep.Error = c.err.Error()
				}
				return &rep, c.err
			}
			var out, errb bytes.Buffer
			require.Equal(t, c.want, run(ctx, nil, &out, &errb), errb.String())
			require.Contains(t, errb.String(), c.says)
		})
	}
}

// TestSignalExitStatus: a run that a signal ended, its rounds having found
// nothing wrong, exits 128 plus the signal's number (130 for SIGINT, 143
// for SIGTERM, 129 for SIGHUP), the shell's convention that the GPU check
// scripts follow. It exited 130 for each of them.
func TestSignalExitStatus(t *testing.T) {
	defer func(f func(context.Context, soak.Options) (*soak.Report, error)) { soakRun = f }(soakRun)
	soakRun = func(context.Context, soak.Options) (*soak.Report, error) {
		return &soak.Report{Mode: "driver", Rounds: 2, Ops: 40, Interrupted: true}, nil
	}
	for sig, want := range map[syscall.Signal]int{syscall.SIGINT: 130, syscall.SIGTERM: 143, syscall.SIGHUP: 129} {
		ctx, cancel := context.WithCancelCause(context.Background())
		cancel(interrupt.Signal{Sig: sig})
		var out, errb bytes.Buffer
		require.Equal(t, want, run(ctx, nil, &out, &errb), "%v: %s", sig, errb.String())
	}
}

// TestRoundsWithoutDuration: -rounds alone runs that many rounds, not as
// many as fit the default -duration of 10 s (-rounds 100000 ran some 370
// and reported success); with -duration given too, both bound the run.
func TestRoundsWithoutDuration(t *testing.T) {
	defer func(f func(context.Context, soak.Options) (*soak.Report, error)) { soakRun = f }(soakRun)
	var got soak.Options
	soakRun = func(_ context.Context, opt soak.Options) (*soak.Report, error) {
		got = opt
		return &soak.Report{Mode: "driver", Rounds: opt.MaxRounds, Ops: 1}, nil
	}
	var out, errb bytes.Buffer
	require.Equal(t, exitOK, run(context.Background(), []string{"-rounds", "100000"}, &out, &errb), errb.String())
	require.Equal(t, 100000, got.MaxRounds)
	require.Greater(t, got.Duration, 100*365*24*time.Hour, "no time limit but the rounds")

	require.Equal(t, exitOK, run(context.Background(), []string{"-rounds", "100000", "-duration", "2m"}, &out, &errb), errb.String())
	require.Equal(t, 2*time.Minute, got.Duration)
	require.Equal(t, exitOK, run(context.Background(), nil, &out, &errb), errb.String())
	require.Equal(t, 10*time.Second, got.Duration, "the default without -rounds")
}

func TestShortRun(t *testing.T) {
	if testing.Short() {
		t.Skip("runs the soak for a second")
	}
	var out, errb bytes.Buffer
	code := run(context.Background(), []string{"-duration", "1s", "-ops", "4", "-maxcount", "4096", "-json"}, &out, &errb)
	require.Equal(t, 0, code, "stdout %s\nstderr %s", out.String(), errb.String())
	require.Contains(t, out.String(), `"corrupted": 0`)
	require.Contains(t, out.String(), `"healthy": true`)
}

// TestNetlabRun asks for the namespace fabric: as root with nftables it
// runs there, elsewhere it says why and soaks with driver-level faults;
// either way the short run is healthy.
func TestNetlabRun(t *testing.T) {
	if testing.Short() {
		t.Skip("runs the soak for a few rounds")
	}
	var out, errb bytes.Buffer
	code := run(context.Background(), []string{"--netlab", "-rounds", "3", "-ops", "4", "-maxcount", "4096"}, &out, &errb)
	require.Equal(t, 0, code, "stdout %s\nstderr %s", out.String(), errb.String())
	require.Contains(t, out.String(), "healthy true")
	if !strings.Contains(out.String(), "soak (netlab faults)") {
		require.Contains(t, errb.String(), "netlab mode not possible")
	}
}

// TestSignalTearsDownFabric runs mrsoak --netlab as a process, sends it
// SIGTERM or SIGHUP once its first round is done, and checks that it exits
// with 128 plus the signal's number and leaves none of its lab's namespaces
// (and with them the nftables table on the lab's switch) nor its owner
// marker behind.
func TestSignalTearsDownFabric(t *testing.T) {
	if testing.Short() {
		t.Skip("builds a namespace fabric in a child process")
	}
	if err := netlab.Available(); err != nil {
		t.Skip(err)
	}
	for _, sig := range []syscall.Signal{syscall.SIGTERM, syscall.SIGHUP} {
		t.Run(sig.String(), func(t *testing.T) {
			cmd := exec.Command(os.Args[0])
			cmd.Env = append(os.Environ(), mainArgsEnv+"="+strings.Join([]string{"--netlab", "-v", "-duration", "10m", "-ops", "4", "-maxcount", "4096"}, "\n"))
			stderr, err := cmd.StderrPipe()
			require.NoError(t, err)
			require.NoError(t, cmd.Start())
			exited := make(chan error, 1)
			var lab string
			var log strings.Builder
			go func() {
				sc := bufio.NewScanner(stderr)
				signalled := false
				for sc.Scan() {
					line := sc.Text()
					log.WriteString(line + "\n")
					if f := strings.Fields(line); len(f) >= 3 && f[0] == "netlab:" && f[1] == "fabric" {
						lab = f[2]
					}
					if !signalled && strings.HasPrefix(line, "round 1 (") {
						signalled = true
						cmd.Process.Signal(sig)
					}
				}
				exited <- cmd.Wait()
			}()
			var werr error
			select {
			case werr = <-exited:
			case <-time.After(2 * time.Minute):
				cmd.Process.Kill() // our own child
				<-exited
				t.Fatalf("mrsoak did not end within 2 minutes of its start; stderr:\n%s", log.String())
			}
			require.NotEmpty(t, lab, "no fabric built; stderr:\n%s", log.String())
			t.Cleanup(func() { removeLab(lab) }) // whatever the child left, should a check fail
			var ee *exec.ExitError
			require.True(t, errors.As(werr, &ee), "%v; stderr:\n%s", werr, log.String())
			require.Equal(t, 128+int(sig), ee.ExitCode(), "128 + the signal's number; %v; stderr:\n%s", werr, log.String())
			out, err := exec.Command("ip", "netns", "list").Output()
			require.NoError(t, err)
			require.NotContains(t, string(out), lab, "namespaces of lab %s left behind", lab)
			_, err = os.Stat(filepath.Join(netlab.OwnerDir, lab))
			require.True(t, errors.Is(err, fs.ErrNotExist), "owner marker of lab %s: %v", lab, err)
		})
	}
}

// removeLab deletes what remains of lab id after its owner, a child of the
// test, has exited: its namespaces and its owner marker. (The next
// netlab.New would reap them too.)
func removeLab(id string) {
	out, err := exec.Command("ip", "netns", "list").Output()
	if err != nil {
		return
	}
	for _, f := range strings.Fields(string(out)) {
		if strings.HasPrefix(f, id+"-") {
			exec.Command("ip", "netns", "del", f).Run()
		}
	}
	os.Remove(filepath.Join(netlab.OwnerDir, id))
}
