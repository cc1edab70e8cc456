// Package scripttest helps tests of shell scripts. It builds the PATH a
// script runs under, of chosen real tools and stubs (ToolDir, Stub), and
// checks that a script stops the processes it started when it is
// interrupted: the script's stubs note their process ids in a file, the
// test signals the script the way a terminal or kill(1) would, and every
// noted process must be gone soon after the script exits.
package scripttest

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// Bounds of Interrupt: for the children to start (a script builds or
// checks things first), for the script to exit after the signal, and for
// each child to be gone after that.
const (
	startWait = 30 * time.Second
	exitWait  = 20 * time.Second
	goneWait  = 5 * time.Second
)

// Interrupt waits until pidFile lists at least children process ids,
// signals cmd (started, in a process group of its own) with sig, to the
// whole group when group is set (as a terminal's Ctrl-C) or to the script
// alone (as kill), and waits for it to exit. It fails t when the script
// runs on, or when a listed process outlives it, and returns the script's
// exit status, which must be a failure. output gives the script's output
// for the failure messages. Whatever is left is killed when t ends.
func Interrupt(t testing.TB, cmd *exec.Cmd, pidFile string, children int, group bool, sig syscall.Signal, output func() string) int {
	t.Helper()
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	var pids []int
	t.Cleanup(func() {
		syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
		for _, p := range pids {
			syscall.Kill(p, syscall.SIGKILL)
		}
	})
	deadline := time.Now().Add(startWait)
	for len(pids) < children {
		// The children are other programs: their pid file is all there
		// is to watch.
		require.True(t, time.Now().Before(deadline), "%d of %d processes started; output:\n%s", len(pids), children, output())
		time.Sleep(20 * time.Millisecond)
		b, _ := os.ReadFile(pidFile)
		pids = pids[:0]
		for _, f := range strings.Fields(string(b)) {
			p, err := strconv.Atoi(f)
			require.NoError(t, err)
			pids = append(pids, p)
		}
	}
	if group {
		require.NoError(t, syscall.Kill(-cmd.Process.Pid, sig))
	} else {
		require.NoError(t, cmd.Process.Signal(sig))
	}
	var werr error
	select {
	case werr = <-done:
	case <-time.After(exitWait):
		t.Fatalf("the script still runs %v after %v; output:\n%s", exitWait, sig, output())
	}
	for _, p := range pids {
		require.Eventually(t, func() bool { return Gone(p) }, goneWait, 20*time.Millisecond,
			"process %d outlived the script (%v); output:\n%s", p, werr, output())
	}
	var ee *exec.ExitError
	require.ErrorAs(t, werr, &ee, "output:\n%s", output())
	return ee.ExitCode()
}

// Gone reports whether process pid has ended: it no longer exists, or it
// is a zombie that its parent has yet to reap.
func Gone(pid int) bool {
	if err := syscall.Kill(pid, 0); errors.Is(err, syscall.ESRCH) {
		return true
	}
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return errors.Is(err, fs.ErrNotExist)
	}
	// The state follows the parenthesised command name.
	s := string(b)
	i := strings.LastIndexByte(s, ')')
	return i >= 0 && i+2 < len(s) && s[i+2] == 'Z'
}

// Signal is one way a script gets interrupted: Sig to its whole process
// group (Group, as a terminal's Ctrl-C) or to the script alone (as kill),
// and the exit status Code the script must then report.
type Signal struct {
	Sig   syscall.Signal
	Group bool
	Code  int
}

// Signals are the interruptions a script that starts processes must
// handle: Ctrl-C at a terminal and kill's default signal.
var Signals = []Signal{
	{syscall.SIGINT, true, 130},
	{syscall.SIGTERM, false, 143},
}

// ForEachSignal runs f as a subtest for each of Signals, skipping SIGINT
// where this process ignores it (a script started from it inherits that
// and cannot trap it).
func ForEachSignal(t *testing.T, f func(t *testing.T, s Signal)) {
	for _, s := range Signals {
		t.Run(s.Sig.String(), func(t *testing.T) {
			if s.Sig == syscall.SIGINT && signal.Ignored(syscall.SIGINT) {
				t.Skip("SIGINT is ignored in this process, and so in the script: it cannot be trapped")
			}
			f(t, s)
		})
	}
}

// OutputFile creates a file in a fresh directory for a script's output and
// returns it, closed when t ends, with a function that reads it whole. A
// file, not a pipe: a process left behind holding the script's output
// must not hold up Wait.
func OutputFile(t testing.TB) (*os.File, func() string) {
	t.Helper()
	name := filepath.Join(t.TempDir(), "output")
	f, err := os.Create(name)
	require.NoError(t, err)
	t.Cleanup(func() { f.Close() })
	return f, func() string { b, _ := os.ReadFile(name); return string(b) }
}
