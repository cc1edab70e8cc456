package check

import (
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/metaroce/metaroce/internal/scripttest"
)

// script is the check, relative to this package's directory.
const script = "nccl_plugin.sh"

// TestSkipsWithoutPyTorch runs the check on a PATH of a few tools and a
// stub python3 that fails as a real one does in each case. The whole
// output must be one SKIP line naming the reason, the exit status 0, and
// no plugin may be built first. A missing torch used to print Python's
// traceback above the SKIP line.
func TestSkipsWithoutPyTorch(t *testing.T) {
	bash, err := exec.LookPath("bash")
	if err != nil {
		t.Skip("bash not found")
	}
	for _, c := range []struct{ name, python, reason string }{
		{"no python3", "", "python3 not found"},
		{"no torch", `cat >/dev/null
echo 'Traceback (most recent call last):' >&2
echo '  File "<stdin>", line 2, in <module>' >&2
echo "ModuleNotFoundError: No module named 'torch'" >&2
exit 1`, "python3 cannot import torch (ModuleNotFoundError: No module named 'torch')"},
		{"killed", `exit 137`, "python3 cannot import torch (exit status 137)"},
		{"no CUDA device", `cat >/dev/null; exit 3`, "PyTorch sees no CUDA device"},
		{"no NCCL", `cat >/dev/null; exit 4`, "this PyTorch has no NCCL"},
	} {
		t.Run(c.name, func(t *testing.T) {
			bin := scripttest.ToolDir(t, "cat", "dirname", "mktemp", "rm", "tail")
			stub := func(name, body string) { scripttest.Stub(t, bin, name, body) }
			if c.python != "" {
				stub("python3", c.python)
			}
			built := filepath.Join(t.TempDir(), "built")
			stub("go", `: >"`+built+`"; exit 1`)
			cmd := exec.Command(bash, script)
			cmd.Env = []string{"PATH=" + bin, "TMPDIR=" + t.TempDir()}
			out, err := cmd.CombinedOutput()
			require.NoError(t, err, "%s", out)
			require.True(t, strings.HasPrefix(string(out), "SKIP: PyTorch with CUDA and one GPU required: "), "%s", out)
			require.Contains(t, string(out), c.reason)
			require.Equal(t, 1, strings.Count(string(out), "\n"), "one line: %s", out)
			require.NotContains(t, string(out), "Traceback")
			require.NoFileExists(t, built, "the plugin was built before the prerequisites were checked")
		})
	}
}
