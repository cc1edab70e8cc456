package gpu

import (
	"strings"
	"testing"

	"github.com/metaroce/metaroce/gpu/internal/ctest"
	"github.com/metaroce/metaroce/gpu/internal/dl"
	"github.com/stretchr/testify/require"
)

// searchEnv sets every variable the search reads; the unnamed ones empty, so
// that the machine's own environment does not leak into a case.
func searchEnv(t *testing.T, env map[string]string) {
	t.Helper()
	for _, k := range []string{EnvLDLibraryPath, EnvVirtualEnv, EnvCondaPrefix, EnvPythonUserBase, "HOME"} {
		t.Setenv(k, env[k])
	}
}

// TestLibSearchPlaces checks the order of the places and which variables
// bring them in, without touching the file system.
func TestLibSearchPlaces(t *testing.T) {
	names := []string{"libx.so.2", "libx.so"}
	py := []string{"torch/lib/libx.so*"}
	sys := []dl.Place{Linker("libx.so.2"), {Dirs: []string{"/opt/x/lib"}, Files: []string{"libx.so"}}}
	s := LibSearch{Names: names, Python: py, System: sys}
	system := dl.Place{Dirs: systemSitePackages, Files: py}

	for _, tc := range []struct {
		name string
		env  map[string]string
		want []dl.Place
	}{
		{"nothing set: the system only", nil,
			[]dl.Place{sys[0], sys[1], system}},
		{"everything set: explicit, environment, user, system",
			map[string]string{EnvLDLibraryPath: "/l1:/l2", EnvVirtualEnv: "/v", EnvCondaPrefix: "/c", "HOME": "/h"},
			[]dl.Place{
				{Why: "LD_LIBRARY_PATH", Dirs: []string{"/l1", "/l2"}, Files: names},
				{Why: "$VIRTUAL_ENV", Dirs: []string{"/v/lib/python3*/site-packages"}, Files: py},
				{Why: "$CONDA_PREFIX", Dirs: []string{"/c/lib/python3*/site-packages"}, Files: py},
				{Why: "$CONDA_PREFIX", Dirs: []string{"/c/lib"}, Files: names},
				{Why: "user site-packages", Dirs: []string{"/h/.local/lib/python3*/site-packages"}, Files: py},
				sys[0], sys[1], system,
			}},
		{"PYTHONUSERBASE replaces ~/.local; a trailing slash is cleaned",
			map[string]string{EnvPythonUserBase: "/u/", "HOME": "/h", EnvVirtualEnv: "/v/"},
			[]dl.Place{
				{Why: "$VIRTUAL_ENV", Dirs: []string{"/v/lib/python3*/site-packages"}, Files: py},
				{Why: "user site-packages", Dirs: []string{"/u/lib/python3*/site-packages"}, Files: py},
				sys[0], sys[1], system,
			}},
		{"empty LD_LIBRARY_PATH entries (the current directory) are skipped",
			map[string]string{EnvLDLibraryPath: "::/l1:"},
			[]dl.Place{{Why: "LD_LIBRARY_PATH", Dirs: []string{"/l1"}, Files: names}, sys[0], sys[1], system}},
		{"an LD_LIBRARY_PATH of empty entries only is no place",
			map[string]string{EnvLDLibraryPath: ":"},
			[]dl.Place{sys[0], sys[1], system}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			searchEnv(t, tc.env)
			require.Equal(t, tc.want, s.Places())
		})
	}
}

// TestRuntimeSearch finds the runtimes in fake trees: the active
// environment's copies before the system's, an explicit LD_LIBRARY_PATH
// before those.
func TestRuntimeSearch(t *testing.T) {
	in, env := ctest.FakeTree(t,
		"ld/libcudart.so.12",
		"venv/lib/python3.12/site-packages/nvidia/cuda_runtime/lib/libcudart.so.12",
		"venv/lib/python3.12/site-packages/torch/lib/libamdhip64.so",
		"conda/lib/libcudart.so.12",
		"conda/lib/python3.11/site-packages/torch/lib/libcudart-1a2b3c.so.11.0",
		"home/.local/lib/python3.10/site-packages/torch/lib/libamdhip64.so.6",
		"venv13/lib/python3.12/site-packages/nvidia/cu13/lib/libcudart.so.13",
	)
	cudaSonames := []string{"libcudart.so", "libcudart.so.12", "libcudart.so.13", "libcudart.so.11.0"}
	hipSonames := []string{"libamdhip64.so", "libamdhip64.so.6", "libamdhip64.so.7", "libamdhip64.so.5"}

	for _, tc := range []struct {
		name string
		api  API
		env  map[string]string
		want []string // candidates inside root, and sonames
	}{
		{"CUDA: LD_LIBRARY_PATH, venv, conda site-packages, conda lib, then the linker", CUDA,
			env(EnvLDLibraryPath, "ld", EnvVirtualEnv, "venv", EnvCondaPrefix, "conda", "HOME", "home"),
			append([]string{in("ld/libcudart.so.12"),
				in("venv/lib/python3.12/site-packages/nvidia/cuda_runtime/lib/libcudart.so.12"),
				in("conda/lib/python3.11/site-packages/torch/lib/libcudart-1a2b3c.so.11.0"),
				in("conda/lib/libcudart.so.12")}, cudaSonames...)},
		{"CUDA: no environment, the linker only", CUDA, env("HOME", "home"), cudaSonames},
		{"CUDA 13: the wheels share nvidia/cu13/lib", CUDA, env(EnvVirtualEnv, "venv13", "HOME", "home"),
			append([]string{in("venv13/lib/python3.12/site-packages/nvidia/cu13/lib/libcudart.so.13")}, cudaSonames...)},
		{"HIP: venv, then the user's, then the linker", HIP,
			env(EnvVirtualEnv, "venv", "HOME", "home"),
			append([]string{in("venv/lib/python3.12/site-packages/torch/lib/libamdhip64.so"),
				in("home/.local/lib/python3.10/site-packages/torch/lib/libamdhip64.so.6")}, hipSonames...)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			searchEnv(t, tc.env)
			var got []string
			for _, c := range dl.Candidates(runtimeSpecs[tc.api].Search()) {
				// The machine's own /opt/rocm or /usr/local/cuda may add
				// files; the fake tree and the sonames are what is checked.
				if strings.HasPrefix(c, in("")) || !strings.Contains(c, "/") {
					got = append(got, c)
				}
			}
			require.Equal(t, tc.want, got)
		})
	}
}

// TestGlobQuote: the glob metacharacters of a directory are escaped, and
// bytes that are not UTF-8 are kept as they are.
func TestGlobQuote(t *testing.T) {
	for in, want := range map[string]string{
		"/opt/x":        "/opt/x",
		"/a[1]/b*c?":    `/a\[1]/b\*c\?`,
		`/back\slash`:   `/back\\slash`,
		"/jos\xe9/lib[": "/jos\xe9/lib\\[",
	} {
		require.Equal(t, want, globQuote(in), "%q", in)
	}
}
