package main

import (
	"fmt"
	"io"
	"time"

	"github.com/metaroce/metaroce/internal/term"
)

// status is the one line that a run without -v keeps on a terminal's
// stderr, so that a soak of half an hour is not silent until its report:
// the time run so far against the duration (or the rounds against
// -rounds) and the latest round's line, each round's line overwriting the
// last. Logs and pipes get nothing (newStatus returns nil), so that they
// never see carriage returns; -v prints every line instead.
type status struct {
	line  *term.Line // rounds may log from the goroutines that run them
	start time.Time
	now   func() time.Time
	limit string // "of 30m0s", "of 8 rounds", or both
}

// newStatus returns the status line for a run on w that started at start
// and ends after dur (ignored when rounds > 0 and dur was not given) or
// rounds rounds (0: no count), or nil when w is not a terminal (tty).
func newStatus(w io.Writer, tty bool, start time.Time, now func() time.Time, dur time.Duration, durGiven bool, rounds int) *status {
	if !tty {
		return nil
	}
	s := &status{line: term.NewLine(w, true), start: start, now: now}
	switch {
	case rounds > 0 && durGiven:
		s.limit = fmt.Sprintf("of %v or %d rounds", dur, rounds)
	case rounds > 0:
		s.limit = fmt.Sprintf("of %d rounds", rounds)
	default:
		s.limit = fmt.Sprintf("of %v", dur)
	}
	return s
}

// logf is a soak.Options.Logf: it redraws the line with the elapsed time
// and this line.
func (s *status) logf(format string, args ...any) {
	el := s.now().Sub(s.start).Truncate(time.Second)
	s.line.Show(fmt.Sprintf("[%v %s] %s", el, s.limit, fmt.Sprintf(format, args...)))
}

// clear removes the line, if one was drawn, before the report or an error
// is printed, and ignores later lines.
func (s *status) clear() {
	if s == nil {
		return
	}
	s.line.Close()
}
