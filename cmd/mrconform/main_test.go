package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/xml"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/metaroce/metaroce/conformance"
	"github.com/metaroce/metaroce/conformance/control"
	"github.com/stretchr/testify/require"
)

// mainArgsEnv, when set in the environment of this test binary, makes it
// run mrconform's main with these arguments (one a line) instead of the
// tests, so that a test can signal a real mrconform process.
const mainArgsEnv = "MRCONFORM_TEST_MAIN_ARGS"

// signalsParent, as the only argument of this test binary, makes it an IUT
// process that answers listen and then sends SIGTERM to the process that
// started it (see signalsParentIUT).
const signalsParent = "iut-signals-parent"

func TestMain(m *testing.M) {
	// The IUT first: it inherits the environment of the mrconform that
	// starts it.
	if len(os.Args) == 2 && os.Args[1] == signalsParent {
		os.Exit(signalsParentIUT())
	}
	if a, ok := os.LookupEnv(mainArgsEnv); ok {
		os.Args = append([]string{"mrconform"}, strings.Split(a, "\n")...)
		main()
		return // main exits
	}
	os.Exit(m.Run())
}

// signalsParentIUT speaks the control contract without a datapath: listen
// is answered with an address where nothing listens, after which the
// process that started it (mrconform) gets SIGTERM, as from kill or a CI
// job's timeout; quit is answered and ends it, anything else is answered
// ok.
func signalsParentIUT() int {
	sc := bufio.NewScanner(os.Stdin)
	for sc.Scan() {
		req, err := control.ParseRequest(sc.Text())
		rep := control.Reply{OK: true}
		if err != nil {
			rep = control.Fail(err)
		} else if req.Cmd == control.CmdListen {
			rep.Addr = "127.0.0.1:9"
		}
		os.Stdout.Write(append(rep.Format(), '\n'))
		switch {
		case err == nil && req.Cmd == control.CmdListen:
			syscall.Kill(os.Getppid(), syscall.SIGTERM)
		case err == nil && req.Cmd == control.CmdQuit:
			return 0
		}
	}
	return 0
}

// TestSignalStillReports runs mrconform as a process and sends it SIGTERM
// once its IUT is up: it exits 143 (128 + SIGTERM's number, not SIGINT's
// 130 as it did for any signal) having written
// every report, the JUnit file with every case selected, each failed as
// cut short or not run, and says so. The signal killed it: no report on
// stdout, and the JUnit file it had created before the run left empty.
func TestSignalStillReports(t *testing.T) {
	junit := filepath.Join(t.TempDir(), "report.xml")
	cmd := exec.Command(os.Args[0])
	cmd.Env = append(os.Environ(), mainArgsEnv+"="+strings.Join([]string{
		"--iut", os.Args[0] + " " + signalsParent, "--cases", "handshake,sack", "--format", "tap", "--junit", junit, "--timeout", "60s"}, "\n"))
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	require.NoError(t, cmd.Start())
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	var err error
	select {
	case err = <-exited:
	case <-time.After(2 * time.Minute):
		cmd.Process.Kill() // our own child
		<-exited
		t.Fatalf("mrconform did not end within 2 minutes; stderr:\n%s", errb.String())
	}
	var ee *exec.ExitError
	require.True(t, errors.As(err, &ee), "%v; stderr:\n%s", err, errb.String())
	require.Equal(t, 128+int(syscall.SIGTERM), ee.ExitCode(), "128 + SIGTERM's number; %v; stderr:\n%s", err, errb.String())
	require.Contains(t, errb.String(), "mrconform: stopped (terminated signal received); the reports cover the cases run before it")
	require.Contains(t, out.String(), "1..2\n")
	require.Contains(t, out.String(), "not ok 2 - sack")
	x, err := os.ReadFile(junit)
	require.NoError(t, err)
	var s struct {
		Tests    int `xml:"tests,attr"`
		Failures int `xml:"failures,attr"`
	}
	require.NoError(t, xml.Unmarshal(x, &s), "%q", x)
	require.Equal(t, 2, s.Tests)
	require.Equal(t, 2, s.Failures, "a case the signal cut short or prevented is no pass")
}

