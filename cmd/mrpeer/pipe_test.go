package main

import (
	"bytes"
	"errors"
	"os"
	"os/exec"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// asMainEnv makes the test binary run mrpeer's main instead of the tests
// (TestMain), so that a test can give it a real stdout.
const asMainEnv = "MRPEER_TEST_AS_MAIN"

func TestMain(m *testing.M) {
	if os.Getenv(asMainEnv) != "" {
		os.Args = os.Args[:1] // the test flags are not mrpeer's
		main()
		return
	}
	os.Exit(m.Run())
}

// TestStdoutClosedExitsAsTesterGone: a tester that has gone leaves mrpeer
// a stdout pipe whose read end is closed, and the reply mrpeer still
// writes there fails with EPIPE. mrpeer then exits 0, as at the end of its
// input, without a word of a crash on stderr. Before, the runtime's
// default for a broken pipe on stdout killed it with SIGPIPE, which the
// tester's Close reported as "signal: broken pipe".
func TestStdoutClosedExitsAsTesterGone(t *testing.T) {
	r, w, err := os.Pipe()
	require.NoError(t, err)
	require.NoError(t, r.Close()) // nobody will read the replies
	defer w.Close()
	var errb bytes.Buffer
	cmd := exec.Command(os.Args[0])
	cmd.Env = append(os.Environ(), asMainEnv+"=1")
	cmd.Stdin = strings.NewReader("listen\n")
	cmd.Stdout = w
	cmd.Stderr = &errb
	err = cmd.Run()
	var exit *exec.ExitError
	if errors.As(err, &exit) {
		t.Fatalf("mrpeer ended with %v (stderr: %q), want exit status %d", exit, errb.String(), exitOK)
	}
	require.NoError(t, err)
	require.Equal(t, exitOK, cmd.ProcessState.ExitCode())
	require.NotContains(t, errb.String(), "goroutine")
	require.NotContains(t, errb.String(), "panic")
}
