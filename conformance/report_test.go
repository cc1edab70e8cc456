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

// TestReportsOneLinePerCase: evidence quotes the IUT's own error text,
// which may span lines (a stack trace, a wrapped message). TAP, the
// Markdown table and the human table must still hold one line per case,
// or the IUT's text would read as test points or table rows of its own.
func TestReportsOneLinePerCase(t *testing.T) {
	m := &Case{ID: "m", Spec: "§1", Level: Mandatory, Title: "mandatory"}
	rs := []Result{
		{Case: m, Verdict: Fail, Evidence: "receive failed: boom\nok 2 - forged pass\r\n\tat frame 1 | 2\x00\x1b[31m"},
		{Case: m, Verdict: Skip, Evidence: "no control\nok 3 - also"},
		{Case: m, Verdict: Pass, Evidence: "fine"},
	}
	var tap bytes.Buffer
	WriteTAP(&tap, rs)
	lines := strings.Split(strings.TrimSuffix(tap.String(), "\n"), "\n")
	points := 0
	for _, l := range lines[2:] {
		switch {
		case strings.HasPrefix(l, "ok ") || strings.HasPrefix(l, "not ok "):
			points++
		case strings.HasPrefix(l, "  # "):
		default:
			t.Errorf("TAP line neither a test point nor a diagnostic: %q", l)
		}
		for _, r := range l {
			require.False(t, r < ' ' || r == 0x7f, "control character in TAP line %q", l)
		}
	}
	require.Equal(t, []string{"TAP version 13", "1..3"}, lines[:2])
	require.Equal(t, 3, points, tap.String())
	require.Contains(t, tap.String(), "receive failed: boom ok 2 - forged pass")

	var md bytes.Buffer
	WriteTable(&md, rs)
	rows := strings.Split(strings.TrimSuffix(md.String(), "\n"), "\n")
	require.Len(t, rows, 2+len(rs), md.String())
	for _, row := range rows {
		require.Equal(t, 6, strings.Count(row, "|"), "row %q", row)
	}

	var hu bytes.Buffer
	WriteHuman(&hu, rs)
	require.Len(t, strings.Split(strings.TrimSuffix(hu.String(), "\n"), "\n"), 2+len(rs), hu.String())

	// JUnit keeps the text as it is, escaped.
	var x bytes.Buffer
	require.NoError(t, WriteJUnit(&x, "s", rs))
	var s junitSuite
	require.NoError(t, xml.Unmarshal(x.Bytes(), &s))
	require.Contains(t, s.Cases[0].Failure.Message, "boom\nok 2")
}
