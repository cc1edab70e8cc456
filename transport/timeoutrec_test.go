package transport

import (
	"testing"

	"github.com/metaroce/metaroce/transport/wire"
	"github.com/stretchr/testify/require"
)

// TestTimeoutRecTakeAcked checks timeoutRec against a plain set: which
// PSNs an ACK record shows received, and which merged timeouts that makes
// spurious, counted once each.
func TestTimeoutRecTakeAcked(t *testing.T) {
	sack := func(cum wire.PSN, got ...wire.PSN) *wire.AckRecord {
		r := &wire.AckRecord{Cum: cum}
		for _, q := range got {
			r.Sack.Set(int(q.Diff(cum)) - 1)
		}
		return r
	}
	type step struct {
		ack            *wire.AckRecord
		pkts, timeouts int
		pending        bool
	}
	for _, tc := range []struct {
		name  string
		tos   [][]wire.PSN // PSNs each timeout declared lost
		steps []step
	}{
		{"none received", [][]wire.PSN{{10, 11, 12}}, []step{{sack(10), 0, 0, true}}},
		{"cumulative", [][]wire.PSN{{10, 11, 12}}, []step{{sack(12), 2, 1, true}, {sack(13), 1, 0, false}}},
		{"selective", [][]wire.PSN{{10, 11, 12}}, []step{{sack(9, 11), 1, 1, true}, {sack(9, 11), 0, 0, true}}},
		{"merged, first shown", [][]wire.PSN{{10, 11}, {12}}, []step{{sack(11), 1, 1, true}, {sack(13), 2, 1, false}}},
		{"merged, second only", [][]wire.PSN{{10, 11}, {12}}, []step{{sack(10, 12), 1, 1, true}}},
		{"not declared by it", [][]wire.PSN{{10, 12}}, []step{{sack(10, 11, 12), 1, 1, true}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var rec timeoutRec
			for _, psns := range tc.tos {
				rec.begin(psns[0], psns[len(psns)-1]+1, 5, true, true)
				for _, q := range psns {
					rec.add(q)
				}
			}
			require.Equal(t, len(tc.tos), rec.n)
			for i, s := range tc.steps {
				pkts, tos := rec.takeAcked(s.ack)
				require.Equal(t, s.pkts, pkts, "step %d packets", i)
				require.Equal(t, s.timeouts, tos, "step %d timeouts", i)
				require.Equal(t, s.pending, rec.pending, "step %d pending", i)
			}
		})
	}
}

// TestTimeoutRecStartsAfresh: a record already shown spurious, full, or
// too far behind the path's next PSN is not extended by a new timeout.
func TestTimeoutRecStartsAfresh(t *testing.T) {
	var rec timeoutRec
	rec.begin(0, 4, 1, true, true)
	rec.add(0)
	for i := 1; i < maxMergedTimeouts; i++ {
		rec.begin(wire.PSN(i*4), wire.PSN(i*4+4), 1, false, true)
		rec.add(wire.PSN(i * 4))
	}
	require.Equal(t, maxMergedTimeouts, rec.n)
	rec.begin(100, 104, 2, false, true)
	require.Equal(t, 1, rec.n, "a full record starts afresh")
	require.Equal(t, wire.PSN(100), rec.lo)
	require.False(t, rec.markedBad)
	rec.add(100)
	rec.begin(100+wire.SackBits, 101+wire.SackBits, 3, false, true)
	require.Equal(t, 1, rec.n, "a record the receiver may have slid past starts afresh")
}
