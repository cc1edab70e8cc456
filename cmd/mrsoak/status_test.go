package main

import (
	"bytes"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// TestStatusLine: on a terminal, each round's line replaces the last one on
// a single status line that leads with the time run against the limit, and
// clear removes it before the report and silences later lines; elsewhere
// there is no status line at all.
func TestStatusLine(t *testing.T) {
	start := time.Unix(1000, 0)
	clock := start
	now := func() time.Time { return clock }

	require.Nil(t, newStatus(&bytes.Buffer{}, false, start, now, time.Minute, true, 0), "not a terminal")
	var nilStatus *status
	nilStatus.clear() // what run does without a terminal

	for _, c := range []struct {
		name     string
		dur      time.Duration
		durGiven bool
		rounds   int
		limit    string
	}{
		{"duration", 30 * time.Minute, true, 0, "of 30m0s"},
		{"default duration", 10 * time.Second, false, 0, "of 10s"},
		{"rounds", 10 * time.Second, false, 8, "of 8 rounds"},
		{"both", time.Hour, true, 8, "of 1h0m0s or 8 rounds"},
	} {
		t.Run(c.name, func(t *testing.T) {
			var w bytes.Buffer
			s := newStatus(&w, true, start, now, c.dur, c.durGiven, c.rounds)
			require.NotNil(t, s)
			clock = start.Add(61500 * time.Millisecond)
			s.logf("round %d (%s): ops %d", 3, "loss", 24)
			require.Equal(t, "\r\033[K[1m1s "+c.limit+"] round 3 (loss): ops 24", w.String())
			w.Reset()
			s.clear()
			require.Equal(t, "\r\033[K", w.String(), "clear erases the line")
			w.Reset()
			s.logf("round 4")
			s.clear()
			require.Empty(t, w.String(), "nothing is drawn after clear")
		})
	}

	var w bytes.Buffer
	newStatus(&w, true, start, now, time.Minute, true, 0).clear()
	require.Empty(t, w.String(), "clear draws nothing where no line was shown")
}
