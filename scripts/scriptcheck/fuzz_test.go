package scriptcheck

import (
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/metaroce/metaroce/internal/scripttest"
)

// fuzzTree makes a tree holding a copy of fuzz.sh in scripts/ and files,
// path to content, and a directory to be the whole PATH: the tools fuzz.sh
// uses, no git, and a go stub that notes its arguments in $GO_LOG and exits
// $GO_RC.
func fuzzTree(t *testing.T, files map[string]string) (bash, root, bin string) {
	t.Helper()
	bash, err := exec.LookPath("bash")
	if err != nil {
		t.Skip("bash not found")
	}
	root = t.TempDir()
	script, err := os.ReadFile("../fuzz.sh")
	require.NoError(t, err)
	files["scripts/fuzz.sh"] = string(script)
	for name, body := range files {
		p := filepath.Join(root, filepath.FromSlash(name))
		require.NoError(t, os.MkdirAll(filepath.Dir(p), 0o755))
		require.NoError(t, os.WriteFile(p, []byte(body), 0o755))
	}
	bin = scripttest.ToolDir(t, "cat", "dirname", "find", "grep", "mktemp", "rm", "sed", "sort")
	scripttest.Stub(t, bin, "go", `echo "$*" >>"$GO_LOG"
exit "$GO_RC"`)
	return bash, root, bin
}

// runFuzz runs the tree's fuzz.sh for 1s a target and returns its exit
// status, its output and the go command's calls.
func runFuzz(t *testing.T, bash, root, bin string, goRC int) (int, string, []string) {
	t.Helper()
	goLog := filepath.Join(t.TempDir(), "go.log")
	cmd := exec.Command(bash, filepath.Join(root, "scripts", "fuzz.sh"), "1s")
	cmd.Env = []string{"PATH=" + bin, "TMPDIR=" + t.TempDir(), "GO_LOG=" + goLog, "GO_RC=" + strconv.Itoa(goRC)}
	out, err := cmd.CombinedOutput()
	code := 0
	if err != nil {
		var ee *exec.ExitError
		require.ErrorAs(t, err, &ee, "%s", out)
		code = ee.ExitCode()
	}
	var calls []string
	if b, err := os.ReadFile(goLog); err == nil {
		calls = strings.Split(strings.TrimSpace(string(b)), "\n")
	}
	return code, string(out), calls
}

const fuzzFile = "package p\n\nimport \"testing\"\n\nfunc FuzzOne(f *testing.F) {}\n\nfunc FuzzTwo(f *testing.F) {}\n"

// TestFuzzFindsTargetsWithoutGit: every target of the tree is run, in file
// order, and none of those in directories the go command ignores or in a
// nested module.
func TestFuzzFindsTargetsWithoutGit(t *testing.T) {
	bash, root, bin := fuzzTree(t, map[string]string{
		"a/a_test.go":          fuzzFile,
		"b/c/c_test.go":        "package c\n\nimport \"testing\"\n\nfunc FuzzThree(f *testing.F) {}\n",
		"b/plain_test.go":      "package b\n\nimport \"testing\"\n\nfunc TestPlain(t *testing.T) {}\n",
		"b/fuzz.go":            "package b\n\nfunc FuzzNotATest() {}\n",
		"b/testdata/x_test.go": "package x\n\nfunc FuzzTestdata(f *testing.F) {}\n",
		"vendor/v/v_test.go":   "package v\n\nfunc FuzzVendor(f *testing.F) {}\n",
		".hidden/h_test.go":    "package h\n\nfunc FuzzHidden(f *testing.F) {}\n",
		"_skipped/s_test.go":   "package s\n\nfunc FuzzUnderscore(f *testing.F) {}\n",
		"nested/go.mod":        "module example.com/nested\n",
		"nested/n/n_test.go":   "package n\n\nfunc FuzzNested(f *testing.F) {}\n",
	})
	code, out, calls := runFuzz(t, bash, root, bin, 0)
	require.Equal(t, 0, code, "%s", out)
	require.Equal(t, []string{
		"test -run ^$ -fuzz ^FuzzOne$ -fuzztime 1s ./a",
		"test -run ^$ -fuzz ^FuzzTwo$ -fuzztime 1s ./a",
		"test -run ^$ -fuzz ^FuzzThree$ -fuzztime 1s ./b/c",
	}, calls, "%s", out)
	require.Contains(t, out, "3 fuzz target(s) run")
}

// TestFuzzFailsWithoutTargets: a tree without fuzz targets (a broken search,
// or files left out of a tarball) fails loudly instead of passing.
func TestFuzzFailsWithoutTargets(t *testing.T) {
	bash, root, bin := fuzzTree(t, map[string]string{
		"a/a_test.go": "package a\n\nimport \"testing\"\n\nfunc TestA(t *testing.T) {}\n",
	})
	code, out, calls := runFuzz(t, bash, root, bin, 0)
	require.Equal(t, 1, code, "%s", out)
	require.Contains(t, out, "fuzz.sh: no fuzz targets")
	require.Empty(t, calls)
}

// TestFuzzFailureFails: a target that fails makes the script fail, with the
// go command's output, after the other targets have run.
func TestFuzzFailureFails(t *testing.T) {
	bash, root, bin := fuzzTree(t, map[string]string{"a/a_test.go": fuzzFile})
	code, out, calls := runFuzz(t, bash, root, bin, 1)
	require.Equal(t, 1, code, "%s", out)
	require.Len(t, calls, 2, "each target once: a failure is not retried unless the engine timed out")
}
