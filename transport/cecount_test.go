package transport

import (
	"testing"

	"github.com/metaroce/metaroce/transport/wire"
	"github.com/stretchr/testify/require"
)

// TestStaleAckRecordDoesNotRecountCE: a record overtaken by a newer one on
// another reverse route carries an older running CE count; it must not
// move the path's last count back, or the marks in between are counted
// again by the next record (docs/spec.md §2.5). Checked around zero and
// across the wrap of the 32-bit counter.
func TestStaleAckRecordDoesNotRecountCE(t *testing.T) {
	for _, base := range []uint32{0, ^uint32(0)} {
		_, c := testConn(t, Config{Planes: 1, PathsPerPlane: 1}, 4152)
		p := c.paths[0]
		p.lastCE = base
		rr := &wire.RecvReady{Flow: 0, Msg: 0, N: 1}
		rr.Entries[0] = wire.RecvEntry{Capacity: 1 << 20}
		c.onRecvReady(0, rr)
		require.NoError(t, c.send(0, 0, 3*4096, 0, 1))
		buf := make([]byte, 9000)
		for i := 0; i < 3; i++ {
			_, ok := c.poll(1000, buf)
			require.True(t, ok)
		}
		// PSNs 0 and 1 received, one of them CE-marked.
		c.onAckRecord(20000, p, &wire.AckRecord{Path: 0, Cum: 2, CE: base + 1})
		require.Equal(t, uint64(1), p.stats.ECNMarks)
		// The stale record: PSN 0 received, no mark yet.
		c.onAckRecord(20100, p, &wire.AckRecord{Path: 0, Cum: 1, CE: base})
		require.Equal(t, base+1, p.lastCE, "a stale record moved the CE count back")
		// PSN 2 received, unmarked: still one mark in all.
		c.onAckRecord(20200, p, &wire.AckRecord{Path: 0, Cum: 3, CE: base + 1})
		require.Equal(t, uint64(1), p.stats.ECNMarks, "base %#x", base)
		require.Equal(t, uint64(1), c.stats.ECNMarks)
	}
}
