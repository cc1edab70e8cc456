package conformance_test

import (
	"bytes"
	"context"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/metaroce/metaroce/conformance"
	"github.com/metaroce/metaroce/conformance/udpiut"
	"github.com/stretchr/testify/require"
)

// TestSelf runs the whole suite against this module's UDP datapath and
// requires every mandatory case to pass.
func TestSelf(t *testing.T) {
	iut, err := udpiut.Listen(1)
	require.NoError(t, err)
	defer iut.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	rs := conformance.Run(ctx, iut, conformance.Cases(), 1)
	var tap bytes.Buffer
	conformance.WriteTAP(&tap, rs)
	t.Log("\n" + tap.String())
	for _, r := range rs {
		if r.Case.Level == conformance.Mandatory {
			require.Equal(t, conformance.Pass, r.Verdict, "%s: %s", r.Case.ID, r.Evidence)
		}
	}
}

// TestWireOnly keeps the tester independent of what it judges: no file of
// package conformance may import the protocol core or a driver.
func TestWireOnly(t *testing.T) {
	files, err := filepath.Glob("*.go")
	require.NoError(t, err)
	for _, f := range files {
		if strings.HasSuffix(f, "_test.go") {
			continue
		}
		src, err := os.ReadFile(f)
		require.NoError(t, err)
		af, err := parser.ParseFile(token.NewFileSet(), f, src, parser.ImportsOnly)
		require.NoError(t, err)
		for _, im := range af.Imports {
			p := strings.Trim(im.Path.Value, `"`)
			if strings.HasPrefix(p, "github.com/metaroce/metaroce/") && p != "github.com/metaroce/metaroce/transport/wire" {
				t.Errorf("%s imports %s", f, p)
			}
		}
	}
}

func runFake(t *testing.T, wrongSack bool) []conformance.Result {
	f, err := newFakeIUT(wrongSack)
	require.NoError(t, err)
	defer f.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	rs := conformance.Run(ctx, f, conformance.Cases(), 2)
	var tab bytes.Buffer
	conformance.WriteTable(&tab, rs)
	t.Log("\n" + tab.String())
	return rs
}

// TestFakeConforms checks the tester against a minimal receiver written
// with the wire package: every mandatory case passes.
func TestFakeConforms(t *testing.T) {
	rs := runFake(t, false)
	for _, r := range rs {
		require.Equal(t, conformance.Pass, r.Verdict, "%s: %s", r.Case.ID, r.Evidence)
	}
}

// TestFakeWrongSack proves the suite can fail: a receiver that sets one SACK
// bit too many fails the sack case, and only that one.
func TestFakeWrongSack(t *testing.T) {
	rs := runFake(t, true)
	for _, r := range rs {
		want := conformance.Pass
		if r.Case.ID == "sack" {
			want = conformance.Fail
		}
		require.Equal(t, want, r.Verdict, "%s: %s", r.Case.ID, r.Evidence)
	}
	require.True(t, conformance.MandatoryFailed(rs))
}
