package conformance

import (
	"fmt"
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

// TestJudgeStaleTooLittle: a stale check that measured too little past the
// restart allowance is skipped, saying why, whatever the rate of the few
// bytes measured: it passed, and a check that cannot fail proved nothing.
func TestJudgeStaleTooLittle(t *testing.T) {
	little := paceSpan{measured: segment, span: time.Second}
	v, why := judgeStale(little, 9, 6)
	require.Equal(t, Skip, v)
	require.Contains(t, why, "the IUT's restart used 9 paths, the message was sized for 6")
	require.Contains(t, why, "too little to judge")

	paced := paceSpan{measured: hintedSegments * segment, span: time.Duration(float64(hintedSegments*segment) / hintBytesPerSec * float64(time.Second))}
	v, why = judgeStale(paced, 4, 4)
	require.Equal(t, Pass, v, why)
	burst := paceSpan{measured: hintedSegments * segment, span: time.Millisecond}
	v, _ = judgeStale(burst, 4, 4)
	require.Equal(t, Fail, v)
}

// TestJudgeFreshTooLittle: the fresh check fails when too little was
// measured past its allowance to judge a rate, saying so; it passed on
// nothing measured (a rate of 0), as for a sender whose DATA, larger than
// the tester's max_dgram allows, carried the message in two datagrams.
func TestJudgeFreshTooLittle(t *testing.T) {
	for _, m := range []paceSpan{
		{largest: 40000}, // nothing after the first measured DATA
		{measured: 6000, span: time.Second, largest: 20000},           // one gap, paced
		{measured: minMeasured - 1, span: time.Second, largest: 5000}, // just short
	} {
		v, why := judgeFresh(m)
		require.Equal(t, Fail, v, "%+v", m)
		require.Contains(t, why, "too little to judge the rate")
		require.Contains(t, why, fmt.Sprintf("the largest DATA carried %d B, the tester's max_dgram allows %d", m.largest, segment))
	}
	paced := paceSpan{measured: hintedSegments * segment, span: time.Duration(float64(hintedSegments*segment) / hintBytesPerSec * float64(time.Second)), largest: segment}
	v, why := judgeFresh(paced)
	require.Equal(t, Pass, v, why)
	burst := paceSpan{measured: hintedSegments * segment, span: time.Millisecond, largest: segment}
	v, _ = judgeFresh(burst)
	require.Equal(t, Fail, v)
}
