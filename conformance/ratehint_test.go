package conformance

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// TestSinceSent: the time from the RECV_READY to the first DATA is never
// shown negative. The send time was read after the write, and on loopback
// the IUT's first DATA, stamped by the kernel, often arrived before the
// write returned: the evidence read "first DATA -49µs after the RECV_READY
// left". It is read before the write now; a negative difference left can
// only be the wall clock stepping back, which the evidence names.
func TestSinceSent(t *testing.T) {
	sent := time.Date(2024, 5, 1, 12, 0, 0, 0, time.UTC)
	require.Equal(t, "1.234ms", sinceSent(sent, sent.Add(1234*time.Microsecond)))
	require.Equal(t, "0s", sinceSent(sent, sent))
	got := sinceSent(sent, sent.Add(-49*time.Microsecond))
	require.NotContains(t, got, "-")
	require.Equal(t, "0s (its arrival stamp reads 49µs before the send: the wall clock stepped back)", got)
}
