package conformance

import (
	"context"
	"testing"
	"time"

	"github.com/metaroce/metaroce/transport/wire"
	"github.com/stretchr/testify/require"
)

// TestRepeats checks which DATA count as repeated content, which copy came
// before each, and the age by the IUT's timestamps, wrap-around included.
func TestRepeats(t *testing.T) {
	t0 := time.Unix(1000, 0)
	// pkt is a DATA of flow 1 arriving i µs after t0.
	pkt := func(i int, path uint16, psn wire.PSN, off uint64, ts uint32) rxData {
		return rxData{at: t0.Add(time.Duration(i) * time.Microsecond), flow: 1, path: path, psn: psn, off: off, ts: ts}
	}
	type want struct {
		off                uint64
		path               uint16
		psn                wire.PSN
		prevPath           uint16
		prevPSN, oldestPSN wire.PSN
		age                time.Duration
		timerShaped        bool
	}
	for _, tc := range []struct {
		name string
		rx   []rxData
		lost []rxData
		want []want
	}{
		{name: "distinct content", rx: []rxData{pkt(0, 0, 0, 0, 0), pkt(1, 1, 0, 1144, 10), pkt(2, 0, 1, 2288, 20)}},
		{
			name: "other flow ignored",
			rx:   []rxData{pkt(0, 0, 0, 0, 0), {at: t0.Add(time.Millisecond), flow: 2, path: 0, psn: 1, off: 0, ts: 5e6}},
		},
		{
			name: "a lost packet's retransmission is no repeat, a second one is",
			lost: []rxData{pkt(0, 0, 0, 0, 0)},
			rx:   []rxData{pkt(1, 0, 1, 1144, 10_000), pkt(2, 0, 2, 0, 500_000), pkt(3, 1, 0, 0, 2_500_000)},
			want: []want{{off: 0, path: 1, psn: 0, prevPath: 0, prevPSN: 2, oldestPSN: 0, age: 2500 * time.Microsecond, timerShaped: true}},
		},
		{
			name: "immediate repeat on the same path",
			rx:   []rxData{pkt(0, 1, 0, 0, 1_000), pkt(1, 1, 1, 1144, 2_000), pkt(2, 1, 2, 0, 101_000)},
			want: []want{{off: 0, path: 1, psn: 2, prevPath: 1, prevPSN: 0, oldestPSN: 0, age: 100 * time.Microsecond}},
		},
		{
			name: "oldest packet at or below the earlier copy's PSN",
			rx:   []rxData{pkt(0, 2, 0, 0, 0), pkt(1, 2, 1, 1144, 400_000), pkt(2, 2, 2, 1144, 1_200_000)},
			want: []want{{off: 1144, path: 2, psn: 2, prevPath: 2, prevPSN: 1, oldestPSN: 0, age: 1200 * time.Microsecond, timerShaped: true}},
		},
		{
			name: "timestamps wrap at 2^32 ns",
			rx:   []rxData{pkt(0, 0, 0, 0, 0xFFFF_FF00), pkt(1, 0, 1, 0, 1_000_000)},
			want: []want{{off: 0, path: 0, psn: 1, prevPath: 0, prevPSN: 0, oldestPSN: 0, age: 1_000_256, timerShaped: true}},
		},
		{
			name: "held copy processed late is ordered by arrival",
			rx:   []rxData{pkt(5, 0, 0, 0, 0), pkt(2, 1, 0, 0, 300_000)},
			want: []want{{off: 0, path: 0, psn: 0, prevPath: 1, prevPSN: 0, oldestPSN: 0, age: -300 * time.Microsecond}},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := &peer{rxData: tc.rx}
			var got []want
			for _, r := range p.repeats(1, tc.lost) {
				got = append(got, want{off: r.d.off, path: r.d.path, psn: r.d.psn, prevPath: r.prev.path, prevPSN: r.prev.psn,
					oldestPSN: r.psn0, age: time.Duration(r.age), timerShaped: r.timerShaped()})
			}
			require.Equal(t, tc.want, got)
		})
	}
}

