package scenarios

import (
	"context"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// cancelAfterRuns is a Log that cancels its context once it has been told
// of n finished runs (the runner's "ran" lines), and keeps every line.
type cancelAfterRuns struct {
	n      int
	cancel context.CancelFunc
	b      strings.Builder
}

func (w *cancelAfterRuns) Write(p []byte) (int, error) {
	w.b.Write(p)
	if strings.Count(w.b.String(), " ran ") >= w.n {
		w.cancel()
	}
	return len(p), nil
}

// TestRunContextStopsScenario: every scenario whose context ends after its
// first run stops there, with the context's error and no result, instead
// of running the rest of its sweep; before RunContext a caller could only
// abandon Run, which went on burning CPU to the end.
func TestRunContextStopsScenario(t *testing.T) {
	for _, name := range Names() {
		t.Run(name, func(t *testing.T) {
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			w := &cancelAfterRuns{n: 1, cancel: cancel}
			res, err := RunContext(ctx, name, Options{Smoke: true, Log: w})
			require.ErrorIs(t, err, context.Canceled)
			assert.ErrorContains(t, err, "run 2 (")
			assert.Nil(t, res)
			assert.Equal(t, 1, strings.Count(w.b.String(), " ran "), "runs after the cancel:\n%s", w.b.String())
		})
	}
}

// TestRunContextCancelledBeforeStart: a scenario at full size whose
// context has already ended runs no simulation, and a bad option is still
// reported as ErrUsage, the caller's mistake, rather than as the cancel.
func TestRunContextCancelledBeforeStart(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	var log strings.Builder
	res, err := RunContext(ctx, "collective", Options{Log: &log})
	require.ErrorIs(t, err, context.Canceled)
	assert.Nil(t, res)
	assert.NotContains(t, log.String(), " ran ")

	_, err = RunContext(ctx, "loss", Options{MTU: 1})
	require.ErrorIs(t, err, ErrUsage)
	assert.NotErrorIs(t, err, context.Canceled)
}
