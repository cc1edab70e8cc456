package soak

import (
	"context"
	"errors"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

func TestParseResults(t *testing.T) {
	out := "noise\nRESULT props name=metaroce_lo pci=none speed=10000\n" +
		"RESULT data groups=96 n=3 version=12\r\n  RESULT ok version=12 reload=1\n" +
		"RESULT\nRESULT kill rc=3 ms=2004 junk =x rc=6\nRESULTS x=1\n"
	got := parseResults(out)
	require.Len(t, got, 4)
	require.Equal(t, "props", got[0].name)
	require.Equal(t, "metaroce_lo", got[0].kv["name"])
	require.Equal(t, result{name: "data", kv: map[string]string{"groups": "96", "n": "3", "version": "12"}}, got[1])
	require.Equal(t, "ok", got[2].name)
	require.Equal(t, map[string]string{"rc": "6", "ms": "2004"}, got[3].kv, "last value wins, fields without a key are ignored")
}

// FuzzParseResults: any input parses without panicking, and every line the
// parser reports really is a RESULT line with its fields.
func FuzzParseResults(f *testing.F) {
	f.Add("RESULT data groups=96 n=3 version=12\nRESULT ok version=12 reload=1\n")
	f.Add("RESULT kill rc=3 ms=2000")
	f.Add("RESULT x a==b =c d=\n\x00RESULT")
	f.Fuzz(func(t *testing.T, s string) {
		rs := parseResults(s)
		require.LessOrEqual(t, len(rs), strings.Count(s, "RESULT"))
		for _, r := range rs {
			require.NotEmpty(t, r.name)
			for k, v := range r.kv {
				require.NotEmpty(t, k)
				require.True(t, strings.Contains(s, k+"="+v), "%q=%q not in input", k, v)
			}
		}
	})
}

func TestJudgeHarness(t *testing.T) {
	exit1 := errors.New("exit status 1")
	okData := "RESULT props name=x\nRESULT data groups=96 n=3 version=12\nRESULT ok version=12 reload=1\n"
	for _, tc := range []struct {
		name, scenario, out string
		err                 error
		messages            uint64
		missed              bool
		failed              bool
	}{
		{"data ok", "data", okData, nil, 288, false, false},
		{"data exit 1", "data", "RESULT props name=x\n", exit1, 0, false, true},
		{"data no ok line", "data", "RESULT data groups=96 n=3\n", nil, 288, false, true},
		{"data no data line", "data", "RESULT ok version=12 reload=1\n", nil, 0, false, true},
		{"kill surfaced", "kill", "RESULT kill rc=6 ms=2003\nRESULT ok version=12 reload=1\n", nil, 0, false, false},
		{"kill missed", "kill", "RESULT kill rc=0 ms=12\n", exit1, 0, true, false},
		{"kill no line", "kill", "RESULT ok version=12 reload=1\n", nil, 0, false, true},
		{"kill timeout", "kill", "", errors.New("signal: killed"), 0, false, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			v := judgeHarness(tc.scenario, tc.out, tc.err)
			require.Equal(t, tc.messages, v.messages)
			require.Equal(t, tc.missed, v.missed)
			require.Equal(t, tc.failed, v.failure != "", "failure %q", v.failure)
		})
	}
}

func TestDeclaresModule(t *testing.T) {
	require.True(t, declaresModule([]byte("// x\nmodule github.com/metaroce/metaroce\n\ngo 1.26\n"), modulePath))
	require.True(t, declaresModule([]byte(`module "github.com/metaroce/metaroce"`), modulePath))
	require.False(t, declaresModule([]byte("module github.com/metaroce/metaroce/v2\n"), modulePath))
	require.False(t, declaresModule([]byte("go 1.26\n"), modulePath))
}

// TestPluginSkippedWithoutCompiler: without gcc the plugin rounds are
// skipped with a note and the collective rounds still run.
func TestPluginSkippedWithoutCompiler(t *testing.T) {
	defer func(f func(string) (string, error)) { lookPath = f }(lookPath)
	lookPath = func(file string) (string, error) { return "", exec.ErrNotFound }
	rep, err := Run(context.Background(), Options{Plugin: true, PluginEvery: 2, Duration: time.Minute, MaxRounds: 2, OpsPerRound: 2, MaxCount: 64})
	require.NoError(t, err)
	require.Zero(t, rep.PluginRounds)
	require.Equal(t, 2, rep.Rounds)
	require.Len(t, rep.Notes, 1)
	require.Contains(t, rep.Notes[0], "plugin rounds skipped")
	require.Contains(t, rep.Notes[0], "gcc")
}

// TestPluginRoundsShort builds the plugin and the C harness and runs three
// data scenarios and one kill scenario between small collective rounds:
// every message verified, the dead sender reported.
func TestPluginRoundsShort(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the plugin and runs the C harness")
	}
	for _, tool := range []string{"gcc", "go"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Skipf("%s not installed: cannot build the plugin and its C harness", tool)
		}
	}
	if cgoOff(context.Background()) {
		t.Skip("cgo is off (CGO_ENABLED=0): the plugin is a c-shared library")
	}
	rep, err := Run(context.Background(), Options{Plugin: true, PluginEvery: 2, Duration: time.Minute, MaxRounds: 8,
		Seed: 9, OpsPerRound: 4, MaxCount: 1 << 12, Logf: t.Logf})
	require.NoError(t, err)
	t.Log(rep)
	for _, e := range rep.FirstErrors {
		t.Log(e)
	}
	require.Empty(t, rep.Notes)
	require.Equal(t, 4, rep.PluginRounds)
	require.Equal(t, 1, rep.PluginKills)
	require.Equal(t, 1, rep.PluginSurfaced)
	require.Zero(t, rep.PluginFailures)
	require.Zero(t, rep.PluginMissedKills)
	require.Equal(t, uint64(3*96*3), rep.PluginMessages, "3 data runs of 96 groups of 3 messages")
	require.Equal(t, 1, rep.Faults["plugin sender killed"])
	require.True(t, rep.Healthy(), "%v", rep)
}
