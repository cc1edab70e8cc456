package conformance

import (
	"context"
	"fmt"
	"io"
	"strings"
	"unicode"
)

// Level says whether a case is required of every implementation.
type Level int

const (
	Mandatory Level = iota
	Optional
)

func (l Level) String() string {
	if l == Mandatory {
		return "mandatory"
	}
	return "optional"
}

// Verdict is the outcome of one case.
type Verdict int

const (
	Pass Verdict = iota
	Fail
	Skip // the case could not run (no control channel, setup failed before the behaviour under test)
)

func (v Verdict) String() string { return [...]string{"pass", "FAIL", "skip"}[v] }

// Case is one conformance check: a spec section, a level and a function
// that drives the IUT through a fresh tester connection.
type Case struct {
	ID    string
	Spec  string // docs/spec.md section, e.g. "§2.8"
	Level Level
	Title string
	// NeedsControl marks cases that post receives through the IUT's control
	// channel; they are skipped for an AddrIUT.
	NeedsControl bool
	Run          func(ctx context.Context, e *Env) (Verdict, string)
}

// Result is the verdict of a case with its evidence: what was sent and seen.
type Result struct {
	Case     *Case
	Verdict  Verdict
	Evidence string
}

// MandatoryFailed reports whether any mandatory case failed.
func MandatoryFailed(rs []Result) bool {
	for _, r := range rs {
		if r.Verdict == Fail && r.Case.Level == Mandatory {
			return true
		}
	}
	return false
}

// oneLine returns s with every control character (line breaks, tabs,
// terminal escapes) replaced by a blank. Evidence quotes the IUT's own
// error text, which may span lines; a line-oriented report must keep one
// line per case, or that text would read as test points or rows.
func oneLine(s string) string {
	return strings.Map(func(r rune) rune {
		if unicode.IsControl(r) {
			return ' '
		}
		return r
	}, s)
}

// WriteTAP writes rs in Test Anything Protocol version 13.
func WriteTAP(w io.Writer, rs []Result) {
	fmt.Fprintf(w, "TAP version 13\n1..%d\n", len(rs))
	for i, r := range rs {
		ok := "ok"
		if r.Verdict == Fail {
			ok = "not ok"
		}
		dir := ""
		if r.Verdict == Skip {
			dir = " # SKIP " + oneLine(r.Evidence)
		} else if r.Verdict == Fail && r.Case.Level == Optional {
			dir = " # TODO optional"
		}
		fmt.Fprintf(w, "%s %d - %s %s (%s)%s\n", ok, i+1, r.Case.ID, r.Case.Title, r.Case.Spec, dir)
		if r.Verdict != Skip {
			fmt.Fprintf(w, "  # %s\n", oneLine(r.Evidence))
		}
	}
}

// WriteTable writes rs as a Markdown table (case, spec section, level,
// verdict, evidence).
func WriteTable(w io.Writer, rs []Result) {
	fmt.Fprintln(w, "| Case | Spec | Level | Verdict | Evidence |")
	fmt.Fprintln(w, "|---|---|---|---|---|")
	for _, r := range rs {
		fmt.Fprintf(w, "| %s | %s | %s | %s | %s |\n", r.Case.ID, r.Case.Spec, r.Case.Level, r.Verdict,
			strings.ReplaceAll(oneLine(r.Evidence), "|", "/"))
	}
}
