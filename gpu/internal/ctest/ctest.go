// Package ctest compiles small C sources into shared libraries for tests of
// the dlopen bindings. The fake libraries export the vendor symbols
// (ncclAllReduce, cudaMalloc, ...) over host memory, so the binding layer is
// exercised end to end on machines without a GPU.
package ctest

import (
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/metaroce/metaroce/gpu/internal/dl"
)

// NeedDlopen skips the test, with the reason, in a build without cgo, where
// no library can be loaded (dl.ErrNoCgo); tests of the loading paths and of
// the fake libraries call it.
func NeedDlopen(t testing.TB) {
	t.Helper()
	if !dl.Available {
		t.Skip("built without cgo (CGO_ENABLED=0): shared libraries cannot be loaded, skipping a test of the dlopen paths")
	}
}

// SharedLib compiles srcs (paths relative to the test's directory) with gcc
// into a shared object named name inside a fresh temporary directory and
// returns its absolute path. extra are additional compiler flags, e.g.
// "-DNO_ALLTOALL". The test is skipped, with the reason, when gcc is missing
// or when the build has no cgo to load the result with.
func SharedLib(t testing.TB, name string, srcs []string, extra ...string) string {
	t.Helper()
	NeedDlopen(t)
	gcc, err := exec.LookPath("gcc")
	if err != nil {
		t.Skip("gcc not found on PATH: the fake vendor libraries cannot be built, skipping the binding tests that need them")
	}
	out := filepath.Join(t.TempDir(), name)
	args := []string{"-shared", "-fPIC", "-O1", "-Wall", "-Werror", "-o", out}
	args = append(args, extra...)
	args = append(args, srcs...)
	cmd := exec.Command(gcc, args...)
	if b, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("gcc %v: %v\n%s", args, err, b)
	}
	return out
}

// FakeTree creates an empty file at each of rels (slash-separated paths
// relative to a fresh temporary directory) for tests of the library
// search, which looks for names and loads nothing. It returns in, which
// turns a relative path into its absolute one, and env, which builds a
// variable map from name, relative path pairs.
func FakeTree(t testing.TB, rels ...string) (in func(rel string) string, env func(kv ...string) map[string]string) {
	t.Helper()
	root := t.TempDir()
	in = func(rel string) string { return filepath.Join(root, filepath.FromSlash(rel)) }
	for _, rel := range rels {
		p := in(rel)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, nil, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	env = func(kv ...string) map[string]string {
		m := map[string]string{}
		for i := 0; i+1 < len(kv); i += 2 {
			m[kv[i]] = in(kv[i+1])
		}
		return m
	}
	return in, env
}
