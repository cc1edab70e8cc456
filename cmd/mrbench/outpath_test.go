package main

import (
	"os"
	"path/filepath"
	"strings"
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

// TestEveryOutputErrorMarked: several output files that cannot be
// written are each named on a line of their own, every line marked as
// mrbench's (or mrbench sim's), none left bare under the first.
func TestEveryOutputErrorMarked(t *testing.T) {
	no := filepath.Join(t.TempDir(), "no")
	for _, tc := range []struct {
		args   []string
		prefix string
	}{
		{[]string{"-np", "2", "--transport", "tcp"}, "mrbench: "},
		{[]string{"sim", "loss", "--smoke"}, "mrbench sim: "},
	} {
		args := append(tc.args, "--json", filepath.Join(no, "r.json"), "--csv", filepath.Join(no, "r.csv"))
		code, out, errs := runMrbench(t, args...)
		require.Equal(t, exitUsage, code, errs)
		assert.Empty(t, out)
		lines := strings.Split(strings.TrimSuffix(errs, "\n"), "\n")
		require.Len(t, lines, 2, errs)
		for _, line := range lines {
			assert.True(t, strings.HasPrefix(line, tc.prefix), "%q", line)
			assert.Contains(t, line, "directory "+no+" does not exist")
		}
	}
}

// TestSimFurtherPlotsCheckedFirst: mrbench sim --plot NAME.png writes a
// scenario's further plots to NAME-2.png, NAME-3.png, ... (incast draws
// two). A directory at one of those names, or a --json or --csv file named
// like one, which the plot would overwrite once written, is a usage error
// before the scenario runs, not a failed write or a lost file after it.
func TestSimFurtherPlotsCheckedFirst(t *testing.T) {
	dir := t.TempDir()
	require.NoError(t, os.Mkdir(filepath.Join(dir, "f-2.png"), 0o755))
	require.NoError(t, os.Symlink(filepath.Join(dir, "f-2.png"), filepath.Join(dir, "f-3.png")))
	code, out, errs := runMrbench(t, "sim", "incast", "--smoke", "--plot", filepath.Join(dir, "f.png"))
	require.Equal(t, exitUsage, code, errs)
	assert.Contains(t, errs, filepath.Join(dir, "f-2.png")+", where a scenario's plot 2 goes, is a directory")
	assert.Contains(t, errs, filepath.Join(dir, "f-3.png")+", where a scenario's plot 3 goes, is a directory")
	assert.Empty(t, out, "nothing may run")

	jp := filepath.Join(dir, "g-2.png")
	code, out, errs = runMrbench(t, "sim", "incast", "--smoke", "--plot", filepath.Join(dir, "g.png"), "--json", jp)
	require.Equal(t, exitUsage, code, errs)
	assert.Contains(t, errs, `--json "`+jp+`": --plot "`+filepath.Join(dir, "g.png")+`" writes a scenario's plot 2 to that file`)
	assert.Empty(t, out, "nothing may run")
	assert.NoFileExists(t, jp)

	// Files that only look alike are no plot's, and the run writes both
	// of incast's plots.
	hp := filepath.Join(dir, "h.png")
	code, _, errs = runMrbench(t, "sim", "incast", "--smoke", "--plot", hp,
		"--json", filepath.Join(dir, "h-02.png"), "--csv", filepath.Join(dir, "h-1.png"))
	require.Equal(t, exitOK, code, errs)
	assert.FileExists(t, hp)
	assert.FileExists(t, filepath.Join(dir, "h-2.png"))
	assert.NoFileExists(t, filepath.Join(dir, "h-3.png"))
	for _, tc := range []struct {
		base string
		want int
	}{{"h-2.png", 2}, {"h-17.png", 17}, {"h-1.png", 0}, {"h-02.png", 0}, {"h-2.svg", 0}, {"h-x.png", 0}, {"h-.png", 0}, {"h.png", 0}, {"hh-2.png", 0}} {
		i, ok := furtherPlot(hp, tc.base)
		assert.Equal(t, tc.want != 0, ok, tc.base)
		assert.Equal(t, tc.want, i, tc.base)
	}
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
