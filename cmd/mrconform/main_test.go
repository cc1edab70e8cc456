package main

import (
	"bytes"
	"encoding/xml"
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/metaroce/metaroce/conformance"
	"github.com/stretchr/testify/require"
)

func TestUsage(t *testing.T) {
	for _, args := range [][]string{nil, {"--self", "--addr", "127.0.0.1:1"}, {"--addr", "nonsense"}, {"--bogus"},
		{"--self", "--format", "pdf"}, {"--self", "--cases", "nosuch"}, {"--iut", "/nonexistent/iut"}, {"--self", "extra"}} {
		var out, errb bytes.Buffer
		require.Equal(t, 2, run(args, &out, &errb), "%v", args)
		require.NotEmpty(t, errb.String(), "%v", args)
	}
}

// TestAddrOnly runs against an address where nothing answers: the handshake
// cases fail (exit 1) and the cases that need control are skipped.
func TestAddrOnly(t *testing.T) {
	var out, errb bytes.Buffer
	code := run([]string{"--addr", "127.0.0.1:9", "--timeout", "30s", "--cases", "handshake,sack"}, &out, &errb)
	require.Equal(t, 1, code)
	require.Contains(t, out.String(), "not ok 1 - handshake")
	require.Contains(t, out.String(), "# SKIP")
}

// TestProcessIUT builds mrpeer and runs the suite against it as a separate
// process through the control contract, with every report format. Every
// mandatory case must pass.
func TestProcessIUT(t *testing.T) {
	if testing.Short() {
		t.Skip("builds mrpeer")
	}
	dir := t.TempDir()
	bin := filepath.Join(dir, "mrpeer")
	build := exec.Command("go", "build", "-o", bin, "../mrpeer")
	build.Stderr = os.Stderr
	require.NoError(t, build.Run())
	junit := filepath.Join(dir, "report.xml")
	var out, errb bytes.Buffer
	code := run([]string{"--iut", bin + " --seed 5", "--timeout", "90s", "--format", "tap,human", "--junit", junit}, &out, &errb)
	t.Log("\n" + out.String())
	require.Contains(t, out.String(), "TAP version 13")
	require.Contains(t, out.String(), "CASE")
	x, err := os.ReadFile(junit)
	require.NoError(t, err)
	var s struct {
		Tests int `xml:"tests,attr"`
		Cases []struct {
			Name    string    `xml:"name,attr"`
			Failure *struct{} `xml:"failure"`
		} `xml:"testcase"`
	}
	require.NoError(t, xml.Unmarshal(x, &s))
	require.Equal(t, len(conformance.Cases()), s.Tests)
	for _, c := range s.Cases {
		require.Nil(t, c.Failure, "case %s failed against mrpeer", c.Name)
	}
	require.Zero(t, code, "exit status %d, stderr %s", code, errb.String())
	require.NotContains(t, out.String(), "# SKIP", "every case runs through the control contract")
}
