package rccl

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/metaroce/metaroce/gpu"
	"github.com/metaroce/metaroce/gpu/internal/ctest"
	"github.com/metaroce/metaroce/gpu/internal/dl"
	"github.com/stretchr/testify/require"
)

// searchEnv sets every variable the search reads: those in env, the others
// empty, so that the machine's own environment does not leak into a case.
func searchEnv(t *testing.T, env map[string]string) {
	t.Helper()
	for _, k := range []string{EnvLib, gpu.EnvLDLibraryPath, gpu.EnvVirtualEnv, gpu.EnvCondaPrefix, gpu.EnvPythonUserBase, "HOME"} {
		t.Setenv(k, env[k])
	}
}

// sonames are the names left to the dynamic linker, in their order.
var sonames = []string{"librccl.so", "librccl.so.1", "libnccl.so.2", "libnccl.so"}

// TestSearchOrder finds RCCL and NCCL in fake trees of the places users have
// them: nothing is loaded, only the order of the candidates is checked.
func TestSearchOrder(t *testing.T) {
	in, env := ctest.FakeTree(t,
		"ld/libnccl.so.2",
		"venv/lib/python3.12/site-packages/nvidia/nccl/lib/libnccl.so.2",
		"rocmvenv/lib/python3.10/site-packages/torch/lib/librccl.so",
		"rocmvenv/lib/python3.10/site-packages/torch/lib/libamdhip64.so",
		"conda/lib/python3.11/site-packages/nvidia/nccl/lib/libnccl.so.2",
		"conda/lib/libnccl.so.2",
		"conda/lib/libnccl.so",
		"home/.local/lib/python3.12/site-packages/nvidia/nccl/lib/libnccl.so.2",
		"userbase/lib/python3.9/site-packages/torch/lib/libnccl-4a1b2c3d.so.2",
		"userbase/lib/python3.9/site-packages/torch/lib/libnccl-net-metaroce.so",
		"v[1]*/lib/python3.12/site-packages/nvidia/nccl/lib/libnccl.so.2",
	)
	// nccl puts NCCL candidates after the system's RCCL names, where every
	// NCCL place comes; rccl puts RCCL candidates first.
	nccl := func(found ...string) []string {
		return append(append(append([]string{}, sonames[:2]...), found...), sonames[2:]...)
	}
	rccl := func(found ...string) []string { return append(found, sonames...) }

	for _, tc := range []struct {
		name string
		env  map[string]string
		want []string // candidates inside root, and sonames
	}{
		{"nothing set: the linker's names, as before", map[string]string{}, sonames},
		{"a virtualenv's nvidia-nccl wheel comes before the system's NCCL, after its RCCL",
			env(gpu.EnvVirtualEnv, "venv"),
			nccl(in("venv/lib/python3.12/site-packages/nvidia/nccl/lib/libnccl.so.2"))},
		{"a ROCm PyTorch's bundled librccl",
			env(gpu.EnvVirtualEnv, "rocmvenv"),
			rccl(in("rocmvenv/lib/python3.10/site-packages/torch/lib/librccl.so"))},
		{"a conda environment: its pip wheels, then conda's own package in lib",
			env(gpu.EnvCondaPrefix, "conda"),
			nccl(in("conda/lib/python3.11/site-packages/nvidia/nccl/lib/libnccl.so.2"),
				in("conda/lib/libnccl.so.2"), in("conda/lib/libnccl.so"))},
		{"pip install --user under ~/.local",
			env("HOME", "home"),
			nccl(in("home/.local/lib/python3.12/site-packages/nvidia/nccl/lib/libnccl.so.2"))},
		{"PYTHONUSERBASE instead of ~/.local; an older PyTorch's libnccl in torch/lib, not a net plugin beside it",
			env("HOME", "home", gpu.EnvPythonUserBase, "userbase"),
			nccl(in("userbase/lib/python3.9/site-packages/torch/lib/libnccl-4a1b2c3d.so.2"))},
		{"all at once: LD_LIBRARY_PATH, virtualenv, conda, user, system",
			env(gpu.EnvLDLibraryPath, "ld", gpu.EnvVirtualEnv, "venv", gpu.EnvCondaPrefix, "conda", "HOME", "home"),
			nccl(in("ld/libnccl.so.2"),
				in("venv/lib/python3.12/site-packages/nvidia/nccl/lib/libnccl.so.2"),
				in("conda/lib/python3.11/site-packages/nvidia/nccl/lib/libnccl.so.2"),
				in("conda/lib/libnccl.so.2"), in("conda/lib/libnccl.so"),
				in("home/.local/lib/python3.12/site-packages/nvidia/nccl/lib/libnccl.so.2"))},
		{"the user's CUDA NCCL does not take the place of a ROCm machine's RCCL",
			env("HOME", "home", gpu.EnvVirtualEnv, "rocmvenv"),
			[]string{in("rocmvenv/lib/python3.10/site-packages/torch/lib/librccl.so"), "librccl.so", "librccl.so.1",
				in("home/.local/lib/python3.12/site-packages/nvidia/nccl/lib/libnccl.so.2"), "libnccl.so.2", "libnccl.so"}},
		{"a directory with glob characters in its name is a name, not a pattern",
			env(gpu.EnvVirtualEnv, "v[1]*"),
			nccl(in("v[1]*/lib/python3.12/site-packages/nvidia/nccl/lib/libnccl.so.2"))},
		{"variables that point at empty trees add nothing",
			env(gpu.EnvLDLibraryPath, "none", gpu.EnvVirtualEnv, "none", gpu.EnvCondaPrefix, "none", "HOME", "none"),
			sonames},
	} {
		t.Run(tc.name, func(t *testing.T) {
			searchEnv(t, tc.env)
			var got []string
			for _, c := range dl.Candidates(librarySpec.Search()) {
				// The machine's own /opt/rocm or system PyTorch may add
				// files; the fake tree and the sonames are what is checked.
				if strings.HasPrefix(c, in("")) || !strings.Contains(c, "/") {
					got = append(got, c)
				}
			}
			require.Equal(t, tc.want, got)
		})
	}
}

// TestOpenFromVirtualEnv loads the fake NCCL from where the nvidia-nccl-cu12
// wheel puts libnccl in a virtualenv, with no variable naming it.
func TestOpenFromVirtualEnv(t *testing.T) {
	lib := ctest.SharedLib(t, "libnccl.so.2", fakeSources)
	venv := t.TempDir()
	dst := filepath.Join(venv, "lib", "python3.12", "site-packages", "nvidia", "nccl", "lib", "libnccl.so.2")
	require.NoError(t, os.MkdirAll(filepath.Dir(dst), 0o755))
	require.NoError(t, os.Symlink(lib, dst))
	searchEnv(t, map[string]string{gpu.EnvVirtualEnv: venv})
	l, err := Open("")
	require.NoError(t, err)
	require.Equal(t, dst, l.Path())
	require.False(t, l.IsRCCL())
}
