package conformance_test

import (
	"testing"

	"github.com/metaroce/metaroce/conformance"
	"github.com/stretchr/testify/require"
)

// TestEvidenceNamesWantAndGot: ecn-echo and out-of-bounds say both what
// they require and what they observed, passed or failed; before, the
// required ce count and the required failure were left for the reader to
// know. out-of-bounds names only what it checks, never the NACK it does
// not wait for: whether that had reached the tester when the receive's
// failure was reported varied from run to run ("no NACK" in one, the
// NACK in the next).
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
	require.NotContains(t, oob.Evidence, "NACK")
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
