package transport

import (
	"testing"

	"github.com/metaroce/metaroce/transport/wire"
	"github.com/stretchr/testify/require"
)

// TestRecordHasAndProvedLate compares recordHas and timeoutRec.provedLate
// with a plain set of received PSNs built from the record's definition
// (every PSN below Cum; Cum+1+i for each SACK bit i), around zero and
// across the wrap of the 32-bit PSN space.
func TestRecordHasAndProvedLate(t *testing.T) {
	for _, base := range []wire.PSN{0, 1000, ^wire.PSN(0) - 100} {
		for _, tc := range []struct {
			cum  uint32
			bits []int
		}{
			{10, nil}, {10, []int{0}}, {10, []int{3, 7}}, {0, []int{255}}, {200, []int{0, 1, 2}},
		} {
			r := &wire.AckRecord{Cum: base + wire.PSN(tc.cum)}
			got := map[wire.PSN]bool{}
			for i := uint32(1); i <= tc.cum; i++ {
				got[r.Cum-wire.PSN(i)] = true
			}
			highest := r.Cum - 1
			for _, b := range tc.bits {
				r.Sack.Set(b)
				q := r.Cum + wire.PSN(b) + 1
				got[q] = true
				if highest.Less(q) {
					highest = q
				}
			}
			for d := -300; d <= 300; d++ {
				q := r.Cum + wire.PSN(int32(d))
				if d < 0 && -d > int(tc.cum) {
					continue // below the base: the reference set does not reach there
				}
				require.Equal(t, got[q], recordHas(r, q), "cum %d bits %v psn cum%+d", tc.cum, tc.bits, d)
				to := timeoutRec{next: q}
				require.Equal(t, highest.Less(q), to.provedLate(r), "cum %d bits %v next cum%+d", tc.cum, tc.bits, d)
			}
		}
	}
}
