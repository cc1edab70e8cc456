package main

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestBuildWithoutCgo builds mrbench with CGO_ENABLED=0, as a machine without
// a C compiler does, and runs the result: host memory works, and the GPU
// backend says why it is unavailable instead of failing to build.
func TestBuildWithoutCgo(t *testing.T) {
	if testing.Short() {
		t.Skip("builds mrbench without cgo, which compiles every dependency again")
	}
	bin := filepath.Join(t.TempDir(), "mrbench")
	build := exec.Command("go", "build", "-o", bin, ".")
	build.Env = append(os.Environ(), "CGO_ENABLED=0")
	out, err := build.CombinedOutput()
	require.NoError(t, err, "CGO_ENABLED=0 go build: %s", out)

	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	out, err = exec.CommandContext(ctx, bin, "--backend", "rccl", "-np", "1").CombinedOutput()
	var ee *exec.ExitError
	require.True(t, errors.As(err, &ee), "want an exit status, got %v: %s", err, out)
	assert.Equal(t, 2, ee.ExitCode(), "a library that cannot be loaded is the machine's configuration: %s", out)
	assert.Contains(t, string(out), "--backend rccl: rccl: cannot load the RCCL/NCCL library: not available: built without cgo (CGO_ENABLED=0)")

	out, err = exec.CommandContext(ctx, bin, "-np", "2", "-b", "8", "-e", "64", "-n", "1", "-w", "0",
		"--transport", "metaroce", "--timeout", "20s").CombinedOutput()
	require.NoError(t, err, "host-memory run: %s", out)
	assert.Contains(t, string(out), "# Out of bounds values : 0 OK")
}
