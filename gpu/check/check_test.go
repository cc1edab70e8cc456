package check

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/metaroce/metaroce/internal/scripttest"
)

// script is the check, relative to this package's directory.
const script = "mrbench_rccl.sh"

// toolDir and stub build the PATH the check runs under.
func toolDir(t *testing.T, tools ...string) string { return scripttest.ToolDir(t, tools...) }

func stub(t *testing.T, bin, name, body string) { scripttest.Stub(t, bin, name, body) }

func lookBash(t *testing.T) string {
	t.Helper()
	bash, err := exec.LookPath("bash")
	if err != nil {
		t.Skip("bash not found")
	}
	return bash
}

// TestSkipsWithoutGPU: on a machine without an NVIDIA GPU (no nvidia-smi,
// or one that fails or lists no GPU, as it does without a loaded driver)
// the check prints a SKIP line and exits 0, before it looks for PyTorch.
// It used to exit 2 when nvidia-smi was missing, and with nvidia-smi's own
// status, saying nothing, when nvidia-smi failed.
func TestSkipsWithoutGPU(t *testing.T) {
	bash := lookBash(t)
	for _, c := range []struct{ name, smi string }{
		{"no nvidia-smi", ""},
		{"no driver", `echo "NVIDIA-SMI has failed because it couldn't communicate with the NVIDIA driver."; exit 9`},
		{"no device", `echo "No devices were found"; exit 0`},
	} {
		t.Run(c.name, func(t *testing.T) {
			bin := toolDir(t, "head", "sed")
			if c.smi != "" {
				stub(t, bin, "nvidia-smi", c.smi)
			}
			stub(t, bin, "python3", `echo python3 ran >&2; exit 1`)
			cmd := exec.Command(bash, script)
			cmd.Env = []string{"PATH=" + bin, "OUT_DIR=" + t.TempDir()}
			out, err := cmd.CombinedOutput()
			require.NoError(t, err, "%s", out)
			require.True(t, strings.HasPrefix(string(out), "SKIP: "), "%s", out)
			require.NotContains(t, string(out), "python3 ran")
		})
	}
}

// TestBadArgumentExits2: a bad argument is bad usage even without a GPU.
func TestBadArgumentExits2(t *testing.T) {
	bash := lookBash(t)
	cmd := exec.Command(bash, script, "--bogus")
	cmd.Env = []string{"PATH=" + toolDir(t)}
	out, err := cmd.CombinedOutput()
	var ee *exec.ExitError
	require.ErrorAs(t, err, &ee, "%s", out)
	require.Equal(t, 2, ee.ExitCode(), "%s", out)
	require.Contains(t, string(out), "unknown argument --bogus")
}

// TestSignalStopsRanks starts the check with stubs for nvidia-smi and
// PyTorch whose preflight ranks only sleep, and once both ranks run sends
// the script SIGINT as a terminal's Ctrl-C does (to its process group) or
// SIGTERM as kill does (to the script alone). The script must exit with
// 130 or 143 and take both ranks with it: each runs under timeout, in a
// process group that neither signal reaches by itself, and used to keep
// running for up to TIMEOUT_S after the script had gone.
func TestSignalStopsRanks(t *testing.T) {
	bash := lookBash(t)
	bin := toolDir(t, "cat", "head", "mkdir", "sed", "sleep", "tail", "timeout")
	stub(t, bin, "nvidia-smi", `echo "GPU 0: Stub GPU (UUID: GPU-0)"`)
	// python3 -c ... are the checks for PyTorch; python3 FILE is a rank.
	stub(t, bin, "python3", `[ "$1" = -c ] && exit 0
echo $$ >>"$PIDS"
exec sleep 300`)
	scripttest.ForEachSignal(t, func(t *testing.T, c scripttest.Signal) {
		pids := filepath.Join(t.TempDir(), "pids")
		logs := t.TempDir()
		cmd := exec.Command(bash, script, "--torch-only")
		cmd.Env = []string{"PATH=" + bin, "OUT_DIR=" + logs, "PIDS=" + pids,
			"METAROCE_RCCL_LIB=/stub/libnccl.so.2", "METAROCE_CUDART_LIB=/stub/libcudart.so.12"}
		cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
		f, output := scripttest.OutputFile(t)
		cmd.Stdout, cmd.Stderr = f, f
		require.NoError(t, cmd.Start())
		code := scripttest.Interrupt(t, cmd, pids, 2, c.Group, c.Sig, output)
		require.Equal(t, c.Code, code, "output:\n%s", output())
		require.Contains(t, output(), "stopping the ranks")
	})
}

// TestBadMRBENCHRefusedFirst: an MRBENCH that names no executable file (a
// path that does not exist, a directory, whose search bit passes for an
// executable's, or a file that may not run) is refused (exit 2, naming
// it) before the preflight starts any rank, rather than replaced by
// whatever mrbench PATH holds, or failing to run, once the preflight's
// minutes are spent.
func TestBadMRBENCHRefusedFirst(t *testing.T) {
	bash := lookBash(t)
	bin := toolDir(t, "cat", "head", "mkdir", "sed", "sleep", "tail", "timeout")
	stub(t, bin, "nvidia-smi", `echo "GPU 0: Stub GPU (UUID: GPU-0)"`)
	stub(t, bin, "python3", `[ "$1" = -c ] && exit 0
echo $$ >>"$PIDS"
exit 0`)
	stub(t, bin, "mrbench", `exit 0`)
	plain := filepath.Join(t.TempDir(), "mrbench")
	require.NoError(t, os.WriteFile(plain, []byte("#!/bin/sh\n"), 0o644))
	for _, bad := range []string{"/nonexistent/mrbench", t.TempDir(), plain} {
		pids := filepath.Join(t.TempDir(), "pids")
		cmd := exec.Command(bash, script)
		cmd.Env = []string{"PATH=" + bin, "OUT_DIR=" + t.TempDir(), "PIDS=" + pids, "MRBENCH=" + bad,
			"METAROCE_RCCL_LIB=/stub/libnccl.so.2", "METAROCE_CUDART_LIB=/stub/libcudart.so.12"}
		out, err := cmd.CombinedOutput()
		var ee *exec.ExitError
		require.ErrorAs(t, err, &ee, "MRBENCH=%s: %s", bad, out)
		require.Equal(t, 2, ee.ExitCode(), "MRBENCH=%s: %s", bad, out)
		require.Contains(t, string(out), "MRBENCH="+bad+" is not an executable file")
		require.NoFileExists(t, pids, "MRBENCH=%s: a rank started before the check refused it", bad)
	}
}
