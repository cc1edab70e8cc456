package transport

import (
	"math/rand/v2"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestTimerqAgainstScan drives the deadline heap with random sets and
// removals and compares its minimum with a scan of a plain map after every
// step.
func TestTimerqAgainstScan(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 7))
	conns := make([]*Conn, 50)
	for i := range conns {
		conns[i] = &Conn{tidx: -1, id: ConnID(i)}
	}
	var q timerq
	ref := map[*Conn]Time{}
	for step := 0; step < 20000; step++ {
		c := conns[rng.IntN(len(conns))]
		switch rng.IntN(4) {
		case 0:
			q.remove(c)
			delete(ref, c)
		case 1:
			q.set(c, Never)
			delete(ref, c)
		default:
			d := Time(rng.IntN(1000))
			q.set(c, d)
			ref[c] = d
		}
		want := Never
		for _, d := range ref {
			want = min(want, d)
		}
		got := Never
		if len(q) > 0 {
			got = q[0].due
		}
		require.Equal(t, want, got, "step %d", step)
		require.Len(t, q, len(ref))
		for i, c := range q {
			require.Equal(t, i, c.tidx)
		}
	}
}

// TestHelloBackoff: HELLOs are retried after 4 × InitialRTT, doubling up to
// HandshakeRetry.
func TestHelloBackoff(t *testing.T) {
	e := NewEndpoint(Config{InitialRTT: 10 * Microsecond, HandshakeRetry: Millisecond}, rand.New(rand.NewPCG(1, 1)))
	c := &Conn{ep: e}
	want := []Time{40, 80, 160, 320, 640, 1000, 1000}
	for i, w := range want {
		c.helloTries = i
		require.Equal(t, w*Microsecond, c.helloInterval(), "retry %d", i)
	}
}

// TestHintFactor: the receiver scales every hint by its view of the queue
// in front of it: a marked round cuts by half the marked fraction and
// skips the next RTT's marks, an unmarked round returns half the way to 1.
func TestHintFactor(t *testing.T) {
	rtt := 10 * Microsecond
	e := NewEndpoint(Config{InitialRTT: rtt}, rand.New(rand.NewPCG(1, 1)))
	now := Time(0)
	require.Equal(t, 1.0, e.hintFactor(now))
	e.hintRx, e.hintCE = 100, 50
	now += rtt
	require.InDelta(t, 0.75, e.hintFactor(now), 1e-9)
	require.Equal(t, now+rtt, e.hintSkip)
	e.hintRx, e.hintCE = 100, 0
	now += rtt // still inside the doubled round
	require.InDelta(t, 0.75, e.hintFactor(now), 1e-9)
	now += rtt
	require.InDelta(t, 0.875, e.hintFactor(now), 1e-9)
	for i := 0; i < 10; i++ {
		e.hintRx, e.hintCE = 100, 100
		now += 2 * rtt
		e.hintFactor(now)
	}
	require.InDelta(t, 1.0/16, e.hintScale, 1e-9, "floor")
}

// TestHintScaleIgnoresMarksOfAnUnsaturatedInbound: CE marks on DATA that
// arrived at under 90% of the inbound rate were set by a queue elsewhere in
// the fabric, not in front of the receiver, and leave the hints alone (the
// scale keeps moving back to 1); the same marks on DATA arriving at the
// inbound rate cut it (docs/spec.md §3.5).
func TestHintScaleIgnoresMarksOfAnUnsaturatedInbound(t *testing.T) {
	rtt := 10 * Microsecond
	const rate = 50e9 // bytes/s: 500 KB per 10 µs round
	e := NewEndpoint(Config{InitialRTT: rtt, InboundRate: rate}, rand.New(rand.NewPCG(1, 1)))
	now := Time(0)
	require.Equal(t, 1.0, e.hintFactor(now))
	cases := []struct {
		name  string
		bytes uint64 // DATA bytes in the round
		want  float64
	}{
		{"half the rate, all marked", 250_000, 1},
		{"89% of the rate, all marked", 445_000, 1},
		{"the full rate, half marked", 500_000, 0.75},
	}
	for _, tc := range cases {
		e.hintRx, e.hintCE, e.hintBytes = 100, 50, tc.bytes
		if tc.want == 1 {
			e.hintCE = 100
		}
		now += rtt
		require.InDelta(t, tc.want, e.hintFactor(now), 1e-9, tc.name)
	}
	// After the cut the marks of the next InitialRTT are skipped: the
	// round's counting begins at hintSkip, and its span is measured from
	// there, so a saturated inbound still reads as saturated.
	require.Equal(t, now+rtt, e.hintFrom)
	e.hintRx, e.hintCE, e.hintBytes = 100, 100, 500_000 // one InitialRTT at the full rate
	now += 2 * rtt
	require.InDelta(t, 0.375, e.hintFactor(now), 1e-9)
}
