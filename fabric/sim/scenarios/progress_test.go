package scenarios

import (
	"context"
	"fmt"
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
	r := &runner{ctx: context.Background(), o: &o, start: time.Now()}
	r.label = "first"
	require.NoError(t, r.runApps(s, nil, 1000, func() bool { return true }))
	assert.Empty(t, b.String(), "a run within ProgressAfter")

	s, err = build(&o, o.fabric(2, 2, 2, 1), MetaRoCE)
	require.NoError(t, err)
	r.start = time.Now().Add(-ProgressAfter - time.Second) // as if long under way
	r.label = "allreduce 1G 0% metaroce"
	require.NoError(t, r.runApps(s, nil, 1000, func() bool { return true }))
	assert.Regexp(t, `^  2 runs done after \d+ s; last: allreduce 1G 0% metaroce: [0-9.]+ M events/s\n$`, b.String())
}

// TestProgressLinesCounted: a scenario that declared its total has its
// progress lines say "k of N", with an ETA while runs remain and none
// after the last; the Log lines likewise. A scenario whose runs are not
// of one size gets no ETA.
func TestProgressLinesCounted(t *testing.T) {
	var b strings.Builder
	o := Options{Smoke: true, Progress: &b}
	o.fill()
	r := &runner{ctx: context.Background(), o: &o, start: time.Now().Add(-ProgressAfter - time.Second), total: 2, even: true}
	for _, label := range []string{"first", "second"} {
		s, err := build(&o, o.fabric(2, 2, 2, 1), MetaRoCE)
		require.NoError(t, err)
		r.label = label
		require.NoError(t, r.runApps(s, nil, 1000, func() bool { return true }))
	}
	assert.Regexp(t, `^  1 of 2 runs done after \d+ s, ETA [0-9.hms]+; last: first: [0-9.]+ M events/s\n`+
		`  2 of 2 runs done after \d+ s; last: second: [0-9.]+ M events/s\n$`, b.String())

	b.Reset()
	o = Options{Smoke: true, Log: &b}
	o.fill()
	r = &runner{ctx: context.Background(), o: &o, start: time.Now(), total: 2, even: true}
	for range 3 { // one run more than declared: no "k of N" for it
		s, err := build(&o, o.fabric(2, 2, 2, 1), MetaRoCE)
		require.NoError(t, err)
		require.NoError(t, r.runApps(s, nil, 1000, func() bool { return true }))
	}
	lines := strings.Split(strings.TrimSuffix(b.String(), "\n"), "\n")
	require.Len(t, lines, 3)
	assert.Regexp(t, `^  \[1 of 2, ETA [0-9.hms]+\] ran 4 hosts`, lines[0])
	assert.Regexp(t, `^  \[2 of 2\] ran 4 hosts`, lines[1])
	assert.Regexp(t, `^  ran 4 hosts`, lines[2])

	b.Reset()
	r = &runner{ctx: context.Background(), o: &o, start: time.Now(), total: 2}
	s, err := build(&o, o.fabric(2, 2, 2, 1), MetaRoCE)
	require.NoError(t, err)
	require.NoError(t, r.runApps(s, nil, 1000, func() bool { return true }))
	assert.Regexp(t, `^  \[1 of 2\] ran 4 hosts`, b.String(), "runs of different sizes: no ETA")
}

// TestETA: the runs left at the mean wall time of those done, none
// before the first finishes or after the last.
func TestETA(t *testing.T) {
	tests := []struct {
		elapsed     time.Duration
		done, total int
		want        time.Duration
		ok          bool
	}{
		{10 * time.Second, 1, 4, 30 * time.Second, true},
		{90 * time.Second, 3, 12, 270 * time.Second, true},
		{time.Second, 0, 4, 0, false},
		{time.Second, 4, 4, 0, false},
		{time.Second, 5, 4, 0, false},
	}
	for _, tc := range tests {
		got, ok := eta(tc.elapsed, tc.done, tc.total)
		assert.Equal(t, tc.ok, ok, "%+v", tc)
		assert.Equal(t, tc.want, got, "%+v", tc)
	}
	assert.Equal(t, "4.3s", formatETA(4260*time.Millisecond))
	assert.Equal(t, "1m20s", formatETA(80400*time.Millisecond))
}

// TestDeclaredTotals: every scenario declares, before its first run, as
// many runs as it then does, and its Log lines count them 1 of N to N of
// N: in smoke mode, and for the collective scenario with rows given.
func TestDeclaredTotals(t *testing.T) {
	type tcase struct {
		name string
		o    Options
	}
	var tests []tcase
	for _, n := range Names() {
		tests = append(tests, tcase{n, Options{Smoke: true}})
	}
	tests = append(tests, tcase{"collective", Options{Smoke: true,
		Sizes: []uint64{1 << 10, 4 << 10, 64 << 10}, Losses: []float64{0.5}, Ops: []string{"allreduce"}}})
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var b strings.Builder
			tc.o.Log = &b
			_, r, err := run(context.Background(), tc.name, tc.o)
			require.NoError(t, err)
			require.Positive(t, r.total)
			assert.Equal(t, r.total, r.runs)
			k := 0
			for _, line := range strings.Split(b.String(), "\n") {
				if strings.HasPrefix(line, "  [") {
					k++
					assert.True(t, strings.HasPrefix(line, fmt.Sprintf("  [%d of %d", k, r.total)), "%q", line)
				}
			}
			assert.Equal(t, r.total, k, "counted lines")
		})
	}
}
