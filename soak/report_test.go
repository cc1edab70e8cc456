package soak

import (
	"encoding/json"
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// reportJSONKeys is the documented JSON schema of Report, in key order.
var reportJSONKeys = []string{
	"bytes", "ce_recv", "corrupted", "ecn_marks", "elapsed_s", "error",
	"fault_rounds", "faults", "fds_after", "fds_before", "first_errors",
	"goroutines_after", "goroutines_before", "healthy", "interrupted", "kill_rounds", "lost",
	"mid_round_faults", "missed_kills", "mode", "notes", "ops", "packets_sent",
	"path_changes", "plugin_failures", "plugin_kills", "plugin_messages",
	"plugin_missed_kills", "plugin_rounds", "plugin_surfaced", "problems",
	"retransmits", "rounds", "surfaced", "timeouts", "unexpected",
}

// TestReportJSONSchema: the JSON form has exactly the documented
// snake_case keys, the elapsed time in seconds, and the verdict. It used
// to carry Go's field names and Elapsed in nanoseconds.
func TestReportJSONSchema(t *testing.T) {
	for _, r := range []*Report{
		{},
		{Mode: "netlab", Elapsed: 1500 * time.Millisecond, Ops: 7, Corrupted: 1,
			Faults: map[string]int{"link loss": 2}, FirstErrors: []string{"boom"}, Notes: []string{"n"}},
	} {
		b, err := json.Marshal(r)
		require.NoError(t, err)
		var m map[string]any
		require.NoError(t, json.Unmarshal(b, &m))
		keys := make([]string, 0, len(m))
		for k := range m {
			keys = append(keys, k)
		}
		slices.Sort(keys)
		require.Equal(t, reportJSONKeys, keys, "%s", b)
		require.Equal(t, r.Elapsed.Seconds(), m["elapsed_s"])
		require.Equal(t, r.Healthy(), m["healthy"])
		require.IsType(t, []any{}, m["problems"])
		require.IsType(t, []any{}, m["notes"], "an empty list is [], not null")
		require.IsType(t, map[string]any{}, m["faults"])
		v, err := json.Marshal(*r) // a Report value marshals the same
		require.NoError(t, err)
		require.JSONEq(t, string(b), string(v))
	}
	b, err := json.Marshal(&Report{Mode: "netlab", Elapsed: 1500 * time.Millisecond, Corrupted: 1, Faults: map[string]int{"link loss": 2}})
	require.NoError(t, err)
	require.JSONEq(t, `{"mode":"netlab","elapsed_s":1.5,"rounds":0,"fault_rounds":0,"kill_rounds":0,"ops":0,"bytes":0,
		"packets_sent":0,"retransmits":0,"lost":0,"timeouts":0,"path_changes":0,"ecn_marks":0,"ce_recv":0,
		"faults":{"link loss":2},"mid_round_faults":0,"surfaced":0,"missed_kills":0,"unexpected":0,"corrupted":1,
		"plugin_rounds":0,"plugin_messages":0,"plugin_kills":0,"plugin_surfaced":0,"plugin_missed_kills":0,"plugin_failures":0,
		"goroutines_before":0,"goroutines_after":0,"fds_before":0,"fds_after":0,"first_errors":[],"notes":[],
		"interrupted":false,"error":"","healthy":false,
		"problems":["nothing was checked (no operation or plugin message verified)","corrupted results"]}`, string(b))
}

// TestErrorIsUnhealthy: a run that a round's error ended is not healthy,
// however clean the rounds before it were, and its text report says the
// error.
func TestErrorIsUnhealthy(t *testing.T) {
	r := &Report{Mode: "netlab", Rounds: 3, Ops: 60, Error: "soak: round 4 (clean): injecting faults: boom"}
	require.False(t, r.Healthy())
	require.Equal(t, []string{"ended by an error"}, r.problems())
	require.Contains(t, r.String(), "ended by an error: soak: round 4 (clean): injecting faults: boom")
}

// TestErrorLeavesLeaksUnmeasured: a run that an error ended did not
// measure its goroutines and descriptors after the last round, and its
// text report says so instead of showing them fall to 0.
func TestErrorLeavesLeaksUnmeasured(t *testing.T) {
	r := &Report{Mode: "netlab", Rounds: 3, Ops: 60, GoroutinesBefore: 14, FDsBefore: 9, Error: "soak: round 4 (clean): injecting faults: boom"}
	require.Contains(t, r.String(), "goroutines 14 -> not measured, open fds 9 -> not measured (the run ended by an error)")
	require.NotContains(t, r.String(), "-> 0")
	r.Error = ""
	r.GoroutinesAfter, r.FDsAfter = 14, 9
	require.Contains(t, r.String(), "goroutines 14 -> 14, open fds 9 -> 9, healthy true")
}
