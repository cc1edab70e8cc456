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

// TestAckFitsPeerMaxDgram: an ACK never exceeds the peer's max_dgram
// (docs/spec.md §2.5): to a peer that takes 576 bytes, 16 paths with
// something to acknowledge go in an ACK of 10 records and one of 6.
func TestAckFitsPeerMaxDgram(t *testing.T) {
	require.Equal(t, 10, wire.AckRecordsFit(wire.MinDatagram))
	require.Equal(t, 15, wire.AckRecordsFit(32+52*16-1))
	require.Equal(t, 16, wire.AckRecordsFit(32+52*16))
	require.Equal(t, 16, wire.AckRecordsFit(9000))

	_, c := testConn(t, Config{Planes: 1, PathsPerPlane: 1}, 576)
	for id := uint16(0); id < 16; id++ {
		c.onSequenced(1000, &wire.Header{Op: wire.OpProbe, Path: id, PSN: 0, Flags: wire.FlagAckReq}, NotECT, 0, false)
	}
	buf := make([]byte, 9000)
	covered := map[uint16]bool{}
	for _, want := range []int{10, 6} {
		tx, ok := c.poll(2000, buf)
		require.True(t, ok)
		require.LessOrEqual(t, tx.N, 576, "ACK of %d bytes to a peer that takes 576", tx.N)
		var a wire.Ack
		_, err := wire.ParseAck(&a, buf[:tx.N])
		require.NoError(t, err)
		require.Equal(t, want, a.N)
		for i := 0; i < a.N; i++ {
			covered[a.Records[i].Path] = true
		}
	}
	require.Len(t, covered, 16, "every path acknowledged")
	_, ok := c.poll(2000, buf)
	require.False(t, ok, "nothing left to acknowledge")
}
