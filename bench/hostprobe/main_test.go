package main

import (
	"os"
	"os/exec"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestProbeMovesBytes: a probe runs for the time asked, on CPUs this
// process may use, and receives something (on a loaded machine the
// pinned receiver may start late, but not 200 ms late).
func TestProbeMovesBytes(t *testing.T) {
	r, err := probe(200 * time.Millisecond)
	require.NoError(t, err)
	assert.Equal(t, 200*time.Millisecond, r.elapsed)
	assert.Positive(t, r.bytes)
	a, b, err := twoCPUs()
	require.NoError(t, err)
	assert.Equal(t, []int{a, b}, []int{r.tx, r.rx})
}

// TestGbpsOfNothing: no time, no rate (rather than a division by zero).
func TestGbpsOfNothing(t *testing.T) {
	assert.Zero(t, result{bytes: 5}.gbps())
	assert.InDelta(t, 2.0, result{bytes: 2e9, elapsed: time.Second}.gbps(), 1e-9)
}

// TestCommandLine: the command prints its one line, and refuses an
// argument or a duration that is not positive with status 2.
func TestCommandLine(t *testing.T) {
	if os.Getenv("HOSTPROBE_MAIN") == "1" {
		os.Args = append([]string{"hostprobe"}, splitArgs(os.Getenv("HOSTPROBE_ARGS"))...)
		main()
		os.Exit(0)
	}
	run := func(args string) (string, int) {
		cmd := exec.Command(os.Args[0], "-test.run=^TestCommandLine$")
		cmd.Env = append(os.Environ(), "HOSTPROBE_MAIN=1", "HOSTPROBE_ARGS="+args)
		out, err := cmd.CombinedOutput()
		code := 0
		if ee, ok := err.(*exec.ExitError); ok {
			code = ee.ExitCode()
		} else {
			require.NoError(t, err)
		}
		return string(out), code
	}
	out, code := run("-t 20ms")
	assert.Equal(t, 0, code, out)
	assert.Regexp(t, regexp.MustCompile(`^PROBE gbps=[0-9.]+ cpus=[0-9]+,[0-9]+ seconds=0\.020\n`), out)
	for _, args := range []string{"-t 0s", "extra", "-t nonsense"} {
		out, code := run(args)
		assert.Equal(t, 2, code, "%s: %s", args, out)
	}
}

func splitArgs(s string) []string { return strings.Fields(s) }
