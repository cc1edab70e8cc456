package conformance

import (
	"bytes"
	"encoding/xml"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/stretchr/testify/require"
)

func sampleResults() []Result {
	m := &Case{ID: "m", Spec: "§1", Level: Mandatory, Title: "mandatory"}
	o := &Case{ID: "o", Spec: "§2", Level: Optional, Title: "optional"}
	return []Result{
		{Case: m, Verdict: Pass, Evidence: "fine"},
		{Case: m, Verdict: Fail, Evidence: "a <bad> & broken"},
		{Case: o, Verdict: Fail, Evidence: "meh"},
		{Case: o, Verdict: Skip, Evidence: "no control"},
	}
}

func TestWriteJUnit(t *testing.T) {
	var b bytes.Buffer
	require.NoError(t, WriteJUnit(&b, "metaroce", sampleResults()))
	var s junitSuite
	require.NoError(t, xml.Unmarshal(b.Bytes(), &s))
	require.Equal(t, 4, s.Tests)
	require.Equal(t, 1, s.Failures, "only the mandatory failure counts")
	require.Equal(t, 1, s.Skipped)
	require.Equal(t, "a <bad> & broken", s.Cases[1].Failure.Message)
	require.Nil(t, s.Cases[2].Failure)
}

func TestWriteHuman(t *testing.T) {
	var b bytes.Buffer
	WriteHuman(&b, sampleResults())
	lines := strings.Split(strings.TrimSpace(b.String()), "\n")
	require.Len(t, lines, 6)
	require.True(t, strings.HasPrefix(lines[0], "CASE"))
	col := func(line, word string) int { return utf8.RuneCountInString(line[:strings.Index(line, word)]) }
	require.Equal(t, col(lines[0], "VERDICT"), col(lines[2], "FAIL"), "columns align")
	require.Contains(t, lines[5], "1 pass, 2 fail, 1 skip; mandatory failure: true")
}
