package scenarios

import (
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestProgressLines: without Log, a run that ends after ProgressAfter of
// the scenario's wall time writes one progress line naming it, and one
// that ends before writes nothing; the simulations themselves are not
// touched, so the scenario's output stays the same.
func TestProgressLines(t *testing.T) {
	var b strings.Builder
	o := Options{Smoke: true, Progress: &b}
	o.fill()
	s, err := build(&o, o.fabric(2, 2, 2, 1), MetaRoCE)
	require.NoError(t, err)
	r := &runner{o: &o, start: time.Now()}
	r.label = "first"
	r.runApps(s, nil, 1000, func() bool { return true })
	assert.Empty(t, b.String(), "a run within ProgressAfter")

	s, err = build(&o, o.fabric(2, 2, 2, 1), MetaRoCE)
	require.NoError(t, err)
	r.start = time.Now().Add(-ProgressAfter - time.Second) // as if long under way
	r.label = "allreduce 1G 0% metaroce"
	r.runApps(s, nil, 1000, func() bool { return true })
	assert.Regexp(t, `^  2 runs done after \d+ s; last: allreduce 1G 0% metaroce: [0-9.]+ M events/s\n$`, b.String())
}
