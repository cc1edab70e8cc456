package main

import (
	"fmt"
	"io"

	"github.com/metaroce/metaroce/conformance"
	"github.com/metaroce/metaroce/internal/term"
)

// caseLine is the line a run keeps on a terminal's stderr while its cases
// run (a run takes seconds, minutes where an IUT keeps cases waiting for
// their timeouts): which case of how many runs now. Each case's line
// overwrites the last, and the line is cleared before the reports. Logs
// and pipes get nothing (newCaseLine returns nil), so that they never see
// carriage returns.
type caseLine struct {
	line *term.Line
	n    int
}

// newCaseLine returns the line for a run of n cases on w, or nil when w
// is not a terminal (tty false).
func newCaseLine(w io.Writer, tty bool, n int) *caseLine {
	if !tty {
		return nil
	}
	return &caseLine{line: term.NewLine(w, true), n: n}
}

// hook returns the conformance.RunProgress hook that draws case i's line.
// A nil line (not a terminal) gives no hook.
func (l *caseLine) hook() func(i int, c *conformance.Case) {
	if l == nil {
		return nil
	}
	return func(i int, c *conformance.Case) {
		l.line.Show(fmt.Sprintf("mrconform: case %d/%d: %s (%s)", i+1, l.n, c.ID, c.Spec))
	}
}

// clear removes the line, if one was drawn.
func (l *caseLine) clear() {
	if l == nil {
		return
	}
	l.line.Clear()
}