// TestUsage: every mistake in the command line is found before anything
// runs and exits 2, never 1, which would blame the implementation.
func TestUsage(t *testing.T) {
	for _, args := range [][]string{nil, {"--self", "--addr", "127.0.0.1:1"}, {"--addr", "nonsense"}, {"--bogus"},
		{"--self", "--format", "pdf"}, {"--self", "--cases", "nosuch"}, {"--iut", "/nonexistent/iut"}, {"--self", "extra"},
		{"--self", "--timeout", "0s"}, {"--self", "--timeout", "-1s"}, {"--addr", "127.0.0.1:9", "--timeout", "0s"},
		{"--iut", "   "}, {"--self", "--junit", "/nonexistent-dir/report.xml"},
		// Nothing can be sent to port 0 or to no address at all: the
		// command line is wrong, not the implementation.
		{"--addr", "127.0.0.1:0"}, {"--addr", "0.0.0.0:4793"}, {"--addr", "[::]:4793"},
		// A case named twice would run and be reported twice.
		{"--self", "--cases", "sack,sack"}, {"--self", "--cases", "handshake,sack,handshake"}} {
		var out, errb bytes.Buffer
		require.Equal(t, exitUsage, run(context.Background(), args, &out, &errb), "%v", args)
		require.NotEmpty(t, errb.String(), "%v", args)
		require.Empty(t, out.String(), "%v: nothing ran", args)
	}
	var out, errb bytes.Buffer
	require.Equal(t, exitUsage, run(context.Background(), []string{"--self", "--cases", "sack,reorder,sack"}, &out, &errb))
	require.Contains(t, errb.String(), `case "sack" named twice`)
}

// TestAddrOnlyControlCases: --addr with --cases naming only cases that need
// a control channel is bad usage, naming the cases and the way out: every
// case was skipped and the run exited 0, a pass that judged nothing.
func TestAddrOnlyControlCases(t *testing.T) {
	var out, errb bytes.Buffer
	require.Equal(t, exitUsage, run(context.Background(), []string{"--addr", "127.0.0.1:9", "--cases", "sack,reorder"}, &out, &errb))
	require.Empty(t, out.String(), "nothing ran")
	require.Contains(t, errb.String(), "--cases sack,reorder: every case named needs a control channel, which --addr has not")
	require.Contains(t, errb.String(), "give --iut COMMAND to run them, or name cases that run on an address alone: handshake, unknown-conn, not-ready, close")
}

func TestHelpExitsZero(t *testing.T) {
	for _, h := range []string{"-h", "--help"} {
		var out, errb bytes.Buffer
		require.Equal(t, exitOK, run(context.Background(), []string{h}, &out, &errb), h)
		require.Contains(t, out.String(), "Exit status:", h)
		require.Empty(t, errb.String(), h)
	}
}

// TestIUTThatDoesNotAnswer: a program that exists but does not speak the
// control contract is a failure of the IUT (1), not bad usage.
func TestIUTThatDoesNotAnswer(t *testing.T) {
	var out, errb bytes.Buffer
	require.Equal(t, exitFail, run(context.Background(), []string{"--iut", "false", "--timeout", "30s"}, &out, &errb))
	require.Contains(t, errb.String(), "starting the IUT")
}

// TestJUnitWhenIUTDoesNotStart: the JUnit report asked for is written,
// well-formed, when the IUT cannot be brought up: every case selected
// fails, saying why it did not run. It was left empty, which CI reads as a
// broken report rather than a failed run.
func TestJUnitWhenIUTDoesNotStart(t *testing.T) {
	junit := filepath.Join(t.TempDir(), "report.xml")
	var out, errb bytes.Buffer
	code := run(context.Background(), []string{"--iut", "false", "--timeout", "30s", "--cases", "handshake,sack", "--junit", junit}, &out, &errb)
	require.Equal(t, exitFail, code)
	require.Contains(t, errb.String(), "starting the IUT")
	x, err := os.ReadFile(junit)
	require.NoError(t, err)
	var s struct {
		Tests    int `xml:"tests,attr"`
		Failures int `xml:"failures,attr"`
		Cases    []struct {
			Name    string `xml:"name,attr"`
			Failure *struct {
				Message string `xml:"message,attr"`
			} `xml:"failure"`
		} `xml:"testcase"`
	}
	require.NoError(t, xml.Unmarshal(x, &s), "%q", x)
	require.Equal(t, 2, s.Tests)
	require.Equal(t, 2, s.Failures)
	for _, c := range s.Cases {
		require.NotNil(t, c.Failure, c.Name)
		require.Contains(t, c.Failure.Message, "not run: starting the IUT", c.Name)
	}
	require.Contains(t, out.String(), "not ok 2 - sack", "the reports on stdout say the same")
}

