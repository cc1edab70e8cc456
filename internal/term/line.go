package term

import (
	"fmt"
	"io"
	"sync"
)

// Line is one status line on a terminal, redrawn in place: each Show
// replaces what the line said ("\r" back to its start, then an erase to its
// end), and Clear erases it before ordinary output goes where it stood. A
// nil *Line does nothing, which is what NewLine gives an output that is not
// a terminal, so that callers need no test of their own. Safe for use by
// several goroutines.
type Line struct {
	mu     sync.Mutex
	w      io.Writer
	shown  bool // something is drawn on the line
	closed bool // Close was called: later Shows draw nothing
}

// erase moves to the start of the line and erases it (CR, then ANSI EL).
const erase = "\r\033[K"

// NewLine returns a line on w when tty says w is a terminal (IsTerminal,
// or a test's choice), nil otherwise.
func NewLine(w io.Writer, tty bool) *Line {
	if !tty {
		return nil
	}
	return &Line{w: w}
}

// Show draws s in place of what the line said.
func (l *Line) Show(s string) {
	if l == nil {
		return
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.closed {
		return
	}
	fmt.Fprint(l.w, erase+s)
	l.shown = true
}

// Clear erases the line, if anything is drawn on it.
func (l *Line) Clear() {
	if l == nil {
		return
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.shown {
		fmt.Fprint(l.w, erase)
		l.shown = false
	}
}

// Close clears the line and makes later Shows draw nothing: for a line fed
// by goroutines that may still report after their run has ended.
func (l *Line) Close() {
	if l == nil {
		return
	}
	l.Clear()
	l.mu.Lock()
	l.closed = true
	l.mu.Unlock()
}
