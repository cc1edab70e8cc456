package dl

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"
)

// touch creates empty files (and their directories) below root.
func touch(t *testing.T, root string, rel ...string) {
	t.Helper()
	for _, r := range rel {
		p := filepath.Join(root, r)
		require.NoError(t, os.MkdirAll(filepath.Dir(p), 0o755))
		require.NoError(t, os.WriteFile(p, nil, 0o644))
	}
}

// TestCandidates checks the finding half of Open on a fake tree: nothing is
// loaded, so it runs without cgo too.
func TestCandidates(t *testing.T) {
	root := t.TempDir()
	touch(t, root,
		"a/lib/libx.so.2", "a/lib/libx.so",
		"b/py3.9/libx.so.1", "b/py3.11/libx.so.1",
		"c/libx.so.2")
	in := func(rel string) string { return filepath.Join(root, rel) }

	for _, tc := range []struct {
		name   string
		places []Place
		want   []string
	}{
		{"sonames pass through untouched, whether or not a file exists",
			[]Place{{Files: []string{"libx.so.2", "libnone.so"}}},
			[]string{"libx.so.2", "libnone.so"}},
		{"existing files only, directory by directory, files in the given order",
			[]Place{{Dirs: []string{in("none"), in("a/lib"), in("c")}, Files: []string{"libx.so.2", "libx.so"}}},
			[]string{in("a/lib/libx.so.2"), in("a/lib/libx.so"), in("c/libx.so.2")}},
		{"globs in directories and files expand in lexical order",
			[]Place{{Dirs: []string{in("b/py3*")}, Files: []string{"libx.so*"}}},
			[]string{in("b/py3.11/libx.so.1"), in("b/py3.9/libx.so.1")}},
		{"places keep their order; a path is tried once, at its first place",
			[]Place{
				{Dirs: []string{in("c")}, Files: []string{"libx.so*"}},
				{Files: []string{"libx.so.2"}},
				{Dirs: []string{in("a/lib"), in("c")}, Files: []string{"libx.so.2"}},
				{Files: []string{"libx.so.2"}},
			},
			[]string{in("c/libx.so.2"), "libx.so.2", in("a/lib/libx.so.2")}},
		{"no places, no files, empty directories: nothing",
			[]Place{{Dirs: []string{in("a/lib")}}, {Dirs: []string{""}, Files: []string{"libx.so"}}},
			nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			require.Equal(t, tc.want, Candidates(tc.places))
		})
	}
}

// TestLoadErrorMessage checks the message of a search that loaded nothing:
// every place, compactly, and the variable that names the library.
func TestLoadErrorMessage(t *testing.T) {
	linker := func(f ...string) Place { return Place{Why: "the dynamic linker's path", Files: f} }
	py := []string{"torch/lib/libx.so*", "nvidia/x/lib/libx.so*"}
	for _, tc := range []struct {
		name string
		err  LoadError
		want string
	}{
		{"nothing found: one clause per set of files, places in order",
			LoadError{What: "X", Env: "X_LIB", Install: "libx",
				Tried: []Attempt{
					{"libx.so.2", "libx.so.2: cannot open shared object file: No such file or directory"},
					{"libx.so", "libx.so: cannot open shared object file: No such file or directory"},
				},
				Searched: []Place{
					{Why: "LD_LIBRARY_PATH", Dirs: []string{"/l1", "/l2"}, Files: []string{"libx.so.2", "libx.so"}},
					{Why: "$VIRTUAL_ENV", Dirs: []string{"/v/lib/python3*/site-packages"}, Files: py},
					{Why: "$CONDA_PREFIX", Dirs: []string{"/c/lib"}, Files: []string{"libx.so.2", "libx.so"}},
					linker("libx.so.2", "libx.so"),
					{Dirs: []string{"/opt/x/lib"}, Files: []string{"libx.so"}},
					{Dirs: []string{"/usr/lib/python3*/site-packages", "/opt/conda/lib/python3*/site-packages"}, Files: py},
				}},
			"cannot load the X library: none found; " +
				"looked for libx.so.2, libx.so in LD_LIBRARY_PATH (/l1, /l2), $CONDA_PREFIX (/c/lib), the dynamic linker's path; " +
				"for torch/lib/libx.so*, nvidia/x/lib/libx.so* in $VIRTUAL_ENV (/v/lib/python3*/site-packages), " +
				"/usr/lib/python3*/site-packages, /opt/conda/lib/python3*/site-packages; " +
				"for libx.so in /opt/x/lib; " +
				"install libx or set X_LIB to the library's full path"},
		{"a file that exists and fails keeps its reason; a repeated directory is listed once",
			LoadError{What: "X", Env: "X_LIB", Install: "libx",
				Tried: []Attempt{
					{"/v/libx.so.2", "libdep.so.1: cannot open shared object file: No such file or directory"},
					{"libx.so.2", "libx.so.2: cannot open shared object file: No such file or directory"},
				},
				Searched: []Place{
					{Why: "$CONDA_PREFIX", Dirs: []string{"/opt/conda/lib/python3*/site-packages"}, Files: py},
					linker("libx.so.2"),
					{Dirs: []string{"/usr/lib/python3*/site-packages", "/opt/conda/lib/python3*/site-packages"}, Files: py},
				}},
			"cannot load the X library: /v/libx.so.2 (libdep.so.1: cannot open shared object file: No such file or directory); " +
				"looked for torch/lib/libx.so*, nvidia/x/lib/libx.so* in $CONDA_PREFIX (/opt/conda/lib/python3*/site-packages), " +
				"/usr/lib/python3*/site-packages; for libx.so.2 in the dynamic linker's path; " +
				"install libx or set X_LIB to the library's full path"},
		{"an explicit path keeps every reason and points at the variable",
			LoadError{What: "X", Env: "X_LIB", Install: "libx", Explicit: true,
				Tried: []Attempt{{"/p/libx.so", "/p/libx.so: cannot open shared object file: No such file or directory"}}},
			"cannot load the X library: /p/libx.so (/p/libx.so: cannot open shared object file: No such file or directory); " +
				"check the path given (or X_LIB)"},
		{"no variable: only what to install",
			LoadError{What: "X", Install: "libx", Searched: []Place{linker("libx.so")}},
			"cannot load the X library: none found; looked for libx.so in the dynamic linker's path; install libx"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			require.Equal(t, tc.want, tc.err.Error())
		})
	}
}
