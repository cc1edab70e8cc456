package scriptcheck

import (
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"
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
