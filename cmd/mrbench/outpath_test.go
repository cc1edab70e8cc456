package main

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestOutputPathsCheckedFirst: an output file that cannot be written is a
// usage error before anything is measured, not a failure after the sweep
// whose results it was to hold.
func TestOutputPathsCheckedFirst(t *testing.T) {
	dir := t.TempDir()
	tests := []struct {
		name string
		args []string
		want string
	}{
		{"missing directory", []string{"--json", filepath.Join(dir, "no", "r.json")}, "directory " + filepath.Join(dir, "no") + " does not exist"},
		{"file as directory", []string{"--json", filepath.Join(dir, "f", "r.json")}, filepath.Join(dir, "f") + " is not a directory"},
		{"file deeper in the path", []string{"--json", filepath.Join(dir, "f", "sub", "r.json")}, "directory " + filepath.Join(dir, "f", "sub") + " does not exist (a file stands in its path)"},
		{"directory", []string{"--csv", dir}, "is a directory"},
		{"same file twice", []string{"--json", filepath.Join(dir, "r"), "--csv", filepath.Join(dir, "r")}, "writes the same file"},
		{"plot in missing directory", []string{"--plot", filepath.Join(dir, "no", "p.png")}, "does not exist"},
	}
	require.NoError(t, os.WriteFile(filepath.Join(dir, "f"), nil, 0o644))
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			args := append([]string{"-np", "2", "-b", "1K", "-e", "1K", "-n", "1", "-w", "0", "--transport", "tcp"}, tc.args...)
			code, out, errs := runMrbench(t, args...)
			require.Equal(t, exitUsage, code, errs)
			assert.Contains(t, errs, tc.want)
			assert.Empty(t, out, "nothing may be measured")
		})
	}
	entries, err := os.ReadDir(dir)
	require.NoError(t, err)
	require.Len(t, entries, 1, "the checks leave no probe files behind")
	assert.Equal(t, "f", entries[0].Name())
}

// TestSimOutputPathsCheckedFirst: the same for mrbench sim.
func TestSimOutputPathsCheckedFirst(t *testing.T) {
	dir := t.TempDir()
	code, out, errs := runMrbench(t, "sim", "loss", "--smoke", "--json", filepath.Join(dir, "no", "r.json"))
	require.Equal(t, exitUsage, code, errs)
	assert.Contains(t, errs, "does not exist")
	assert.Empty(t, out)
}

// TestWriteFileAtomic: the file is replaced whole, with the usual mode,
// and no temporary file stays beside it.
func TestWriteFileAtomic(t *testing.T) {
	dir := t.TempDir()
	p := filepath.Join(dir, "r.json")
	require.NoError(t, os.WriteFile(p, []byte("old and longer than the new content"), 0o600))
	require.NoError(t, writeFileAtomic(p, []byte("new")))
	b, err := os.ReadFile(p)
	require.NoError(t, err)
	assert.Equal(t, "new", string(b))
	fi, err := os.Stat(p)
	require.NoError(t, err)
	assert.Equal(t, os.FileMode(0o644), fi.Mode().Perm())
	entries, err := os.ReadDir(dir)
	require.NoError(t, err)
	assert.Len(t, entries, 1)
	// A directory that is gone: the error says so and nothing is written.
	require.Error(t, writeFileAtomic(filepath.Join(dir, "gone", "r.json"), []byte("x")))
}
