package conformance

import (
	"encoding/xml"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
)

// WriteHuman writes rs as an aligned plain-text table for a terminal, then
// one line of totals.
func WriteHuman(w io.Writer, rs []Result) {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "CASE\tSPEC\tLEVEL\tVERDICT\tEVIDENCE")
	var pass, fail, skip int
	for _, r := range rs {
		switch r.Verdict {
		case Pass:
			pass++
		case Fail:
			fail++
		default:
			skip++
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\n", r.Case.ID, r.Case.Spec, r.Case.Level, r.Verdict, oneLine(r.Evidence))
	}
	tw.Flush()
	fmt.Fprintf(w, "%d cases: %d pass, %d fail, %d skip; mandatory failure: %v\n", len(rs), pass, fail, skip, MandatoryFailed(rs))
}

// junitSuite and junitCase are the JUnit XML elements CI systems read.
type junitSuite struct {
	XMLName  xml.Name    `xml:"testsuite"`
	Name     string      `xml:"name,attr"`
	Tests    int         `xml:"tests,attr"`
	Failures int         `xml:"failures,attr"`
	Skipped  int         `xml:"skipped,attr"`
	Cases    []junitCase `xml:"testcase"`
}

type junitCase struct {
	Name      string        `xml:"name,attr"`
	Classname string        `xml:"classname,attr"`
	Failure   *junitMessage `xml:"failure,omitempty"`
	Skipped   *junitMessage `xml:"skipped,omitempty"`
	SystemOut string        `xml:"system-out,omitempty"`
}

type junitMessage struct {
	Message string `xml:"message,attr"`
}

// WriteJUnit writes rs as one JUnit XML test suite named name. A failed
// optional case is reported in system-out, not as a failure, so that CI
// fails exactly when mrconform's exit status does.
func WriteJUnit(w io.Writer, name string, rs []Result) error {
	s := junitSuite{Name: name, Tests: len(rs)}
	for _, r := range rs {
		c := junitCase{Name: r.Case.ID, Classname: "conformance." + strings.ReplaceAll(r.Case.Level.String(), " ", "_"),
			SystemOut: fmt.Sprintf("%s (%s): %s", r.Case.Title, r.Case.Spec, r.Evidence)}
		switch {
		case r.Verdict == Skip:
			c.Skipped = &junitMessage{Message: r.Evidence}
			s.Skipped++
		case r.Verdict == Fail && r.Case.Level == Mandatory:
			c.Failure = &junitMessage{Message: r.Evidence}
			s.Failures++
		case r.Verdict == Fail:
			c.SystemOut = "optional case failed: " + c.SystemOut
		}
		s.Cases = append(s.Cases, c)
	}
	if _, err := io.WriteString(w, xml.Header); err != nil {
		return err
	}
	enc := xml.NewEncoder(w)
	enc.Indent("", "  ")
	if err := enc.Encode(s); err != nil {
		return err
	}
	_, err := io.WriteString(w, "\n")
	return err
}
