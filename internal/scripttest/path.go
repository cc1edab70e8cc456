package scripttest

import (
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"
)

// ToolDir returns a fresh directory holding links to the named programs
// of this machine, for a script test's PATH: the script then finds those
// and whatever stubs the test adds (Stub), and nothing else, so a test
// sees exactly which commands it ran and cannot install or build for
// real. It skips t when a tool is not installed.
func ToolDir(t testing.TB, tools ...string) string {
	t.Helper()
	dir := t.TempDir()
	for _, tool := range tools {
		p, err := exec.LookPath(tool)
		if err != nil {
			t.Skipf("%s not found", tool)
		}
		require.NoError(t, os.Symlink(p, filepath.Join(dir, tool)))
	}
	return dir
}

// Stub writes an executable /bin/sh script called name into dir whose
// body is body.
func Stub(t testing.TB, dir, name, body string) {
	t.Helper()
	require.NoError(t, os.WriteFile(filepath.Join(dir, name), []byte("#!/bin/sh\n"+body+"\n"), 0o755))
}
