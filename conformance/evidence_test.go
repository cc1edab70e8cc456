package conformance_test

import (
	"testing"

	"github.com/metaroce/metaroce/conformance"
	"github.com/stretchr/testify/require"
)

// TestEvidenceNamesWantAndGot: ecn-echo and out-of-bounds say both what
// they require and what they observed, passed or failed; before, the
// required ce count and the required failure were left for the reader to
// know. out-of-bounds names the NACK BAD_OFFSET it waits for beside the
// one it requires.
func TestEvidenceNamesWantAndGot(t *testing.T) {
	run := func(sw fakeSwitches) map[string]conformance.Result {
		f, err := newFakeWith(false, sw)
		require.NoError(t, err)
		defer f.Close()
		return runCases(t, f, "out-of-bounds", "ecn-echo")
	}
	good := run(fakeSwitches{})
	oob := good["out-of-bounds"]
	require.Equal(t, conformance.Pass, oob.Verdict, oob.Evidence)
	require.Contains(t, oob.Evidence, "receive failed, want failed (")
	require.Contains(t, oob.Evidence, "2048 of 2048 guard bytes intact, want all")
	require.Contains(t, oob.Evidence, "; NACK BAD_OFFSET value 2288, want BAD_OFFSET value 2288")
	ecn := good["ecn-echo"]
	if ecn.Verdict == conformance.Skip {
		t.Logf("ecn-echo skipped here: %s", ecn.Evidence)
	} else {
		require.Equal(t, conformance.Pass, ecn.Verdict, ecn.Evidence)
		require.Contains(t, ecn.Evidence, "ce 3, want 3")
	}

	bad := run(fakeSwitches{boundsByOffset: true, ignoreCE: true})
	oob = bad["out-of-bounds"]
	require.Equal(t, conformance.Fail, oob.Verdict, oob.Evidence)
	require.Contains(t, oob.Evidence, "want the guard byte 0xa5")
	if ecn := bad["ecn-echo"]; ecn.Verdict != conformance.Skip {
		require.Equal(t, conformance.Fail, ecn.Verdict, ecn.Evidence)
		require.Contains(t, ecn.Evidence, "ce 0, want 3")
	}
}

// TestOutOfBoundsNackEitherOrder: the NACK BAD_OFFSET and the failure of
// the receive leave the IUT on the same DATA by different ways, the socket
// and the control channel, and out-of-bounds passes whichever the tester
// sees first: the fake decides the race each way (it reports the failure
// only once the tester acknowledged the NACK, or sends the NACK only once
// the tester took the failure), and leaves it open as well.
func TestOutOfBoundsNackEitherOrder(t *testing.T) {
	for _, tc := range []struct {
		name string
		nack oversizeNack
	}{
		{"as they come", oversizeRight},
		{"NACK first", oversizeNackFirst},
		{"NACK last", oversizeNackLast},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f, err := newFakeWith(false, fakeSwitches{oversizeNack: tc.nack})
			require.NoError(t, err)
			defer f.Close()
			r := runCases(t, f, "out-of-bounds")["out-of-bounds"]
			require.Equal(t, conformance.Pass, r.Verdict, r.Evidence)
			require.Contains(t, r.Evidence, "NACK BAD_OFFSET value 2288, want BAD_OFFSET value 2288")
		})
	}
}

// TestPlacementNackEitherOrder: the NACK BAD_OFFSET that DATA disagreeing
// with its message draws may reach the tester before the receive
// completes or after, and the placement cases pass either way: the fake
// sends it at once, ahead of the DATA's acknowledgement, or holds it until
// the tester has taken the completion.
func TestPlacementNackEitherOrder(t *testing.T) {
	for _, tc := range []struct {
		name string
		nack placementFault
	}{
		{"NACK first", placementRight},
		{"NACK last", placementNackLast},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f, err := newFakeWith(false, fakeSwitches{placement: tc.nack})
			require.NoError(t, err)
			defer f.Close()
			rs := runCases(t, f, placementIDs...)
			for id, want := range map[string]string{
				"placement-index":          "NACK BAD_OFFSET value 1144, want BAD_OFFSET value 1144",
				"placement-length":         "NACK BAD_OFFSET value 2288, want BAD_OFFSET value 2288",
				"placement-offset":         "NACK BAD_OFFSET value 1716, want BAD_OFFSET value 1716",
				"placement-size":           "NACK BAD_OFFSET value 1144, want BAD_OFFSET value 1144",
				"placement-capacity":       "NACK BAD_OFFSET value 3432, want BAD_OFFSET value 3432",
				"placement-first":          "NACK BAD_OFFSET value 2860, want BAD_OFFSET value 2860",
				"placement-first-oversize": "NACK BAD_OFFSET value 2288, want BAD_OFFSET value 2288",
			} {
				require.Equal(t, conformance.Pass, rs[id].Verdict, "%s: %s", id, rs[id].Evidence)
				require.Contains(t, rs[id].Evidence, want, id)
			}
		})
	}
}