// TestJUnitWriteError: a report that cannot be written fails the run (1),
// and never hides a failed mandatory case behind another status.
func TestJUnitWriteError(t *testing.T) {
	if _, err := os.Stat("/dev/full"); err != nil {
		t.Skip("no /dev/full to fail writes:", err)
	}
	var out, errb bytes.Buffer
	code := run(context.Background(), []string{"--addr", "127.0.0.1:9", "--timeout", "30s", "--cases", "handshake", "--junit", "/dev/full"}, &out, &errb)
	require.Equal(t, exitFail, code, "stderr %s", errb.String())
	require.Contains(t, out.String(), "not ok 1 - handshake")
	require.Contains(t, errb.String(), "--junit /dev/full")

	out.Reset()
	errb.Reset()
	code = run(context.Background(), []string{"--self", "--timeout", "60s", "--cases", "handshake", "--junit", "/dev/full"}, &out, &errb)
	require.Contains(t, out.String(), "ok 1 - handshake")
	require.NotContains(t, out.String(), "not ok")
	require.Equal(t, exitFail, code, "the cases passed but the report was lost; stderr %s", errb.String())
	require.Contains(t, errb.String(), "--junit /dev/full")
}

// TestAddrOnly runs against an address where nothing answers: the handshake
// cases fail (exit 1) and the cases that need control are skipped.
func TestAddrOnly(t *testing.T) {
	var out, errb bytes.Buffer
	code := run(context.Background(), []string{"--addr", "127.0.0.1:9", "--timeout", "30s", "--cases", "handshake,sack"}, &out, &errb)
	require.Equal(t, exitFail, code)
	require.Contains(t, out.String(), "not ok 1 - handshake")
	require.Contains(t, out.String(), "# SKIP")
}

// TestProcessIUT builds mrpeer and runs the suite against it as a separate
// process through the control contract, with every report format. Every
// mandatory case must pass.
func TestProcessIUT(t *testing.T) {
	if testing.Short() {
		t.Skip("builds mrpeer")
	}
	dir := t.TempDir()
	bin := filepath.Join(dir, "mrpeer")
	build := exec.Command("go", "build", "-o", bin, "../mrpeer")
	build.Stderr = os.Stderr
	require.NoError(t, build.Run())
	junit := filepath.Join(dir, "report.xml")
	var out, errb bytes.Buffer
	code := run(context.Background(), []string{"--iut", bin + " --seed 5", "--timeout", "90s", "--format", "tap,human", "--junit", junit}, &out, &errb)
	t.Log("\n" + out.String())
	require.Contains(t, out.String(), "TAP version 13")
	require.Contains(t, out.String(), "CASE")
	x, err := os.ReadFile(junit)
	require.NoError(t, err)
	var s struct {
		Tests int `xml:"tests,attr"`
		Cases []struct {
			Name    string    `xml:"name,attr"`
			Failure *struct{} `xml:"failure"`
		} `xml:"testcase"`
	}
	require.NoError(t, xml.Unmarshal(x, &s))
	require.Equal(t, len(conformance.Cases()), s.Tests)
	for _, c := range s.Cases {
		require.Nil(t, c.Failure, "case %s failed against mrpeer", c.Name)
	}
	require.Zero(t, code, "exit status %d, stderr %s", code, errb.String())
	require.NotContains(t, out.String(), "# SKIP", "every case runs through the control contract")
}

// TestBadFlagValueOneLine: a value the flag package cannot parse is named
// as typed in one line that says where the flags are listed, not above the
// whole usage.
func TestBadFlagValueOneLine(t *testing.T) {
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"--timeout", "x"}, `mrconform: invalid value "x" for flag --timeout`},
		{[]string{"--seed=-1"}, `mrconform: invalid value "-1" for flag --seed: want a whole number, 0 or more`},
		{[]string{"--bogus"}, "mrconform: unknown flag --bogus (mrconform -h lists the flags)"},
	} {
		var out, errb bytes.Buffer
		require.Equal(t, exitUsage, run(context.Background(), c.args, &out, &errb), "%v", c.args)
		require.Contains(t, errb.String(), c.want, "%v", c.args)
		require.Equal(t, 1, strings.Count(errb.String(), "\n"), "one line: %q", errb.String())
		require.Empty(t, out.String())
	}
}
