package main

import (
	"fmt"
	"io"
	"strings"

	"github.com/metaroce/metaroce/internal/term"
)

// progress is a one-line bar on a terminal's stderr. A nil *progress does
// nothing, which is what non-terminals get, so that logs and pipes never see
// carriage returns.
type progress struct {
	line  *term.Line
	total int
	done  int
}

// progressBarWidth is the bar's length in characters.
const progressBarWidth = 30

// newProgress returns a bar for total steps on w, or nil when w is not a
// terminal or total is 0.
func newProgress(w io.Writer, total int) *progress {
	if total <= 0 || !term.IsTerminal(w) {
		return nil
	}
	return &progress{line: term.NewLine(w, true), total: total}
}

// show draws the bar labelled with what runs now (a table row), after the
// rows done so far: "[####      ] 3/9 tcp float 4K" while the fourth row,
// of 4 KiB, runs.
func (p *progress) show(label string) {
	if p == nil {
		return
	}
	fill := p.done * progressBarWidth / p.total
	p.line.Show(fmt.Sprintf("[%s%s] %d/%d %s", strings.Repeat("#", fill), strings.Repeat(" ", progressBarWidth-fill), p.done, p.total, label))
}

// step counts one more row done. It draws nothing: the bar is drawn again,
// advanced, when the next row starts (show).
func (p *progress) step() {
	if p == nil {
		return
	}
	p.done = min(p.done+1, p.total)
}

// clear erases the bar, if shown, so that what is printed next, on stdout
// when both go to one terminal, starts at the beginning of a clean line.
func (p *progress) clear() {
	if p == nil {
		return
	}
	p.line.Clear()
}