// TestUntilNoRepeats checks the attempt loop: a clean attempt ends it, a
// fault without repeats ends it at once, and repeats on every attempt fail.
func TestUntilNoRepeats(t *testing.T) {
	rep := []repeat{{}}
	for _, tc := range []struct {
		name     string
		results  []Verdict // verdict of each attempt
		repeats  []bool    // whether each attempt saw repeated content
		want     Verdict
		attempts int
	}{
		{"clean first", []Verdict{Pass}, []bool{false}, Pass, 1},
		{"fault without repeats", []Verdict{Fail}, []bool{false}, Fail, 1},
		{"repeats then clean", []Verdict{Fail, Fail, Pass}, []bool{true, true, false}, Pass, 3},
		{"repeats then another fault", []Verdict{Fail, Fail}, []bool{true, false}, Fail, 2},
		{"repeats every time", []Verdict{Fail, Fail, Fail, Fail}, []bool{true, true, true, true}, Fail, senderAttempts},
	} {
		t.Run(tc.name, func(t *testing.T) {
			n := 0
			v, ev := untilNoRepeats(t.Context(), &Env{}, func(context.Context, *Env) (Verdict, string, []repeat) {
				i := n
				n++
				require.Less(t, i, len(tc.results), "attempt after the case was decided")
				if tc.repeats[i] {
					return tc.results[i], "repeated", rep
				}
				return tc.results[i], "decided", nil
			})
			require.Equal(t, tc.want, v, ev)
			require.Equal(t, tc.attempts, n)
		})
	}
}

// TestJudgeReorder: an attempt of sender-reorder in which no DATA of
// another path overtook a held one is skipped, saying that nothing was
// reordered; it passed, claiming that DATA "delivered behind 0 later
// DATA" caused no retransmission.
func TestJudgeReorder(t *testing.T) {
	f := dataFacts{packets: 24, paths: map[uint16]int{0: 6, 1: 6, 2: 6, 3: 6}}
	v, why, _ := judgeReorder(0, 6, 0, f, nil)
	require.Equal(t, Skip, v, why)
	require.Equal(t, "6 DATA of path 0 held, but no DATA of another path arrived while they were (24 DATA, 4 paths): nothing was reordered", why)

	v, why, _ = judgeReorder(0, 6, 3, f, nil)
	require.Equal(t, Pass, v, why)
	require.Equal(t, "6 DATA of path 0 delivered behind 3 later DATA of other paths (24 DATA, 4 paths): no retransmission", why)

	rep := repeat{d: rxData{off: 1144, path: 1, psn: 7}, prev: rxData{path: 1, psn: 2}}
	v, _, reps := judgeReorder(0, 6, 3, f, []repeat{rep})
	require.Equal(t, Fail, v, "repeated content fails whatever was reordered")
	require.Len(t, reps, 1, "the repeats the failure rests on, for untilNoRepeats")

	onePath := dataFacts{packets: 24, paths: map[uint16]int{0: 24}}
	v, why, _ = judgeReorder(0, 24, 0, onePath, nil)
	require.Equal(t, Skip, v)
	require.Contains(t, why, "the IUT sent on 1 path")
}

// TestReorderOnePathSkipsAtOnce: a sender on one path is skipped at its
// first attempt, repeats or not, as before the check for an attempt that
// reordered nothing: its repeats were returned with the skip, which made
// the attempt inconclusive, so that sender-reorder tried again and, where
// every attempt repeated, failed for repeats that no reordering caused.
func TestReorderOnePathSkipsAtOnce(t *testing.T) {
	onePath := dataFacts{packets: 24, paths: map[uint16]int{0: 24}}
	rep := repeat{d: rxData{off: 1144, path: 0, psn: 30}, prev: rxData{path: 0, psn: 2}}
	tries := 0
	v, why := untilNoRepeats(context.Background(), nil, func(context.Context, *Env) (Verdict, string, []repeat) {
		tries++
		return judgeReorder(0, 24, 0, onePath, []repeat{rep})
	})
	require.Equal(t, Skip, v, why)
	require.Equal(t, 1, tries)
	require.Contains(t, why, "the IUT sent on 1 path")
}
